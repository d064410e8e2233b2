/* The daemon: sets up the loop (loop.h) and its parts, runs it, reloads
 * on SIGHUP. */
#ifndef HD_DAEMON_H
#define HD_DAEMON_H

#include "config.h"

struct parts;

/* The configuration as the daemon takes it, at -n, at start and at each
 * reload alike: config_load() with the keys, the relay's own keys
 * (config_relay_keys()) and the A2A remotes' token files
 * (config_a2a_tokens_check()).  As config_load(). */
int daemon_config_load(const char *path, struct config **ret, char **err);

/* The storage and every module's state for cfg, as daemon_run() opens
 * them (the unit tests too): 0 or -errno, p as it was on failure. */
int daemon_parts_open(struct config *cfg, struct parts *p);
/* Everything daemon_parts_open() opened; p may be half open. */
void daemon_parts_close(struct parts *p);
/* A reload: the new config's agents, keys and limits (same spool dir). */
int daemon_parts_set_config(struct parts *p, struct config *cfg);

/* Runs until SIGTERM/SIGINT (0) or a fatal error (<0); takes cfg.
 * -EPERM: the start refused a set-up (a spool lock file not ours:
 * spool_open()); an agent's unsafe directory only takes that agent out
 * of service. */
int daemon_run(const char *config_path, struct config *cfg);

#endif
