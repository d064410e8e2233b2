/* handoff-hubd's log line (hub_log.c): the leaf every part of the hub
 * logs through, so that no part calls back up into main.c. */
#ifndef HUBD_HUB_LOG_H
#define HUBD_HUB_LOG_H

/* One line, "handoff-hubd: " + message, on stderr: journald picks it up. */
void hub_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
