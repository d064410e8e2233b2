/* The agents a daemon serves: each one's state_dir and handoffs/, opened
 * and checked (owner, mode, ACL), and an agent whose directories are not
 * safe taken out of service alone, never the daemon (agents.c). */
#ifndef HD_AGENTS_H
#define HD_AGENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "config.h"

struct dict;

#define AGENT_WHY_MAX 512

struct agent_rt {
        const struct config_agent *cfg;
        int state_fd;
        int handoffs_fd;        /* state_dir/handoffs/ */
        int wd;                 /* inotify watch on handoffs/, or -1 */
        bool dirty;             /* handoffs/ needs an fsync */
        bool sync_failed;       /* its last fsync failed (spool.h sync_fail) */
        bool warned;            /* agent_open() logged a warning */
        char unserved[AGENT_WHY_MAX]; /* why agent_open() took it out of service */
};

/* An agent out of service, in the table agents_open_all() fills (the
 * spool's unserved: status, and a handoff left for it, say why). */
struct unserved_entry {
        char why[AGENT_WHY_MAX];
};

/* What agents_open_all() decided of a config's agents: each agent is
 * served, out of service or (look only) not inspected. */
struct agents_count {
        size_t served;
        size_t unserved;        /* out of service, each said in one error line */
        size_t warnings;        /* warning lines logged (with look: an agent
                                 * this user cannot inspect; a handoffs/
                                 * its agent could not use) */
};

/* Open every agent of cfg (with look, handoffd -n, only inspect them,
 * creating nothing).  An agent out of service is left out and, with
 * unserved, remembered there (name -> struct unserved_entry), a table of
 * those entries; *ret_count (may be NULL)
 * says how many of each.  Only a failure of the daemon itself (-ENOMEM)
 * fails the whole call.  shared: the spool's group (that of handoff/). */
int agents_open_all(struct config *cfg, gid_t shared, bool look, struct dict *unserved,
                    struct agent_rt **ret, size_t *ret_n, struct agents_count *ret_count);

/* Close an agent's directories. */
void agent_rt_close(struct agent_rt *a);

#endif
