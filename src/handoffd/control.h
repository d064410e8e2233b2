/* The control socket: one JSON request and one JSON response per
 * connection, peers checked with SO_PEERCRED (root, the daemon's user, or
 * members of [control] group). */
#ifndef HD_CONTROL_H
#define HD_CONTROL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <uv.h>

#include "config.h"
#include "spool.h"

struct parts;

#define CONTROL_REQUEST_MAX 4096
/* A request of a peer that may act for agents (a result to record):
 * HD_RESULT_MAX_SIZE of text, every byte of it escaped, and room. */
#define CONTROL_AGENT_REQUEST_MAX (8 * 64 * 1024)
/* Open connections at most, in all and per peer uid (handoffd(8)). */
#define CONTROL_MAX_CONNS 64
#define CONTROL_MAX_PER_UID 8
/* ... for [control] hub_user: handoff-hubd asks from each of its 8 pool
 * threads and its watcher at once. */
#define CONTROL_MAX_PER_HUB 16

struct control;

/* The configuration the daemon runs on, as status tells it. */
struct control_config {
        const char *path;
        const unsigned char *digest;    /* SHA-256 of the file as loaded */
        int64_t loaded_usec;            /* wall clock */
        int64_t reload_failed_usec;     /* 0: no reload failed since */
        const char *reload_error;
};

int control_open(uv_loop_t *loop, struct config *cfg, const struct parts *p,
                 struct control **ret);
void control_close(struct control *c);
/* A reload that worked: cfg runs now.  One that failed: why, until the
 * next that works. */
void control_set_config(struct control *c, struct config *cfg);
void control_reload_failed(struct control *c, const char *why);

/* The daemon's side of `handoffctl status`: daemon facts and counters. */
json_t *control_status(const struct parts *p, const struct control_config *cc);

/* Answer one request (untrusted bytes) into *ret (malloc'ed JSON text). */
int control_handle(const struct parts *p, const struct control_config *cc,
                   const char *req, size_t len, char **ret);
/* The same for a peer that may (agent_peer) or may not act for agents. */
int control_handle_peer(const struct parts *p, const struct control_config *cc,
                        const char *req, size_t len, bool agent_peer, char **ret);

/* control_agent.c: may the peer uid act for agents (root, the daemon's
 * user, [control] hub_user)?  Is cmd one of the agent commands (then
 * *ret is its answer, or a refusal when !agent_peer, NULL out of
 * memory)? */
bool control_agent_peer(const struct config *cfg, uid_t uid);
/* Is uid [control] hub_user's? */
bool control_hub_peer(const struct config *cfg, uid_t uid);
bool control_agent_command(const struct parts *p, const char *cmd, const json_t *doc,
                           bool agent_peer, json_t **ret);

/* May a peer with these credentials talk to us? gids: its groups. */
int control_peer_allowed(uid_t uid, const gid_t *gids, size_t n_gids,
                         const char *group);

#endif
