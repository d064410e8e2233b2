/* What the service manager is told (READY=1, STATUS=, WATCHDOG=1,
 * STOPPING=1: notify.h) and the stop; see service.c. */
#ifndef HD_SERVICE_H
#define HD_SERVICE_H

#include "loop.h"

/* STATUS= following the counts, and the watchdog, when a service manager
 * asks for them. */
void service_start(struct daemon *d);

/* STATUS= now (after a reload). */
void service_status(struct daemon *d);

/* READY=1 if the start is done far enough. */
void service_maybe_ready(struct daemon *d);

/* Stop the loop with code (0: asked to; else a fatal error). */
void service_stop(struct daemon *d, int code);

#endif
