/* The inbox quota (issue 24.9): a member of group handoff could flood an
 * agent with valid handoffs, each waiting in its handoffs/ for the resume
 * window.  [spool] max_waiting bounds the claimed items waiting for one
 * agent, max_waiting_per_sender those of one sender; one more is rejected
 * as inbox_full, its id not remembered (a retry once there is room is no
 * replay).
 *
 * The limits hold for the spool, however many daemons serve it, so the
 * counts live in the spool, not in a daemon's memory.  A count is the
 * link count of a file of ours, and each waiting item one hard link to it
 * named by its id: a count is read with one fstatat, raised with one
 * linkat, lowered with one unlinkat, never by listing a directory.
 *
 *   quota/AGENT/count              its links - 1: items waiting for AGENT
 *   quota/AGENT/ids/ID             a link of count, one per item
 *   quota/AGENT/senders/FROM       its links - 1: those sent by FROM
 *   quota/AGENT/by-sender/ID       a link of senders/FROM, one per item
 *   quota/AGENT/producers/P        its links - 1: those producer P dropped
 *   quota/AGENT/by-producer/ID     a link of producers/P
 *   quota/AGENT/shared             its links - 1: those signed with a shared key
 *   quota/AGENT/by-shared/ID       a link of shared
 *
 * from_agent is the sender's to choose wherever a shared key ([keys]
 * default) signs it: a name counts, and so does who dropped the file, its
 * owner (issue 43.7: one user under ten made-up names filled max_waiting
 * and closed the inbox to everyone).  A producer may have
 * max_waiting_per_sender waiting, as a name may.  The daemon's own files
 * (relayed in) and the hub's are every sender's, and count by name alone
 * (struct quota_sender: the hook for the hub's tokens).  Where some
 * sender has a key of her own, items signed with a shared key may fill
 * max_waiting less a reserve (QUOTA_RESERVE_PERMILLE, at least 1): a flood
 * under the default key, from however many users, leaves room for those
 * whose name is their key's.
 *
 * An item is counted before its claim's record is made (quota_take) and
 * released once it has left claimed/ (quota_release).  A check and its
 * count are one step among all daemons: both are made holding the
 * agent's byte of SPOOL/.lock (lock_off_quota), for those few calls
 * only.  A release takes no lock: it only makes room.
 *
 * What a daemon killed between the count and the claim's record, or
 * between the archive and the release, leaves counted waits no more:
 * quota_repair() removes such ids under the id's lock (a claimer holds it
 * from before its count to after its record), at start and at each
 * housekeeping run.  Until then the other daemons count them as waiting,
 * but an item judged again (still in handoff/) is judged without its own
 * link (count_but()): counted against itself it was rejected as
 * inbox_full while its place stood empty.  The links are not synced (a sync per claim for a
 * count that can be rebuilt): the first sweep after a start (and after a
 * reload) counts every claimed item it looks at (quota_note), so what a
 * power cut took is counted again.  quota/ is the daemon's alone (mode
 * 0700): nobody else can add to a count. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agents.h"
#include "lock.h"
#include "log.h"
#include "quota.h"
#include "store.h"
#include "util.h"

#define Q_COUNT     "count"
#define Q_IDS       "ids"
#define Q_SENDERS   "senders"
#define Q_BY_SENDER "by-sender"
#define Q_PRODUCERS "producers"
#define Q_BY_PRODUCER "by-producer"
#define Q_SHARED    "shared"
#define Q_BY_SHARED "by-shared"
/* The share of max_waiting kept for senders with keys of their own. */
#define QUOTA_RESERVE_PERMILLE 100
/* The sender of a handoff without a valid from_agent (no agent name
 * begins with '_'). */
#define Q_NO_SENDER "_invalid"

/* The agent's byte is held for a few system calls: a busy one is tried
 * again for up to about 2 ms before the item is put off (for the retry
 * timer, a second later).  Bounded, so no daemon ever waits on another. */
