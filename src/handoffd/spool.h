/* The spool (spool.c) opens the state directories and the agents'
 * directories, and lists and looks up names in them.  struct spool holds
 * the storage's state.  Only the storage layer (store/store.h) changes
 * the spool on disk.  Each module keeps its own state in its own header;
 * parts.h holds them side by side. */
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
        int (*take)(void *ctx, const char *name, const struct stat *was,
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
        /* The agent's result for id (completed, failed, input_required), its
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
        /* After a store_flush() whose syncs all succeeded: what was taken
         * into outbox/ before it is durable now (outbox.c says so then). */
        void (*synced)(void *ctx);
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

/* An agent's name as hd_agent_valid() allows it, and its NUL. */
#define SPOOL_AGENT_SIZE 65

/* A name that leaves handoff/ in store_flush(), once its other link's
 * directory is synced, if it still is that inode. */
struct leaving_entry {
        struct spool_ino was;
        bool spent;             /* a claim's producer file: to spent/ */
};

/* The files kept lately, oldest replaced (store_drop_claim_leftover()). */
struct spool_kept_set {
        struct spool_kept slot[SPOOL_KEPT_MAX];
        size_t next;
};

/* spent/: the producers' files of claims, freed when intake is quiet
 * (store_reap_spent()). */
struct spool_spent {
        bool waiting;           /* it may hold files */
        int64_t at;             /* when the last one came (monotonic usec) */
        struct dict skipped;    /* names it cannot free, reported: a set */
};

/* A directory whose fsync failed stays dirty, and the rounds after it
 * wait (store/store.c flush_rounds()).  Every failed one is tried again
 * at retry_at, the wait doubled each time.  It is logged once when the
 * first one fails and once when they all succeed. */
struct spool_sync_fail {
        int err;                /* 0: none failed */
        bool dir[_SD_MAX];      /* this directory's last fsync failed */
        int64_t retry_at;       /* usec since the epoch */
        int64_t backoff;        /* usec */
        unsigned tries;
        char what[NAME_MAX + 16]; /* the first that failed, for the logs */
        bool files;             /* a file's sync of store_sync_later() */
};

/* Files written unsynced (store_sync_later()): their descriptors, synced
 * together at the start of the next store_flush(), before any directory
 * is synced; one whose fsync fails stays here and holds the rounds, as a
 * directory's does.  At most SPOOL_LATER_MAX descriptors (past them a
 * file is synced at once): with pending.c's held looks (at most half of
 * what the descriptor limit leaves above 256) they stay within it. */
#define SPOOL_LATER_MAX 128
struct spool_later {
        int fd[SPOOL_LATER_MAX];
        unsigned char dir[SPOOL_LATER_MAX];     /* enum spool_dir, for the logs */
        size_t n;
};

/* The storage: the directory descriptors, what is dirty, and what the
 * storage layer remembers between calls.  Nothing else belongs here: a
 * module's state goes in its own header, and parts.h holds it beside
 * this.  test_layering fails above 20 fields. */
struct spool {
        struct config *cfg;
        int root_fd;
        int fd[_SD_MAX];
        int lock_fd;            /* SPOOL/.lock (lock.h) */
        struct agent_rt *agents;
        size_t n_agents;
        struct spool_stats st;
        struct spool_relay relay;
        /* A2A remotes (a2a_out.c): take, status and metrics only. */
        struct spool_relay a2a;
        bool dirty[_SD_MAX];    /* directory needs an fsync */
        struct spool_sync_fail sync_fail;
        struct spool_later later;
        /* handoff/ name -> the inode that leaves it in store_flush()
         * (store_take(), store_drop_source()) */
        struct dict leaving;
        struct spool_kept_set kept;
        struct spool_spent spent;
        /* The earliest time the storage wants the daemon to look again
         * (a failed sync's retry, rejected/ past a bound).  The daemon's
         * timer takes the earlier of this and the modules' deadline. */
        struct deadline due;
        /* rejected/ went past a bound of [retention] since its last
         * pruning: retention.c prunes it within RETENTION_SOON_USEC. */
        bool retention_due;
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
 * directories; why each agent not opened is out of service into unserved
 * (an initialized struct unserved_entry table, replaced). */
int spool_open(struct config *cfg, struct dict *unserved, struct spool **ret);
void spool_close(struct spool *sp);
/* handoffd -n: the checks spool_open() makes of the agents' directories,
 * on those that exist, creating nothing; each problem logged as the start
 * logs it, and counted in *ret (agents served, out of service, warnings).
 * 0, or the negative errno the start would fail with. */
int spool_check(struct config *cfg, struct agents_count *ret);
/* After a reload: take the new config's agents (same spool dir), and
 * unserved as spool_open() fills it. */
int spool_set_config(struct spool *sp, struct config *cfg, struct dict *unserved);

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
