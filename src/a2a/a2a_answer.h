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
/* The artifacts of a task's end, as JSON: what handoffctl and the hub
 * read of an archive/NAME.result (twice a local result's size, less the
 * envelope's room). */
#define A2A_RESULT_MAX (120 * 1024)
#define A2A_ARTIFACTS_MAX 256
#define A2A_CARD_MAX (256 * 1024)     /* a larger card is not read */

enum a2a_verdict {
        A2A_OK,         /* a task (or a direct message): see state */
        A2A_RETRY,      /* unreachable, 5xx, 408/429, internal error: again later */
        A2A_FINAL,      /* 4xx, an A2A error: the server will not take it */
        A2A_TOKEN,      /* 401, 403: the token refused; again later, loudly */
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
        bool streamed;                  /* GET: a stream's time bound ended, the task running */
        /* The task's artifacts, whole, in order while they fit:
         * {"text": their text parts, "data": {"artifacts": [...],
         * "omitted": N}} as ASCII JSON of at most A2A_RESULT_MAX bytes,
         * malloc'd (a2a_result_free()); NULL when it has none. */
        char *result;
};

void a2a_result_free(struct a2a_result *r);

/* The line's form of a state: completed, failed, canceled, rejected,
 * input_required, auth_required (an end for handoffd), submitted, working. */
bool a2a_state_final(const char *state);
/* http: the status (0: no answer, curl_err then says why).  ctx: the
 * contextId a LIST asked for (NULL otherwise); a listed task of another
 * context is not ours and is passed over.  A LIST that finds none is OK
 * with no task. */
void a2a_answer_parse(enum a2a_op op, long http, const char *curl_err, const char *ctx,
                      const char *body, size_t len, struct a2a_result *out);
/* One event of a SubscribeToTask stream (its data: lines joined): 0 when
 * it speaks of task, with the state it gives (NULL for an artifact's
 * update), or -1 (an error, not JSON-RPC, another task). */
int a2a_stream_event(const char *data, size_t len, const char *task, const char **ret_state);
/* An agent card's URL: its path ends in /.well-known/agent-card.json
 * (or 0.3's agent.json). */
bool a2a_card_url(const char *url);
/* The JSON-RPC interface URL of the agent card in body (A2A 1.0's
 * supportedInterfaces with protocolBinding JSONRPC, or 0.3's url with
 * preferredTransport JSONRPC or additionalInterfaces), into buf: 0, or
 * -1 with why (the card is not one, no JSON-RPC interface, or one on
 * another origin than card_url's when !cross_origin); *ret_streaming:
 * its capabilities.streaming. */
int a2a_card_interface(const char *body, size_t len, const char *card_url, bool cross_origin,
                       char *buf, size_t size, bool *ret_streaming, char *why, size_t why_size);
/* Printable ASCII of s (at most n bytes of it), into buf: what goes on the
 * line to handoffd and into its logs. */
void a2a_clean(char *buf, size_t size, const char *s, size_t n);

#endif
