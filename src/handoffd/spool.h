/* The spool as storage (spool.c, spool_move.c, spool_leftover.c,
 * spool_reject.c): state directories, agents' directories, listing,
 * rejection moves, replay memory, syncs; and the daemon's state kept
 * beside it, each table's entry typed.  Plain functions over directory
 * fds; the policy modules (intake, delivery, lifecycle) call them. */
#ifndef HD_SPOOL_H
#define HD_SPOOL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include <jansson.h>

#include "config.h"
#include "deadline.h"
#include "dict.h"
#include "handoff.h"

struct agent_rt;
struct agents_count;

enum spool_dir {
        SD_TMP,
        SD_HANDOFF,
        SD_CLAIMED,
        SD_ARCHIVE,
        SD_REJECTED,
        SD_IDS,         /* one empty file per handoff_id seen: replay memory */
        SD_BATON,
        SD_OUTBOX,      /* verified, for a remote agent: waits for the relay */
        SD_SPENT,       /* producers' files of claims, removed when idle */
        SD_QUOTA,       /* what waits for each agent, counted (quota.c) */
        SD_CANCEL,      /* senders' requests to withdraw a handoff (cancel.c) */
        _SD_MAX
};

extern const char *const spool_dir_names[_SD_MAX];

/* The inode a decision was made on: a move by name out of handoff/ takes
 * only that (spool_move_out()). */
struct spool_ino {
        dev_t dev;
        ino_t ino;
};

/* rejected/ past a bound of [retention]: its next pruning at most this
 * much later, and not sooner after the last one (a run lists the whole
 * directory). */
#define RETENTION_SOON_USEC 250000LL

struct spool_stats {
        int64_t started_usec;
        uint64_t claimed, delivered, recovered, retried, consumed, expired, canceled,
                 left, deferred, overflows, rescans, errors, archived_pruned,
                 rejected_pruned;
        uint64_t completed, failed, results_refused;   /* agents' results (completion.c) */
        uint64_t rejected[_HD_R_MAX];
        /* at the last retention run, and each rejection added since */
        uint64_t rejected_items, rejected_bytes;
        char last_error[256];
        int64_t last_error_usec;
        bool watch_ok;
        unsigned write_errors_pending; /* items waiting for a retry */
};

/* The relay (relay.c), when it is on: relay_start() sets these; the spool,
 * the control socket and the metrics call them without knowing it. */
struct spool_relay {
        void *ctx;              /* NULL: relay off */
        /* handoff/name, verified, for a [remote] agent: into outbox/.
         * -EEXIST when its id is there already. */
        int (*take)(void *ctx, const char *name, const struct spool_ino *was,
                    const json_t *doc, int64_t now);
        json_t *(*status)(void *ctx, int64_t now);
        void (*metrics)(void *ctx, FILE *f, int64_t now);
        /* An item reaches an outcome (delivered, consumed, expired,
         * rejected with reason): called once the outcome is decided and
         * before it is final on disk (receipt.c owes the origin a receipt
         * when the item came through the relay).  name: the file's name
         * in handoff/ when the id is not known yet, else NULL. */
        void (*outcome)(void *ctx, const char *id, const char *name, const char *outcome,
                        const char *reason, const char *detail, int64_t now);
        /* handoff/name came through the relay: the host it came from into
         * buf (a rejection says so), true; else false. */
        bool (*origin)(void *ctx, const char *name, char *buf, size_t n);
        /* spool_flush() calls it first: what the relay wrote since (the
         * receipts of outcomes about to be synced) is synced before them. */
        int (*flush)(void *ctx);
};

/* A file kept in a state directory whose further names in handoff/ go
 * without a look for it (spool_drop_claim_leftover()): a hard-link flood
 * is one file under many names. */
struct spool_kept {
        dev_t dev;
        ino_t ino;              /* 0: a free slot */
        enum spool_dir dir;     /* where it is kept, as name */
        char name[NAME_MAX + 1];
        bool synced;            /* dir synced since */
        uint64_t dropped;       /* its names removed from handoff/ since */
};
#define SPOOL_KEPT_MAX 128

struct cancels;

/* An agent's name as hd_agent_valid() allows it, and its NUL. */
#define SPOOL_AGENT_SIZE 65

/* A file left in handoff/ for an agent not served here (foreign.c; status
 * in control.c). */
