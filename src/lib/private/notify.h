/* The service manager's notification protocol (sd_notify(3), "Standalone
 * implementations"), written here so that handoffd does not link
 * libsystemd for it: one datagram of "KEY=value" lines to the AF_UNIX
 * socket named by NOTIFY_SOCKET (a path, or '@' for an abstract name). */
#ifndef HD_NOTIFY_H
#define HD_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

/* Whether NOTIFY_SOCKET is set: a service manager listens. */
bool notify_enabled(void);

/* Send msg ("READY=1", lines joined by '\n').  1 when sent, 0 when no
 * service manager listens (NOTIFY_SOCKET unset), -errno on failure. */
int notify_send(const char *msg);
int notify_sendf(const char *fmt, ...) _printf_(1, 2);

/* As sd_watchdog_enabled(3) (never unsetting the environment): > 0 with
 * *ret_usec set when WATCHDOG_USEC is set and WATCHDOG_PID is unset or our
 * pid, 0 when keep-alives are not expected of this process, -EINVAL when
 * either variable does not parse. */
int notify_watchdog_usec(uint64_t *ret_usec);

#endif
