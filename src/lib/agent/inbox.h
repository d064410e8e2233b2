/* An agent's inbox: the bootstraps waiting in its state_dir/handoffs/, as
 * handoffctl inbox and the MCP server show them, and the inotify watch
 * that tells when one arrives or leaves. */
#ifndef HANDOFFCTL_INBOX_H
#define HANDOFFCTL_INBOX_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/inotify.h>

#include "config.h"
#include "handoff.h"

struct inbox {
        char dir[PATH_MAX];     /* state_dir/handoffs */
        int fd;                 /* the directory, or -1 while it is missing */
        int64_t window;         /* resume window, seconds */
        int wd;                 /* inotify watch, or -1 */
        bool wd_parent;         /* ... on the state dir, for handoffs/ */
        const hd_consume_opts *copts;   /* the checks of a take; NULL: keyless */
};

/* The inbox of agent in cfg (or of state_dir when agent is NULL, with
 * window).  A missing handoffs/ is not an error: fd stays -1 until
 * inbox_reopen() finds it.  Returns 0, or an AG_* code with one line in
 * err. */
int inbox_init(struct inbox *ib, const struct config *cfg, const char *agent,
               const char *state_dir, int64_t window, char *err, size_t errlen);
void inbox_done(struct inbox *ib);
/* Open handoffs/ if it is still missing: 1 opened now, 0 no change. */
int inbox_reopen(struct inbox *ib);

/* One waiting bootstrap as shown: {handoff_id, from_agent, to_agent?,
 * reason, accepted_at, age_s, seconds_left, name, payload_type?}, as
 * hd_consume_peek() with copts sees it.  -ENOENT gone, -ESTALE past the
 * resume window, -EBADMSG not one a take would take, other -errno. */
int inbox_entry(const struct inbox *ib, const char *name, int64_t now,
                json_t **ret);
/* The oldest of them (by mtime, as handoff_take picks them), sorted by
 * accepted_at: at most INBOX_SHOW_MAX, and no more once INBOX_READ_MAX
 * bytes of files were read (at least one file is); *ret_more (may be
 * NULL) the number of names not looked at. */
#define INBOX_SHOW_MAX 100
#define INBOX_READ_MAX (4u << 20)
int inbox_list(const struct inbox *ib, int64_t now, json_t **ret, size_t *ret_more);

/* A name that can be a bootstrap: not a dotfile (a temp, pending, taken or
 * expiring one), ends in ".json". */
bool inbox_name(const char *name);

/* inotify on handoffs/ (or, while it is missing, on the state dir for its
 * creation), added to ifd.  Returns 0 or -errno. */
int inbox_watch(struct inbox *ib, int ifd);
/* One event read from ifd: 1 when the inbox may have changed (a
 * bootstrap's name came or went, an overflow, handoffs/ appeared: then it
 * is opened and watched), 0 when not. */
int inbox_event(struct inbox *ib, int ifd, const struct inotify_event *ev);

/* An entry of inbox_entry() as one line (JSON with as_json). */
void inbox_print(FILE *f, const json_t *entry, bool as_json);
/* The same in words, without the newline. */
void inbox_text(FILE *f, const json_t *entry);

#endif