struct foreign_entry {
        int64_t expires;        /* usec: decided again then */
        ino_t ino;              /* with ctime_ns: the same file, unchanged */
        int64_t ctime_ns;
        uint64_t bytes;         /* [retention] unclaimed_max_bytes */
        /* Due, but past the batch's time: decided again at expires, and
         * no longer counted as left. */
        bool again;
        char to[SPOOL_AGENT_SIZE]; /* "(invalid)": to_agent is not a name */
};

/* A name in handoff/ whose parse failed, when it was first seen as that
 * inode (decide.c: a file still being written gets a grace). */
struct seen_entry {
        ino_t ino;
        int64_t first_usec;     /* monotonic */
};

/* A name that leaves handoff/ in spool_flush(), once its other link's
 * directory is synced, if it still is that inode. */
struct leaving_entry {
        struct spool_ino was;
        bool spent;             /* a claim's producer file: to spent/ */
};

/* What a big claimed record says (verified.c), valid while
 * claimed/<id>.json is still that inode of that size. */
struct verified_entry {
        dev_t dev;
        ino_t ino;
        off_t size;
        uint64_t gen;           /* the sweep that last looked */
        char from[SPOOL_AGENT_SIZE], to[SPOOL_AGENT_SIZE];
        char accepted_at[HD_TIME_MAX];
};

/* An item archived as consumed lately (completion.c): its archive/ name. */
struct result_recent {
        char archive[NAME_MAX + 1];
};

struct spool {
        /* The look at one claimed item, under its lock (lifecycle_check(),
         * set by whoever opens the spool for the daemon): what cancel.c
         * asks for when a request comes.  A pointer, as the relay's hooks:
         * the look is above the modules it uses, cancel.c among them. */
        int (*check_item)(struct spool *sp, const char *id, int64_t now);
        struct config *cfg;
        struct spool_relay relay;
        /* A2A remotes (a2a_out.c): take, status and metrics only. */
        struct spool_relay a2a;
        int root_fd;
        int fd[_SD_MAX];
        struct agent_rt *agents;
        size_t n_agents;
        struct spool_stats st;
        /* handoff/ name -> struct foreign_entry: left alone (foreign.c);
         * what their files hold, and the last look at all */
        struct dict foreign;
        uint64_t foreign_bytes;
        int64_t foreign_purged; /* monotonic usec */
        struct dict failed;     /* ids whose delivery failed: retried (a set) */
        int64_t deliver_backoff_usec;
        struct deadline deadline; /* the daemon's timer: the earliest one */
        int64_t housekeeping_at;/* last retention and metrics run, usec */
        /* rejected/ went past a retention bound since its last pruning
         * (then, usec): pruned again within RETENTION_SOON_USEC */
        bool retention_due;
        int64_t rejected_pruned_at;
        uint64_t arrived_at_housekeeping; /* rejected+archived then */
        bool dirty[_SD_MAX];    /* directory needs an fsync */
        /* A directory whose fsync failed stays dirty, and the rounds after
         * its own wait (spool_move.c flush_rounds()): every failed one is
         * tried again at retry_at, the wait doubled each time; said once
         * when the first fails and once when they all succeed. */
        struct spool_sync_fail {
                int err;                /* 0: none failed */
                bool dir[_SD_MAX];      /* this directory's last fsync failed */
                int64_t retry_at;       /* usec since the epoch */
                int64_t backoff;        /* usec */
                unsigned tries;
                char what[NAME_MAX + 16]; /* the first that failed, for the logs */
        } sync_fail;
        int lock_fd;            /* SPOOL/.lock (lock.h) */
        /* handoff/ name -> when it was first seen as this inode, while its
         * parse fails (decide.c) */
        struct dict seen;
        struct dict dirs;       /* handoff/ name -> inode: a directory reported */
        bool dirs_full;         /* dirs was full: the rest are left unreported */
        /* handoff/ name -> the inode that leaves it in spool_flush()
         * (spool_move_out(), spool_drop_source()) */
        struct dict leaving;
        /* id -> what its big claimed record says (verified.c); cleared by
         * a reload. */
        struct dict verified;
        uint64_t sweep_gen;     /* sweeps begun */
        /* A sweep under way (lifecycle_sweep_step), a slice a loop turn. */
        struct sweep {
                void *dir;      /* DIR * of claimed/, NULL: none */
                bool at_start, again;
                bool recount;   /* its looks count what waits (quota.c) */
                int first;      /* the first error met */
        } sweep;
        /* agent -> struct unserved_entry (agents.h): why it is out of
         * service */
        struct dict unserved;
        /* The next sweep counts every claimed item it looks at (quota.c):
         * after the start and a reload. */
        bool quota_recount;
        /* The hub's user, the owner of [hub] state_dir ((uid_t)-1: none
         * found): it drops for every token, so quota.c counts its files
         * by name, not as one producer. */
        uid_t hub_uid;
        /* spent/ may hold producers' files (moved there since the last
         * reap, or found at start), and when the last one came
         * (monotonic usec) */
        bool spent_waiting;
        int64_t spent_at;
        struct dict spent_skipped; /* names in spent/ it cannot free, reported: a set */
        struct spool_kept kept[SPOOL_KEPT_MAX]; /* the last ones, oldest replaced */
        size_t kept_next;
        /* completion.c: a result waits (the sweep's end looks); id -> archive
         * name of the items archived as consumed lately (the oldest
         * dropped); when archive/ was last listed for results (monotonic
         * usec: at most once a second) */
        bool results_due;
        struct dict results_recent;
        int64_t results_listed_at;
        struct cancels *cancels;        /* cancel.c: the requests not answered yet */
};

