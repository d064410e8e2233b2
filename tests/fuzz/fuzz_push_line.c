/* libFuzzer target: the hub's reading of handoff-push's answer line
 * (src/push/push_line.c), the bytes of a process that has read a
 * stranger's webhook answer.  Input: one line (without its newline).
 *
 * Properties: what is read is a verdict of the two, a delivered one has
 * a 2xx; its text printable ASCII without tab within PUSH_TEXT_MAX; and
 * it is written back as the same line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "push_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct push_reply r, again;
        char buf[PUSH_TEXT_MAX + 64];
        int n;

        if (push_line_parse((const char *)data, size, &r) < 0)
                return 0;
        if (r.verdict != PUSH_DELIVERED && r.verdict != PUSH_RETRY)
                abort();
        if (r.verdict == PUSH_DELIVERED && (r.http < 200 || r.http > 299))
                abort();
        if (strlen(r.text) > PUSH_TEXT_MAX)
                abort();
        for (const char *p = r.text; *p; p++)
                if (*p < 0x20 || *p >= 0x7f)
                        abort();
        n = push_line_format(&r, buf, sizeof(buf));
        if (n < 1 || push_line_parse(buf, (size_t)n - 1, &again) < 0 ||
            again.n != r.n || again.http != r.http || again.verdict != r.verdict ||
            strcmp(again.text, r.text))
                abort();
        return 0;
}
