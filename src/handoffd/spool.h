/* The spool (spool.c): its state directories and agents' directories
 * opened, listing and look-ups; and the daemon's state kept beside it,
 * each table's entry typed.  What changes the spool on disk is the
 * storage layer's (store/store.h). */
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
#include "handoff_doc.h"

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
 * only that (store_take()). */
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
                    const struct handoff *h, int64_t now);
        json_t *(*status)(void *ctx, int64_t now);
        void (*metrics)(void *ctx, FILE *f, int64_t now);
        /* An item reaches an outcome (delivered, consumed, expired,
         * rejected with reason): called once the outcome is decided and
         * before it is final on disk (receipt.c owes the origin a receipt
         * when the item came through the relay).  name: the file's name
         * in handoff/ when the id is not known yet, its archive name when
         * it is archived (store_archive()), else NULL. */
        void (*outcome)(void *ctx, const char *id, const char *name, const char *outcome,
                        const char *reason, const char *detail, int64_t now);
        /* The agent's result for id (status completed or failed), its
         * .result document doc of len bytes, about to be recorded
         * (completion.c): the origin of an item that came through the
         * relay is owed it (receipt.c). */
        void (*result)(void *ctx, const char *id, const char *status, const char *doc,
                       size_t len, int64_t now);
        /* The cancel request cancel/name for id, which has an outcome
         * here: true when id left through the relay and its host has not
         * ended it yet, and the request goes there (receipt_cancel.c);
         * its answer comes with the item's final receipt. */
        bool (*cancel)(void *ctx, const char *id, const char *name);
        /* handoff/name came through the relay: the host it came from into
         * buf (a rejection says so), true; else false. */
        bool (*origin)(void *ctx, const char *name, char *buf, size_t n);
        /* store_flush() calls it first: what the relay wrote since (the
         * receipts of outcomes about to be synced) is synced before them. */
        int (*flush)(void *ctx);
};

/* A file kept in a state directory whose further names in handoff/ go
 * without a look for it (store_drop_claim_leftover()): a hard-link flood
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

/* A name that leaves handoff/ in store_flush(), once its other link's
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
        char kid[HD_KID_MAX + 1];
        int64_t accepted_usec;
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
         * its own wait (store/store.c flush_rounds()): every failed one is
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
        /* handoff/ name -> the inode that leaves it in store_flush()
         * (store_take(), store_drop_source()) */
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
/* handoffd -n: the checks spool_open() makes of the agents' directories,
 * on those that exist, creating nothing; each problem logged as the start
 * logs it, and counted in *ret (agents served, out of service, warnings).
 * 0, or the negative errno the start would fail with. */
int spool_check(struct config *cfg, struct agents_count *ret);
/* After a reload: take the new config's agents (same spool dir). */
int spool_set_config(struct spool *sp, struct config *cfg);

struct agent_rt *spool_agent(struct spool *sp, const char *name);

bool spool_exists_at(int dirfd, const char *name);

/* Every name currently in directory d, into set (a JSON object used as an
 * ordered set of names). */
int spool_list(struct spool *sp, enum spool_dir d, json_t *set);

/* Is handoff_id known here: claimed, archived or rejected after
 * authentication (ids/)? */
bool spool_id_seen(struct spool *sp, const char *handoff_id);
/* Each half of it: in ids/; claimed/<handoff_id>.json there. */
bool spool_id_remembered(struct spool *sp, const char *handoff_id);
bool spool_id_claimed(struct spool *sp, const char *handoff_id);

/* A system error: recorded for status (last_error, errors), logged once;
 * returns -|err|.  The one way a failure of the daemon is reported. */
int spool_error(struct spool *sp, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

#endif
