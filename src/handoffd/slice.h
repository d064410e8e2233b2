/* Work a user can make large (the sweep over claimed/), done a slice of
 * about SLICE_USEC per loop turn, so that inotify, signals and the control
 * socket are polled between slices; and the sweep timer, never armed
 * below a floor.  See slice.c. */
#ifndef HD_SLICE_H
#define HD_SLICE_H

#include <stdbool.h>

#include "loop.h"

/* A slice of a sweep (or of deciding a batch: intake.h) takes about this
 * long, then yields to the loop. */
#define SLICE_USEC 10000

/* Begin a sweep (or have the one under way done once more); its slices
 * run on the loop's idle turns. */
void slice_sweep(struct daemon *d, bool at_start);

/* A bootstrap name left an agent's handoffs/ (inotify).  Its item is
 * looked at in the loop's idle turns, a slice at a time, and the syncs
 * of a slice are shared.  Past GONE_MAX waiting names, a sweep looks
 * instead. */
void slice_gone(struct daemon *d, const char *name);

/* Arm the sweep timer for the earliest deadline (p->deadline, sp->due). */
void slice_arm(struct daemon *d);

#endif
