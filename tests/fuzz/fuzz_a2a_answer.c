/* libFuzzer target: an A2A server's answer as handoff-a2a reads it
 * (src/a2a/a2a_answer.c), the only code that parses bytes from a remote
 * A2A server.  Input: one byte for the call (modulo 3: SendMessage,
 * GetTask, ListTasks), two for the HTTP status (big-endian, modulo 600), the body.
 *
 * Properties: the verdict is one of the three; the task id, the state and
 * the text are what handoffd's line check accepts (printable ASCII, no
 * tab, within their limits); an OK send or get names a state.  The body
 * is read as a SubscribeToTask stream's event too: a state it gives is
 * one of the line's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "a2a_answer.h"

static void printable(const char *s, size_t max)
{
        size_t n = strlen(s);

        if (n > max)
                abort();
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
                        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct a2a_result r;

        if (size < 3)
                return 0;
        enum a2a_op op = data[0] % 3 == 0 ? A2A_OP_SEND : data[0] % 3 == 1 ? A2A_OP_GET : A2A_OP_LIST;
        long http = ((long)data[1] << 8 | data[2]) % 600;
        a2a_answer_parse(op, http, "curl error", "ctx", (const char *)data + 3, size - 3, &r);
        if (r.verdict != A2A_OK && r.verdict != A2A_RETRY && r.verdict != A2A_FINAL &&
            r.verdict != A2A_TOKEN)
                abort();
        /* the result: one line of ASCII within its bound */
        if (r.result) {
                if (strlen(r.result) > A2A_RESULT_MAX)
                        abort();
                for (const char *p = r.result; *p; p++)
                        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7f)
                                abort();
        }
        a2a_result_free(&r);
        printable(r.task, A2A_TASK_ID_MAX);
        printable(r.text, A2A_TEXT_MAX);
        if (strchr(r.task, ' ') || !r.state)
                abort();
        if (r.verdict == A2A_OK && !strcmp(r.state, "unknown") && !r.task[0] && op != A2A_OP_LIST)
                abort();
        const char *st;
        if (a2a_stream_event((const char *)data + 3, size - 3, "ctx", &st) == 0 && st &&
            !a2a_state_final(st) && strcmp(st, "submitted") && strcmp(st, "working"))
                abort();
        return 0;
}