enum item_outcome {
        IO_IGNORED,     /* dotfile or temp name, or a directory */
        IO_GONE,        /* vanished, or another claimer won */
        IO_LEFT,        /* for an agent not served here */
        IO_DEFERRED,    /* still being written; look again later */
        IO_BUSY,        /* another process holds it */
        IO_REJECTED,
        IO_CLAIMED,
        IO_OUTBOX,      /* verified, for a remote agent: moved to outbox/ */
        IO_SKIPPED,     /* not looked at: the batch's time was up */
        /* Verified and ours, the claim to come (intake.c's batch
         * delivers it): never a name's final outcome. */
        IO_TO_CLAIM,
};

/* Open (creating what is missing) the spool of cfg and the agents' state
 * directories. */
int spool_open(struct config *cfg, struct spool **ret);
void spool_close(struct spool *sp);
/* Remove files from spent/ (producers' files of claims, moved there by
 * spool_drop_source()) for about budget_usec: 0 with *ret_more true when
 * some are left, false when spent/ is empty but for what cannot be
 * removed (skipped, logged once); -errno when spent/ cannot be listed. */
int spool_reap_spent(struct spool *sp, int64_t budget_usec, bool *ret_more);
/* handoffd -n: the checks spool_open() makes of the agents' directories,
 * on those that exist, creating nothing; each problem logged as the start
 * logs it, and counted in *ret (agents served, out of service, warnings).
 * 0, or the negative errno the start would fail with. */
int spool_check(struct config *cfg, struct agents_count *ret);
/* After a reload: take the new config's agents (same spool dir). */
int spool_set_config(struct spool *sp, struct config *cfg);

struct agent_rt *spool_agent(struct spool *sp, const char *name);

/* handoff/NAME (a file with more than one link) is one inode with a
 * link the daemon made, where it made it: spent/INODE (a claim's file),
 * rejected/NAME or NAME~N (a rejection), or a file the daemon keeps
 * already, whose other names these are (spool_kept): the handoff/ name
 * goes (the other link synced first with fsync = yes); a power cut's
 * leftover logged as such, a file's further names with one line for the
 * lot.  Nowhere else is looked at: a hard-link flood must cost a few
 * look-ups a name, not a listing.  True when it went. */
bool spool_drop_claim_leftover(struct spool *sp, const char *name);
/* The same for the places named by the handoff's id: outbox/<id>.json,
 * and an earlier version's claimed/<id>.json. */
bool spool_drop_id_leftover(struct spool *sp, const char *name, const char *id);
/* A name in dirfd (not a dotfile) of a's inode, into found: name itself
 * when given and it is one (one look), else the first a listing finds
 * (outbox.c at start; never per handoff/ name). */
bool spool_find_link(int dirfd, const char *name, const struct stat *a, char *found, size_t n);
/* An earlier version's item: claimed/<id>.json and archive/<the
 * marker's archive_as> are one inode
 * (an archiving's two directories not both synced before a power cut):
 * the archive stands, the claimed/ name and the marker are removed.  True
 * when they were. */
bool spool_drop_archived_leftover(struct spool *sp, const char *id);
/* in/NAME (claimed/<id>.json) has a second link in tmp/: a producer's
 * temp name that a power cut kept beside the rename the daemon then
 * claimed (the producer's tmp/ was synced by another producer, its
 * handoff/ not).  The tmp/ one is removed.  True when it was. */
