/* What handoff-a2a makes of an A2A server's answer (a2a_answer.c): the
 * only code that reads bytes from the remote server.  Plain function over
 * a buffer, no I/O: tests/fuzz/fuzz_a2a_answer.c calls it. */
#ifndef HD_A2A_ANSWER_H
#define HD_A2A_ANSWER_H

#include <stdbool.h>
#include <stddef.h>

#define A2A_ANSWER_MAX (1024 * 1024)    /* a larger body is not read */
#define A2A_TASK_ID_MAX 256
#define A2A_TEXT_MAX 300

enum a2a_verdict {
        A2A_OK,         /* a task (or a direct message): see state */
        A2A_RETRY,      /* unreachable, 5xx, 408/429, internal error: again later */
        A2A_FINAL,      /* 4xx, an A2A error: the server will not take it */
};

/* LIST: ListTasks by contextId, asked before a send whose earlier try's
 * outcome is unknown: the task of ours it lists, if any. */
enum a2a_op { A2A_OP_SEND, A2A_OP_GET, A2A_OP_LIST };

struct a2a_result {
        enum a2a_verdict verdict;
        char task[A2A_TASK_ID_MAX + 1]; /* "" when none */
        const char *state;              /* a2a_state_names[] entry, or "unknown" */
        char text[A2A_TEXT_MAX + 1];    /* error, or the task's text: printable ASCII, no tab */
        bool unsupported;               /* LIST: the server has no ListTasks */
};

/* The line's form of a state: completed, failed, canceled, rejected,
 * input_required, auth_required (an end for handoffd), submitted, working. */
bool a2a_state_final(const char *state);
/* http: the status (0: no answer, curl_err then says why).  ctx: the
 * contextId a LIST asked for (NULL otherwise); a listed task of another
 * context is not ours and is passed over.  A LIST that finds none is OK
 * with no task. */
void a2a_answer_parse(enum a2a_op op, long http, const char *curl_err, const char *ctx,
                      const char *body, size_t len, struct a2a_result *out);
/* Printable ASCII of s (at most n bytes of it), into buf: what goes on the
 * line to handoffd and into its logs. */
void a2a_clean(char *buf, size_t size, const char *s, size_t n);

#endif
