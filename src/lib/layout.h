/* The spool's names, private to handoffd, handoffctl and consume.c: every
 * prefix and suffix a state directory or an agent's handoffs/ holds, the
 * builders of those names, what a directory entry is (layout_classify),
 * and the consumer's private name parsed back.  One place, so the writer
 * and the readers of a name cannot drift apart.  Builders return 0 or
 * -ENAMETOOLONG. */
#ifndef HD_LAYOUT_H
#define HD_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LAYOUT_PENDING   ".pending."    /* + bootstrap: written, not published */
#define LAYOUT_EXPIRE    ".expire."     /* + bootstrap: taken back by an expiry */
#define LAYOUT_CANCEL    ".cancel."     /* + bootstrap: taken back by a cancel */
#define LAYOUT_CONSUME   ".consume."    /* + PID.RAND.bootstrap: a consumer's */
#define LAYOUT_DELIVERED ".delivered"   /* claimed/<id> + : the delivered marker */
#define LAYOUT_OUTCOME   ".outcome"     /* archive/NAME + : how it ended */
#define LAYOUT_REASON    ".reason"      /* rejected/NAME + : why */
#define LAYOUT_RESULT    ".result"      /* archive/NAME + : the agent's result */
/* In an agent's handoffs/: the agent's result for an id it consumed
 * (hd_complete()), and the daemon's refusal of one, each + handoff_id. */
#define LAYOUT_RESULT_IN ".result."
#define LAYOUT_REFUSED   ".refused."

/* What a directory entry is. */
enum layout_kind {
        LK_ITEM,        /* an item (or a bootstrap) */
        LK_SIDECAR,     /* NAME.delivered, NAME.outcome, NAME.result, NAME.reason */
        LK_PENDING,     /* .pending.NAME */
        LK_EXPIRE,      /* .expire.NAME */
        LK_CANCEL,      /* .cancel.NAME */
        LK_CONSUME,     /* .consume.PID.RAND.NAME: a consumer's private name */
        LK_RESULT,      /* .result.ID: an agent's result, for the daemon */
        LK_REFUSED,     /* .refused.ID: the daemon's refusal of one */
        LK_DOT,         /* another dotfile: a writer's temp name, ours too */
};

bool layout_has_suffix(const char *s, const char *suffix);
enum layout_kind layout_classify(const char *name);

/* name ends with suffix and the item it describes (name without it) is
 * in dirfd: a sidecar.  A name so ending without its item is an item (a
 * file a producer named so, rejected under that name).  archive/ has two
 * sidecars: LAYOUT_OUTCOME stands for both, .outcome and .result. */
bool layout_is_sidecar_at(int dirfd, const char *name, const char *suffix);

/* prefix + name (LAYOUT_PENDING, LAYOUT_EXPIRE, LAYOUT_CANCEL), or name + suffix (a
 * sidecar, the marker). */
int layout_prefixed(const char *prefix, const char *name, char *buf, size_t n);
int layout_suffixed(const char *name, const char *suffix, char *buf, size_t n);
/* name without suffix (which it must end with; else -EINVAL). */
int layout_strip(const char *name, const char *suffix, char *buf, size_t n);
/* archive/'s names.  The real implementation's "{ts}-{from}-{to}-{id}.json",
 * or "{ts}-{id}.json" when the id names from and to already (its own ids
 * do: "{unix_ts}-{from}-{to}-{hex}"); "~N" before ".json" for the Nth
 * choice when a name is taken (N < LAYOUT_ARCHIVE_TRIES).  A name is at
 * most LAYOUT_ARCHIVE_NAME_MAX characters, so that its .outcome and that
 * sidecar's temp name (write_atomic()) fit NAME_MAX: a longer one (two
 * 64-character agents, a 128-character id) keeps the id whole and cuts
 * from and to, with the first 8 hex characters of the BLAKE2b-128 hash
 * of the whole name's stem ("{ts}-{from}-{to}-{id}") beside them:
 * "{ts}-{from'}-{to'}-{hash}-{id}.json".  The id is always whole and
 * last: readers find an item's archive by it (layout_archive_is()). */
#define LAYOUT_ARCHIVE_NAME_MAX 239
#define LAYOUT_ARCHIVE_TRIES    100
/* The nth choice of archive name for id, from and to (NULL or not an
 * agent name: "unknown"), ts in unix seconds: 0, or -EINVAL (an id that
 * is not one, n too large), -ENAMETOOLONG (buf too small). */
int layout_archive_name(int64_t ts, const char *from, const char *to, const char *id,
                        unsigned n, char *buf, size_t size);
/* Whether name has the form of one of id's archive names ("...-ID.json",
 * "...-ID~N.json"); the item itself says whether it is. */
bool layout_archive_is(const char *name, const char *id);
/* name without a trailing "~N" (the suffix a taken name gets): its length. */
size_t layout_base_len(const char *name);

/* A consumer's private name for bootstrap name. */
int layout_consume_name(int pid, const char *rnd, const char *name, char *buf, size_t n);
/* The bootstrap name inside a consumer's private name, or NULL. */
const char *layout_consume_target(const char *name);
/* The bootstrap name inside .pending.NAME, .expire.NAME or .cancel.NAME,
 * or NULL. */
const char *layout_hidden_target(const char *name);

#endif