#define LOCK_TRIES 20
#define LOCK_PAUSE_NSEC 100000L

/* The names of one item under quota/.  Each count is an anchor file,
 * and the item counts once it has a link to that anchor.  The producer
 * and shared counts are used only when the item counts there. */
struct quota_names {
        const char *from;
        char count[80], sender[160], producer[160], shared[80];
        char id[224], by[224], by_producer[224], by_shared[224];
};

static bool quota_on(const struct spool *sp)
{
        return sp->cfg->max_waiting || sp->cfg->max_waiting_per_sender;
}

/* s NULL: the names of id alone (a release). */
static int quota_names(struct quota_names *q, const char *agent, const char *id,
                       const struct quota_sender *s)
{
        const char *from = s ? s->from : NULL;

        *q = (struct quota_names){ .from = from && hd_agent_valid(from) ? from : Q_NO_SENDER };
        if (!hd_agent_valid(agent) || (id && !hd_id_valid(id)) ||
            (s && s->producer && !hd_agent_valid(s->producer)))
                return -EINVAL;
        if (xsnprintf(q->count, sizeof(q->count), "%s/" Q_COUNT, agent) < 0 ||
            xsnprintf(q->sender, sizeof(q->sender), "%s/" Q_SENDERS "/%s", agent, q->from) < 0 ||
            xsnprintf(q->shared, sizeof(q->shared), "%s/" Q_SHARED, agent) < 0)
                return -ENAMETOOLONG;
        if (s && s->producer &&
            xsnprintf(q->producer, sizeof(q->producer), "%s/" Q_PRODUCERS "/%s", agent,
                      s->producer) < 0)
                return -ENAMETOOLONG;
        if (id && (xsnprintf(q->id, sizeof(q->id), "%s/" Q_IDS "/%s", agent, id) < 0 ||
                   xsnprintf(q->by, sizeof(q->by), "%s/" Q_BY_SENDER "/%s", agent, id) < 0 ||
                   xsnprintf(q->by_producer, sizeof(q->by_producer),
                             "%s/" Q_BY_PRODUCER "/%s", agent, id) < 0 ||
                   xsnprintf(q->by_shared, sizeof(q->by_shared), "%s/" Q_BY_SHARED "/%s",
                             agent, id) < 0))
                return -ENAMETOOLONG;
        if (s && s->own_key)
                q->shared[0] = '\0';   /* not counted there */
        return 0;
}

const char *quota_producer(const struct quota *qs, uid_t uid, char *buf, size_t n)
{
        /* the daemon's own uid does not change while it runs: asked once,
         * not once an item */
        static uid_t self = (uid_t)-1;

        if (self == (uid_t)-1)
                self = geteuid();
        if (uid == self || uid == qs->hub_uid || uid == (uid_t)-1)
                return NULL;
        return xsnprintf(buf, n, "u%u", (unsigned)uid) < 0 ? NULL : buf;
}

/* Is there a key of some sender's own in c (an [agent] key, a public key)?
 * Only then is a reserve kept for such senders. */
static bool any_own_key(const struct config *c)
{
        if (c->n_pubkeys > 0)
                return true;
        for (size_t i = 0; i < c->n_agents; i++)
                if (c->agents[i].key)
                        return true;
        return false;
}

/* What items signed with a shared key may fill of max_waiting. */
static uint64_t shared_max(const struct config *c)
{
        uint64_t reserve = c->max_waiting * QUOTA_RESERVE_PERMILLE / 1000;

        if (!c->max_waiting || !any_own_key(c))
                return 0;       /* no bound of its own */
        if (reserve == 0 && c->max_waiting > 1)
                reserve = 1;
        return c->max_waiting - reserve;
}

static int quota_lock(struct spool *sp, uint64_t off)
{
        const struct timespec pause = { 0, LOCK_PAUSE_NSEC };

        for (int i = 0;; i++) {
                int r = lock_try(sp->lock_fd, off, true);
                if (r != -EAGAIN || i == LOCK_TRIES)
                        return r;
                nanosleep(&pause, NULL);
        }
}

