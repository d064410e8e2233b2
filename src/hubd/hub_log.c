/* handoff-hubd's log line: one line on stderr per call, whatever thread
 * makes it (a single fprintf of the whole line). */
#include <stdarg.h>
#include <stdio.h>

#include "hub_log.h"

void hub_log(const char *fmt, ...)
{
        char buf[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        fprintf(stderr, "handoff-hubd: %s\n", buf);
}
