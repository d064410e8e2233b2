/* A2A push notifications (hub_push.c): the configs of each task kept in
 * state_dir/push.d/, each event of the task queued there before the hub
 * shows the change, and POSTed by handoff-push (src/push/) until a 2xx. */
#ifndef HUBD_HUB_PUSH_H
#define HUBD_HUB_PUSH_H

#include <jansson.h>

#include "hub.h"

#define PUSH_DIR "push.d"
#define HUB_PUSH_MAX_PER_TASK 8         /* configs of one task */
#define HUB_PUSH_MAX_PER_TOKEN 1000     /* tasks with configs, of one token */
#define HUB_PUSH_RETRY_MAX_S 300        /* the back-off's ceiling */
#define HUB_PUSH_TRY_S 40               /* handoff-push's answer to one POST */

struct a2a_call;

/* At start, with [hub] signing_key: the queued tasks indexed, the sender
 * thread (and handoff-push) started.  0, or a HUB_EXIT_* code (logged). */
int hub_push_start(struct hub *h);
void hub_push_stop(struct hub *h);
/* Whether push notifications are on (the card's pushNotifications). */
/* The task (a Task of the spool's, agent's) as the hub is about to show
 * it: each change since the last one queued for its configs is queued
 * first, on disk; hist: its events (a2a_task_lookup_full()).  0 or
 * -errno (then the hub must not show it). */
int hub_push_observe(struct hub *h, const char *agent, const json_t *task, const json_t *hist);
/* SendMessage's configuration.taskPushNotificationConfig, if any: is it
 * one that may be kept?  0, or the JSON-RPC error answered (1). */
int a2a_push_inline_check(struct a2a_call *c);
/* ... kept for task (the answer about to go), idempotent: 0 or -errno. */
int a2a_push_inline_attach(struct a2a_call *c, const json_t *task);

/* Pushes past their item's retention (HUB_A2A_KEEP) removed. */
void hub_push_prune(struct hub *h, int64_t now_s);

#endif