/* The count an anchor holds: 0 while it does not exist. */
static int count_of(int qfd, const char *anchor, uint64_t *ret)
{
        struct stat st;

        if (fstatat(qfd, anchor, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        return -errno;
                *ret = 0;
                return 0;
        }
        *ret = st.st_nlink > 1 ? (uint64_t)st.st_nlink - 1 : 0;
        return 0;
}

/* The count an anchor holds, less the item's own link when it has one
 * there: a daemon killed between its count and its claim's record left
 * it, and the item is now ours (we hold its id's lock).  Only looked for
 * when the count is at max, so a claim pays nothing for it. */
static int count_but(int qfd, const char *anchor, const char *link, uint64_t max, uint64_t *ret)
{
        struct stat a, l;
        int r = count_of(qfd, anchor, ret);

        if (r < 0 || *ret < max)
                return r;
        if (fstatat(qfd, anchor, &a, AT_SYMLINK_NOFOLLOW) == 0 &&
            fstatat(qfd, link, &l, AT_SYMLINK_NOFOLLOW) == 0 &&
            a.st_dev == l.st_dev && a.st_ino == l.st_ino)
                (*ret)--;
        return 0;
}

/* The agent's directories and an anchor, made where missing. */
static int make_anchor(int qfd, const char *agent, const char *anchor)
{
        static const char *const subs[] = { Q_IDS, Q_SENDERS, Q_BY_SENDER, Q_PRODUCERS,
                                            Q_BY_PRODUCER, Q_BY_SHARED };
        char d[128];
        int fd;

        if (mkdirat(qfd, agent, 0700) < 0 && errno != EEXIST)
                return -errno;
        for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
                if (xsnprintf(d, sizeof(d), "%s/%s", agent, subs[i]) < 0)
                        return -ENAMETOOLONG;
                if (mkdirat(qfd, d, 0700) < 0 && errno != EEXIST)
                        return -errno;
        }
        fd = openat(qfd, anchor, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
                return -errno;
        if (fd >= 0)
                close(fd);
        return 0;
}

/* name made a link of anchor (made first, at an agent's or a sender's
 * first item).  -EEXIST when name is there. */
static int link_to(struct spool *sp, const char *agent, const char *anchor, const char *name)
{
        int r = store_count_link(sp, anchor, name);

        if (r != -ENOENT)
                return r;
        r = make_anchor(sp->fd[SD_QUOTA], agent, anchor);
        if (r < 0)
                return r;
        return store_count_link(sp, anchor, name);
}

/* Count the item in all, for its sender, for its producer and as shared
 * (the names in q), with the agent's lock byte held. *ret_taken says
 * whether this call counted it.  An item counted already, by another file
 * with its id or by a claim that a kill cut short between two links, gets
 * its missing links made here.  Otherwise a kill between the links would
 * leave its sender's count one low for as long as it waits. */
static int count_in(struct spool *sp, const char *agent, const struct quota_names *q, bool *ret_taken)
{
        const char *const anchors[] = { q->sender, q->producer, q->shared };
        const char *const links[] = { q->by, q->by_producer, q->by_shared };
        bool fresh;
        int r = link_to(sp, agent, q->count, q->id);

        if (r < 0 && r != -EEXIST)
                return r;
        fresh = r == 0;
        for (size_t i = 0; i < ELEMENTSOF(anchors); i++) {
                if (!anchors[i][0])
                        continue;
                r = link_to(sp, agent, anchors[i], links[i]);
                if (r < 0 && r != -EEXIST) {
                        if (fresh) {
                                (void) store_count_remove(sp, q->id);
                                for (size_t j = 0; j < i; j++)
                                        if (anchors[j][0])
                                                (void) store_count_remove(sp, links[j]);
                        }
                        return r;
                }
        }
        *ret_taken = fresh;
        return 0;
}

int quota_take(struct spool *sp, const char *agent, const char *id,
               const struct quota_sender *s, hd_verdict *v, bool *ret_taken)
{
        const struct config *c = sp->cfg;
        int qfd = sp->fd[SD_QUOTA];
        uint64_t off, n = 0, shared = shared_max(c);
        struct quota_names q;
        int r;

        *ret_taken = false;
        if (!quota_on(sp))
                return 0;
        r = quota_names(&q, agent, id, s);
        if (r < 0)
                return r;
        off = lock_off_quota(agent);
        r = quota_lock(sp, off);
        if (r < 0)
                return r;
        if (c->max_waiting_per_sender &&
            (r = count_but(qfd, q.sender, q.by, c->max_waiting_per_sender, &n)) == 0 &&
            n >= c->max_waiting_per_sender) {
                v->reason = HD_R_INBOX_FULL;
                snprintf(v->detail, sizeof(v->detail),
                         "%llu handoffs from %s already wait for %s (max_waiting_per_sender)",
                         (unsigned long long)n, q.from, agent);
                r = -EBADMSG;
        }
        if (r == 0 && c->max_waiting_per_sender && q.producer[0] &&
            (r = count_but(qfd, q.producer, q.by_producer, c->max_waiting_per_sender, &n)) == 0 &&
            n >= c->max_waiting_per_sender) {
                v->reason = HD_R_INBOX_FULL;
                snprintf(v->detail, sizeof(v->detail),
                         "%llu handoffs dropped by %s %s already wait for %s, under any "
                         "names (max_waiting_per_sender)", (unsigned long long)n,
                         s->producer[0] == 'u' ? "uid" : "producer",
                         s->producer + (s->producer[0] == 'u'), agent);
                r = -EBADMSG;
        }
        if (r == 0 && shared && q.shared[0] &&
            (r = count_but(qfd, q.shared, q.by_shared, shared, &n)) == 0 && n >= shared) {
                v->reason = HD_R_INBOX_FULL;
                snprintf(v->detail, sizeof(v->detail),
                         "%llu handoffs signed with a shared key already wait for %s "
                         "(max_waiting, less %llu kept for senders with keys of their own)",
                         (unsigned long long)n, agent,
                         (unsigned long long)(c->max_waiting - shared));
                r = -EBADMSG;
        }
        if (r == 0 && c->max_waiting &&
            (r = count_but(qfd, q.count, q.id, c->max_waiting, &n)) == 0 && n >= c->max_waiting) {
                v->reason = HD_R_INBOX_FULL;
                snprintf(v->detail, sizeof(v->detail),
                         "%llu handoffs already wait for %s (max_waiting)",
                         (unsigned long long)n, agent);
                r = -EBADMSG;
        }
        if (r == 0)
                r = count_in(sp, agent, &q, ret_taken);
        lock_release(sp->lock_fd, off);
        return r;
}

void quota_release(struct spool *sp, const char *agent, const char *id)
{
        struct quota_names q;

        if (!quota_on(sp) || !agent || !id || quota_names(&q, agent, id, NULL) < 0)
                return;
        /* One that fails stays counted until quota_repair(). */
        const char *const links[] = { q.id, q.by, q.by_producer, q.by_shared };
        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                int e = store_count_remove(sp, links[i]);
                if (e < 0 && e != -ENOENT) {
                        log_warning_errno(e, "Cannot release %s from the inbox count of %s",
                                          id, agent);
                        return;
                }
        }
}