bool spool_drop_tmp_twin(struct spool *sp, enum spool_dir in, const char *name);
bool spool_exists_at(int dirfd, const char *name);

/* Every name currently in directory d, into set (a JSON object used as an
 * ordered set of names). */
int spool_list(struct spool *sp, enum spool_dir d, json_t *set);

/* Move handoff/name to rejected/ with its reason file, when it is still
 * was (NULL: whatever the name holds) and no directory: 0 with *ret
 * (may be NULL) IO_REJECTED, IO_GONE (was has left the name, or another
 * daemon rejected it meanwhile) or IO_BUSY (another daemon is rejecting
 * was: its inode's lock); -EISDIR (a directory: left in handoff/), -errno. */
int spool_reject(struct spool *sp, const char *name, const struct spool_ino *was,
                 hd_reason reason, const char *detail, const char *handoff_id, int64_t now,
                 enum item_outcome *ret);
/* dir/src (outbox/) archived: moved to archive/ under the first free name
 * of layout_archive_name() for (at_s, from, to, id), its .outcome (buf)
 * written, and synced with fsync on, before the move; a name taken, or
 * taken by a racing mover, is passed over.  The name in name.  0 or
 * -errno (-EEXIST: no name free). */
int spool_archive_from(struct spool *sp, enum spool_dir dir, const char *src, int64_t at_s,
                       const char *from, const char *to, const char *id, const char *buf,
                       size_t len, char *name, size_t n);
/* The same from another state directory (outbox/); was: for handoff/. */
int spool_reject_from(struct spool *sp, enum spool_dir from, const char *name,
                      const struct spool_ino *was, hd_reason reason, const char *detail,
                      const char *handoff_id, int64_t now, enum item_outcome *ret);

/* Is handoff_id known here: claimed, archived or rejected after
 * authentication (ids/)? */
bool spool_id_seen(struct spool *sp, const char *handoff_id);
/* Each half of it: in ids/; claimed/<handoff_id>.json there. */
bool spool_id_remembered(struct spool *sp, const char *handoff_id);
bool spool_id_claimed(struct spool *sp, const char *handoff_id);
/* The same for claimed/<handoff_id>.json. */
int spool_reject_claimed(struct spool *sp, const char *handoff_id, hd_reason reason,
                         const char *detail, int64_t now, enum item_outcome *ret);

/* Remember handoff_id in ids/ (replay memory once it leaves claimed/). */
int spool_id_mark(struct spool *sp, const char *handoff_id);

/* Move handoff/name to directory `to` as dst (a claim, a rejection, to
 * outbox/): -EEXIST, -ENOENT (another took it) as a rename.  What
 * arrives must be was (NULL: any file) and no directory, or it is put
 * back: -ENOENT (was has left the name), -EISDIR (was is a directory).  With fsync
 * = yes the item is linked into `to` and leaves handoff/ only in
 * spool_flush(), once `to` is synced: anyone may sync handoff/ at any
 * moment (handoffctl submit does, for its own file), and a rename's
 * removal from handoff/ made durable so before its destination was is
 * the item lost in a power cut.  A rename when no link can be made
 * (fs.protected_hardlinks and a producer's file the daemon may not
 * write, a file system without links). */
int spool_move_out(struct spool *sp, const char *name, const struct spool_ino *was,
                   enum spool_dir to, const char *dst);
/* handoff/name, the producer's file (dev, ino), is claimed: its
 * handoff is in the daemon's record.  Removed now, or with fsync = yes in
 * spool_flush() once claimed/ is synced; only while the name is still
 * that file. */
void spool_drop_source(struct spool *sp, const char *name, dev_t dev, ino_t ino);
/* Is handoff/name (st) an item spool_move_out() moved already? */
bool spool_leaving(struct spool *sp, const char *name, const struct stat *st);

/* fsync every directory marked dirty (the destinations of moves before
 * their sources; handoff/ after spool_move_out()'s removals). */
int spool_flush(struct spool *sp);
/* dir synced now (fsync on), after the dirty directories that moves out of
 * it go to: a sync of claimed/ never makes a move's removal durable before
 * its arrival.  0 or -errno. */
int spool_sync_dir(struct spool *sp, enum spool_dir dir);

/* A system error: recorded for status (last_error, errors), logged once;
 * returns -|err|.  The one way a failure of the daemon is reported. */
int spool_error(struct spool *sp, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

#endif