void quota_note(struct spool *sp, struct quota *qs, const char *agent, const char *id,
                const struct quota_sender *s)
{
        struct quota_names q;
        bool taken = false;
        uint64_t off;
        int r;

        if (!qs->counting || !quota_on(sp) || quota_names(&q, agent, id, s) < 0)
                return;
        off = lock_off_quota(agent);
        r = quota_lock(sp, off);
        if (r == 0) {
                r = count_in(sp, agent, &q, &taken);
                lock_release(sp->lock_fd, off);
        }
        if (r < 0) {
                /* the next sweep counts again */
                qs->recount = true;
                if (r != -EAGAIN)       /* busy: another daemon counts for agent */
                        log_warning_errno(r, "Cannot count %s in the inbox of %s", id, agent);
        } else if (taken) {
                log_debug("Counted %s in the inbox of %s (not counted before)", id, agent);
        }
}

/* The links in agent/sub/ of ids with no item in claimed/ go, each under
 * its id's lock (a claim in flight holds it: its count comes before its
 * record).  The number removed. */
static unsigned repair_ids(struct spool *sp, const char *agent, const char *sub)
{
        char d[128];
        struct dirent *de;
        unsigned n = 0;
        int fd;
        DIR *dir;

        if (xsnprintf(d, sizeof(d), "%s/%s", agent, sub) < 0)
                return 0;
        fd = openat(sp->fd[SD_QUOTA], d, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return 0;       /* nothing counted yet */
        dir = fdopendir(fd);
        if (!dir) {
                close(fd);
                return 0;
        }
        while ((de = readdir(dir))) {
                const char *id = de->d_name;
                if (id[0] == '.' || !hd_id_valid(id) || spool_id_claimed(sp, id))
                        continue;
                uint64_t off = lock_off_id(id);
                if (lock_try(sp->lock_fd, off, true) < 0)
                        continue;
                char p[128 + NAME_MAX + 2];
                if (!spool_id_claimed(sp, id) &&
                    xsnprintf(p, sizeof(p), "%s/%s", d, id) >= 0 && store_count_remove(sp, p) == 0)
                        n++;
                lock_release(sp->lock_fd, off);
        }
        closedir(dir);
        return n;
}

/* The anchors in agent/sub/ with nothing waiting go (a flood of made-up
 * sender names leaves no file behind), under the agent's byte: a claim
 * holding it may be about to link to one. */
static void repair_anchors(struct spool *sp, const char *agent, const char *sub)
{
        char d[128];
        struct dirent *de;
        struct stat st;
        uint64_t off = lock_off_quota(agent);
        int fd;
        DIR *dir;

        if (xsnprintf(d, sizeof(d), "%s/%s", agent, sub) < 0)
                return;
        fd = openat(sp->fd[SD_QUOTA], d, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return;
        dir = fdopendir(fd);
        if (!dir) {
                close(fd);
                return;
        }
        while ((de = readdir(dir))) {
                if (de->d_name[0] == '.' ||
                    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_nlink > 1)
                        continue;
                if (lock_try(sp->lock_fd, off, true) < 0)
                        break;  /* busy: the next run */
                char p[128 + NAME_MAX + 2];
                if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_nlink == 1 &&
                    xsnprintf(p, sizeof(p), "%s/%s", d, de->d_name) >= 0)
                        (void) store_count_remove(sp, p);
                lock_release(sp->lock_fd, off);
        }
        closedir(dir);
}

void quota_repair(struct spool *sp)
{
        if (!quota_on(sp))
                return;
        for (size_t i = 0; i < sp->n_agents; i++) {
                const char *agent = sp->agents[i].cfg->name;
                unsigned n = repair_ids(sp, agent, Q_IDS);
                (void) repair_ids(sp, agent, Q_BY_SENDER);
                (void) repair_ids(sp, agent, Q_BY_PRODUCER);
                (void) repair_ids(sp, agent, Q_BY_SHARED);
                repair_anchors(sp, agent, Q_SENDERS);
                repair_anchors(sp, agent, Q_PRODUCERS);
                if (n)
                        log_info("Inbox count of %s: %u handoffs that no longer wait removed "
                                 "(a daemon stopped between a count and its claim or archive)",
                                 agent, n);
        }
}
