/* The decision for one name in handoff/, in the order of handoffd(8), OPERATION:
 * read (name, safe open, parse), verify (authenticate, validate,
 * freshness; for an agent served here its own expiry before the MAC,
 * which needs no key), target (an agent not served here: left or
 * rejected), and for one of ours the claim's preconditions under the
 * lock of its id (replay, the relay's take, quota, baton).  The claim
 * itself is intake.c's, the moves spool.c's.
 *
 * Each step returns 1 when it decided (the outcome in *ret), 0 when the
 * next step decides, or -errno. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "agents.h"
#include "canon_src.h"
#include "deadline.h"
#include "decide.h"
#include "delivery.h"
#include "files.h"
#include "foreign.h"
#include "lock.h"
#include "log.h"
#include "parts.h"
#include "payload.h"
#include "pending.h"
#include "quota.h"
#include "record.h"

/* A file whose parse fails this soon after we first saw it (and after its
 * last change) may still be being written in place (no tmp/ + rename):
 * look again later.  Its mtime alone is its owner's to set. */
#define SETTLE_USEC (2 * 1000000LL)
/* Names remembered for that; when full, a new name gets no grace. */
#define SEEN_MAX 4096
/* Directories in handoff/ remembered as reported. */
#define DIRS_MAX 4096

static int decided(enum item_outcome *ret, enum item_outcome o)
{
        *ret = o;
        return 1;
}

static bool name_ignored(const char *name)
{
        size_t l = strlen(name);

        /* Dotfiles are writers' temp names (".NAME.tmp", ours too). */
        return name[0] == '.' || (l > 4 && !strcmp(name + l - 4, ".tmp")) ||
               name[l - 1] == '~';
}

/* When did we first see this file, the name with this inode?  Entries go
 * when the decision is made (intake_batch). */
static int64_t seen_first(struct parts *p, const char *name, ino_t ino, int64_t mono)
{
        struct seen_entry *e = dict_get(&p->decide->seen, name), *v, *nx;

        if (e && e->ino == ino)
                return e->first_usec;
        if (!e && dict_count(&p->decide->seen) >= SEEN_MAX) {
                /* Only names whose decision never came (a daemon bug) are
                 * this old; a flood of new ones just gets no grace. */
                DICT_FOREACH_SAFE(v, nx, &p->decide->seen)
                        if (mono - v->first_usec > 60 * 1000000LL)
                                dict_remove(&p->decide->seen, v);
                if (dict_count(&p->decide->seen) >= SEEN_MAX)
                        return mono - SETTLE_USEC;
        }
        if (!e)
                e = dict_put(&p->decide->seen, name, NULL);
        if (e)
                *e = (struct seen_entry){ .ino = ino, .first_usec = mono };
        return mono;
}

/* A directory in handoff/ is no handoff, and it is never moved: in
 * rejected/ it would be its owner's to fill, out of retention's reach,
 * and moving a directory needs write access to it, which a move would
 * lack at every retry.  Reported once (that name with that inode), then
 * left where it is; what no rescan meets again is forgotten when the
 * memory is full. */
static int decide_dir(struct parts *p, const char *name, const struct stat *st,
                      enum item_outcome *ret)
{
        struct spool *sp = p->sp;
        ino_t *e = dict_get(&p->decide->dirs, name), *v, *nx;
        struct stat now;
        char q[300];

        if (e && *e == st->st_ino)
                return decided(ret, IO_IGNORED);
        if (!e && dict_count(&p->decide->dirs) >= DIRS_MAX)
                DICT_FOREACH_SAFE(v, nx, &p->decide->dirs)
                        if (fstatat(sp->fd[SD_HANDOFF], dict_key(v), &now,
                                    AT_SYMLINK_NOFOLLOW) < 0 ||
                            !S_ISDIR(now.st_mode) || now.st_ino != *v)
                                dict_remove(&p->decide->dirs, v);
        if (!e && dict_count(&p->decide->dirs) >= DIRS_MAX) {
                /* One line for all that do not fit. */
                if (!p->decide->dirs_full)
                        log_warning("More than %d directories in handoff/: the others are "
                                    "left there without a line each", DIRS_MAX);
                p->decide->dirs_full = true;
                return decided(ret, IO_IGNORED);
        }
        if (!e)
                e = dict_put(&p->decide->dirs, name, NULL);
        if (e)
                *e = st->st_ino;
        log_decision(LOG_WARNING, NULL, NULL, "left", NULL,
                     "Left %s in handoff/: a directory, not a handoff",
                     log_quote(name, q, sizeof(q)));
        return decided(ret, IO_IGNORED);
}

/* Is handoff/name a directory (st)?  For a name that was not opened. */
static bool is_dir(struct spool *sp, const char *name, struct stat *st)
{
        return fstatat(sp->fd[SD_HANDOFF], name, st, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISDIR(st->st_mode);
}

/* Past its own expiry (or issued too far ahead), by times that are
 * well-formed: for an agent served here that is a rejection whoever
 * signed it, known without a key from what its sender wrote, where the
 * canonical bytes and the MAC cost about what the parse did.  Times that
 * are not well-formed are the checks' after the MAC (bad_mac first: an
 * unauthenticated sender learns nothing of the rules). */
static bool stale_unsigned(const json_t *doc, const hd_policy *pol, int64_t now, hd_verdict *v)
{
        const char *ini, *exp;
        int64_t a, b;

        handoff_unverified_times(doc, &ini, &exp);
        if (!ini || !exp || hd_time_parse(ini, &a) < 0 || hd_time_parse(exp, &b) < 0 || b <= a)
                return false;
        return hd_check_fresh(doc, pol, now, v) == -EBADMSG &&
               (v->reason == HD_R_EXPIRED || v->reason == HD_R_FUTURE_TIMESTAMP);
}

void decide_uncount(struct spool *sp, struct item *it)
{
        if (it->counted)
                quota_release(sp, it->agent->cfg->name, it->h.id);
        it->counted = false;
}

/* Is the producer's file (src, which holds doc) what a claim left in
 * handoff/: our record claimed/<id>.json holds doc, and src was last
 * written before the record was?  A copy written since is a replay
 * (rejected as duplicate_id).  Its mtime is the producer's to set (a
 * power cut that undoes our unlink keeps it, not its ctime): one set
 * back makes her own copy go without a rejection, nothing more. */
static bool claim_leftover(struct spool *sp, const char *id, const json_t *doc,
                           const struct timespec *src)
{
        _cleanup_close_ int fd = -1;
        _cleanup_json_ json_t *rec = NULL;
        char name[NAME_MAX + 1];
        struct stat st;

        if (xsnprintf(name, sizeof(name), "%s.json", id) < 0)
                return false;
        fd = openat(sp->fd[SD_CLAIMED], name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0 ||
            src->tv_sec > st.st_mtim.tv_sec ||
            (src->tv_sec == st.st_mtim.tv_sec && src->tv_nsec > st.st_mtim.tv_nsec) ||
            delivery_record_read(sp, fd, &st, &rec) < 0)
                return false;
        return json_equal((json_t *)record_handoff(rec), (json_t *)doc);
}

/* The same once its item has left claimed/: a restart's sweep may
 * archive the item (consumed, or expired since) before the start's scan
 * looks at the leftover.  The record is in archive/ under a name this
 * file does not tell, so the replay memory stands for it: an authentic
 * file (its MAC or signature good, whether fresh or not) of an id
 * remembered in ids/, last written before the mark was (the archive
 * marks the id before the item leaves claimed/): strictly, as a file's
 * times are the kernel's clock tick, and a replay written in the tick
 * of the mark must not pass for older.  What an authentic copy
 * written since is: a replay.  The mark is an archive's: an empty one
 * (or a rejection's of an id held already), or the relay's note of an item
 * archived as relayed (store_outbox_archive() writes it after the PubAck:
 * the item is on the stream).  That note names the producer's file by its
 * inode, which store_id_source_is() checks; a file system rebuilt after a
 * power cut gives her file another, and the restart may archive the
 * outbox item before its scan reaches her name: the mark still tells. */
static bool archived_leftover(struct spool *sp, const struct item *it, const char *id)
{
        struct stat m;

        if (!it->h.id[0] && !it->authentic)
                return false;
        return store_id_archived(sp, id, &m) &&
               (it->mtim.tv_sec < m.st_mtim.tv_sec ||
                (it->mtim.tv_sec == m.st_mtim.tv_sec && it->mtim.tv_nsec < m.st_mtim.tv_nsec));
}

/* claim_leftover(): then the producer's name goes, as the claim would
 * have done; true when it is a leftover. */
static bool drop_claim_leftover(struct spool *sp, struct item *it, const char *id)
{
        char q[300];

        struct stat st;

        if (claim_leftover(sp, id, it->doc, &it->mtim)) {
                (void) store_drop_source(sp, it->name, it->dev, it->ino);
                log_info("Removed %s: claimed already as %s (left by a crash)",
                         log_quote(it->name, q, sizeof(q)), id);
                return true;
        }
        /* A take into outbox/ whose item was relayed before the name left:
         * the note names this very file */
        if (fstatat(sp->fd[SD_HANDOFF], it->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            st.st_dev == it->dev && st.st_ino == it->ino && store_id_source_is(sp, id, &st)) {
                (void) store_drop_source(sp, it->name, it->dev, it->ino);
                log_info("Removed %s: taken into outbox/ already as %s (left by a crash)",
                         log_quote(it->name, q, sizeof(q)), id);
                return true;
        }
        if (archived_leftover(sp, it, id)) {
                (void) store_drop_source(sp, it->name, it->dev, it->ino);
                log_info("Removed %s: archived already as %s (left by a crash)",
                         log_quote(it->name, q, sizeof(q)), id);
                return true;
        }
        return false;
}

/* Move it to rejected/ for v, and remember the id of an authenticated
 * one.  If the record of its id holds this file already, the file is that
 * claim's leftover (after a crash, or from another daemon's claim not yet
 * synced).  It then goes as after its claim and is not rejected; otherwise
 * its id would be in rejected/ beside its record.  Another daemon may judge
 * the same file differently (its clock not yet past expires_at, other
 * keys) and claim it meanwhile.  So a rejection of a file that names an id
 * takes the id's lock, as the claim does, and looks for the record under
 * it; when the lock is busy the file is looked at again later.  Always
 * decides: 1, or -errno. */
static int decide_reject(struct spool *sp, struct item *it, const hd_verdict *v,
                         bool authenticated, int64_t now, enum item_outcome *ret)
{
        const char *hid = it->h.id[0] ? it->h.id : handoff_unverified_id(it->doc);
        struct spool_ino was = { .dev = it->dev, .ino = it->ino };
        int r;

        if (hid && hd_id_valid(hid) && !it->lock_id) {
                r = lock_try_claim(sp->lock_fd, lock_off_id(hid));
                if (r < 0)
                        return r == -EAGAIN ? decided(ret, IO_BUSY) : r;
                it->lock_id = lock_off_id(hid);
        }
        /* Under it, or decide_claim()'s (a leftover meets the quota its claim fills). */
        if (hid && hd_id_valid(hid) && drop_claim_leftover(sp, it, hid))
                return decided(ret, IO_GONE);
        /* Only the inode decided on, once one was looked at. */
        r = store_reject(sp, it->name, it->ino ? &was : NULL, v->reason, v->detail,
                         authenticated ? hid : NULL, now, ret);
        return r < 0 ? r : 1;
}

int decide_claimed_again(struct spool *sp, struct item *it, const char *how, int64_t now,
                         enum item_outcome *ret)
{
        hd_verdict v = { .reason = HD_R_DUPLICATE_ID };
        int r;

        if (drop_claim_leftover(sp, it, it->h.id)) {
                *ret = IO_GONE;
                return 0;
        }
        snprintf(v.detail, sizeof(v.detail), "handoff_id '%s' %s", it->h.id, how);
        r = decide_reject(sp, it, &v, true, now, ret);
        return r < 0 ? r : 0;
}

/* Why to, an agent of this config, is out of service here (agents.c), or
 * NULL: a handoff left for it says so, not "not served here". */
static const char *unserved_why(const struct parts *p, const char *to)
{
        const struct unserved_entry *u = to ? dict_get(&p->unserved, to) : NULL;

        return u ? u->why : NULL;
}

/* For an agent not served here: left in handoff/ and looked at again when
 * it expires, or rejected as expired_unclaimed once past that.  was: why
 * it does not verify here (HD_OK: it does).  Always decides. */
static int decide_left(struct parts *p, struct item *it, const char *to, hd_reason was,
                       hd_verdict *v, int64_t now, enum item_outcome *ret)
{
        struct spool *sp = p->sp;
        const struct config *c = sp->cfg;
        const char *oos = unserved_why(p, to);
        const char *ini, *exp;
        struct stat st;
        int64_t t, x;
        char q[300];

        /* Its own times may be forged (it may not be authenticated here),
         * so it expires at the latest max_window after it arrived. */
        handoff_unverified_times(it->doc, &ini, &exp);
        if (fstat(it->fd, &st) < 0)
                return -errno;
        t = (int64_t)st.st_ctim.tv_sec * 1000000LL + st.st_ctim.tv_nsec / 1000;
        t += (c->max_window + c->max_clock_skew) * 1000000LL;
        if (exp && hd_time_parse(exp, &x) == 0 && x < t)
                t = x;
        if (ini && hd_time_parse(ini, &x) == 0 && x + c->max_window * 1000000LL < t)
                t = x + c->max_window * 1000000LL;
        if (t < now) {
                /* truncation only shortens why it is out of service */
                snprintf(v->detail, sizeof(v->detail),
                         "no daemon claimed it for agent %s before it expired "
                         "(%s%.150s%s%s)",
                         to && hd_agent_valid(to) ? to : "(invalid)",
                         oos ? "out of service here: " : "not served here", oos ? oos : "",
                         was ? "; not authenticated here: " : "",
                         was ? hd_reason_name(was) : "");
                v->reason = HD_R_EXPIRED_UNCLAIMED;
                return decide_reject(sp, it, v, !was, now, ret);
        }
        /* Bounded as rejected/ is: no room, it is refused now, and not
         * remembered (as inbox_full: it may come again). */
        if (foreign_full(&p->foreign, sp, it->name, st_bytes(&st))) {
                snprintf(v->detail, sizeof(v->detail),
                         "for agent %s, not served here; what waits unclaimed in handoff/ is at "
                         "its bound ([retention] unclaimed_max_items %llu, "
                         "unclaimed_max_bytes %llu)",
                         to && hd_agent_valid(to) ? to : "(invalid)",
                         (unsigned long long)c->unclaimed_max_items,
                         (unsigned long long)c->unclaimed_max_bytes);
                v->reason = HD_R_NOT_SERVED;
                return decide_reject(sp, it, v, false, now, ret);
        }
        foreign_note(&p->foreign, it->name, &st, t + 1, to);
        deadline_note(&p->deadline, t + 1);
        sp->st.left++;
        /* once: later looks end in foreign_fresh() */
        if (oos)
                log_decision(LOG_WARNING, NULL, to, "left", NULL,
                             "Left %s for agent %s, out of service here: %s",
                             log_quote(it->name, q, sizeof(q)), to, oos);
        else
                log_decision(LOG_INFO, NULL, to, "left", NULL,
                             "Left %s for agent %s, not served here",
                             log_quote(it->name, q, sizeof(q)), to ? to : "(none)");
        return decided(ret, IO_LEFT);
}

/* it (st) has two links.  We judge it under its inode's lock, which a
 * rejection holds until its second link is complete (store_reject()).
 * A second link that a power cut kept from a claim or a move, or one
 * that a rejection made, goes; any other is a hard link.  The file's id
 * is read only when the other link is none of those. */
static int decide_links(struct spool *sp, struct item *it, const struct stat *st,
                        const hd_verdict *v, int64_t now, enum item_outcome *ret)
{
        hd_limits lim = { .max_size = sp->cfg->max_file_size, .max_depth = HD_DEFAULT_MAX_DEPTH };
        uint64_t off = lock_off_inode(it->dev, it->ino);
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_t *doc = NULL;
        size_t len;
        hd_verdict pv;
        bool leftover;
        int r = lock_try(sp->lock_fd, off, true);

        if (r < 0)
                return r == -EAGAIN ? decided(ret, IO_BUSY) : r;
        leftover = store_drop_claim_leftover(sp, it->name);
        if (!leftover && (uintmax_t)st->st_size <= sp->cfg->max_file_size &&
            read_all_sized(it->fd, sp->cfg->max_file_size, (size_t)st->st_size, &buf, &len) >= 0 &&
            hd_parse(buf, len, &lim, &doc, &pv) >= 0)
                leftover = store_drop_id_leftover(sp, it->name, handoff_unverified_id(doc));
        r = leftover ? decided(ret, IO_GONE) : decide_reject(sp, it, v, false, now, ret);
        lock_release(sp->lock_fd, off);
        return r;
}

/* Step 2 by name: handoff/name opened safely into it->fd, st its fstat. */
static int open_name(struct parts *p, struct item *it, int64_t now, struct stat *st,
                     enum item_outcome *ret)
{
        struct spool *sp = p->sp;
        const char *name = it->name;
        hd_verdict v;
        int r;

        r = hd_open_at(sp->fd[SD_HANDOFF], name, &it->fd, &v);
        if (r == -ENOENT)
                return decided(ret, IO_GONE);
        if (r == -EACCES) {
                if (is_dir(sp, name, st))
                        return decide_dir(p, name, st, ret);
                /* Its owner's mode keeps us out: no later look will do
                 * better, so it is not looked at again and again. */
                v.reason = HD_R_UNREADABLE;
                snprintf(v.detail, sizeof(v.detail),
                         "the daemon's user may not read it (mode or owner)");
                return decide_reject(sp, it, &v, false, now, ret);
        }
        if (r == -EBADMSG)
                return decide_reject(sp, it, &v, false, now, ret);
        if (r < 0)
                return r;
        if (fstat(it->fd, st) < 0)
                return -errno;
        return 0;
}

bool decide_opens(const struct parts *p, const char *name)
{
        return !name_ignored(name) && hd_name_safe(name) && !dict_get(&p->foreign.names, name);
}

/* Steps 1-2: the name, and the file opened safely (fd and inode in it).
 * A name we left for another agent, unchanged, is decided without an
 * open. */
static int decide_open(struct parts *p, struct item *it, int64_t now, struct stat *st,
                       enum item_outcome *ret)
{
        struct spool *sp = p->sp;
        const char *name = it->name;
        int r;

        if (name_ignored(name))
                return decided(ret, IO_IGNORED);
        if (!hd_name_safe(name)) {
                if (is_dir(sp, name, st))
                        return decide_dir(p, name, st, ret);
                r = store_reject(sp, name, NULL, HD_R_BAD_NAME,
                                 "file name is not a safe name", NULL, now, ret);
                return r < 0 ? r : 1;
        }
        if (foreign_fresh(&p->foreign, sp, name, now))
                return decided(ret, IO_LEFT);

        if (it->look && it->look->fd >= 0) {
                /* Opened when it was queued (watch.c pend()): that look
                 * is this one. */
                it->fd = TAKE_FD(it->look->fd);
                *st = it->look->st;
        } else {
                r = open_name(p, it, now, st, ret);
                if (r != 0)
                        return r;
        }
        if (S_ISDIR(st->st_mode))
                return decide_dir(p, name, st, ret);
        it->dev = st->st_dev;
        it->ino = st->st_ino;
        it->uid = st->st_uid;
        /* Moved by this batch already (twice in its names). */
        if (store_leaving(sp, name, st))
                return decided(ret, IO_GONE);
        return 0;
}

/* Step 3: it->doc parsed from the open file, whose bytes (*ret_buf, the
 * caller's to free) src borrows for the MAC.  One that does not parse
 * yet, new and changed lately, is deferred: its writer may still be at
 * it. */
static int decide_parse(struct parts *p, struct item *it, int64_t now, struct stat *st,
                        char **ret_buf, struct canon_src *src, enum item_outcome *ret)
{
        struct spool *sp = p->sp;
        const struct config *c = sp->cfg;
        hd_limits lim = { .max_size = c->max_file_size, .max_depth = HD_DEFAULT_MAX_DEPTH };
        char *buf = NULL;
        hd_verdict v;
        size_t len;
        int r;

        /* Two daemons may decide it at once, to one verdict: of two
         * rejections the second finds the first's link (store_reject()),
         * of two claims one the id locked, then claimed (claim_leftover()). */
        r = read_fd_stat(it->fd, st, it->name, c->max_file_size, &buf, &len, &v);
        *ret_buf = buf;
        /* Two links (read_fd_stat() tells, not hd_open_at()). */
        if (r == -EBADMSG && v.reason == HD_R_HARDLINK)
                return decide_links(sp, it, st, &v, now, ret);
        if (r == -ENOENT)
                return decided(ret, IO_GONE);
        if (r == -EBADMSG)
                return decide_reject(sp, it, &v, false, now, ret);
        if (r < 0)
                return r;
        it->mtim = st->st_mtim;
        /* The relay's inbound wrote these very bytes: its parse of them
         * is this one (relayed.c).  The checks after it are all made. */
        if (relayed_take(&p->relayed, it->name, buf, len, &it->doc, src))
                return 0;
        r = canon_src_parse(buf, len, &lim, &it->doc, src, &v);
        if (r == -EBADMSG) {
                int64_t mono = mono_usec();
                if (now - (int64_t)st->st_mtim.tv_sec * 1000000LL - st->st_mtim.tv_nsec / 1000 <
                            SETTLE_USEC &&
                    mono - seen_first(p, it->name, st->st_ino, mono) < SETTLE_USEC) {
                        sp->st.deferred++;
                        return decided(ret, IO_DEFERRED);
                }
                return decide_reject(sp, it, &v, false, now, ret);
        }
        return r < 0 ? r : 0;
}

/* Not for us (v: why it does not verify here): another daemon may hold
 * the sender's key, so it is left, unless a document that verified holds
 * its id already (then no daemon will ever claim it) or it is plainly
 * past its expiry. */
static int decide_not_verified(struct parts *p, struct item *it, const char *to,
                               hd_verdict *v, int64_t now, enum item_outcome *ret)
{
        struct spool *sp = p->sp;
        const char *hid = handoff_unverified_id(it->doc);

        if ((v->reason == HD_R_UNKNOWN_KEY || v->reason == HD_R_BAD_MAC) &&
            hid && hd_id_valid(hid) && spool_id_seen(sp, hid)) {
                size_t l = strlen(v->detail);
                snprintf(v->detail + l, sizeof(v->detail) - l,
                         "; handoff_id is held here by a handoff that verified");
                return decide_reject(sp, it, v, false, now, ret);
        }
        if (v->reason == HD_R_UNKNOWN_KEY || v->reason == HD_R_BAD_MAC)
                return decide_left(p, it, to, v->reason, v, now, ret);
        if (v->reason == HD_R_EXPIRED && to && hd_agent_valid(to)) {
                const char *oos = unserved_why(p, to);
                char was[sizeof(v->detail)];
                snprintf(was, sizeof(was), "%s", v->detail);
                /* truncation only shortens the quoted detail */
                if (snprintf(v->detail, sizeof(v->detail),
                             "no daemon claimed it for agent %s before it expired "
                             "(%s%.170s)", to, oos ? "out of service here: " : "",
                             oos ? oos : was) < 0)
                        v->detail[0] = '\0';
                v->reason = HD_R_EXPIRED_UNCLAIMED;
                return decide_reject(sp, it, v, true, now, ret);
        }
        return decide_reject(sp, it, v, false, now, ret);
}

/* Steps 4-7: the file is authenticated, valid and fresh, and then it->h
 * is filled (given *buf when that holds the canonical bytes).  It must be
 * for one of our agents (it->agent) or for a remote agent (*out, the
 * relay), checked here as strictly as our own; we are never an open
 * relay.  A file for any other agent is left or rejected. */
static int decide_verify(struct parts *p, struct item *it, const struct canon_src *src,
                         char **buf, int64_t now, const struct spool_relay **out, enum item_outcome *ret)
{
        struct spool *sp = p->sp;
        const struct config *c = sp->cfg;
        const char *to = handoff_unverified_to(it->doc);
        hd_policy pol = { .max_clock_skew_s = c->max_clock_skew, .max_window_s = c->max_window };
        hd_payload_opts po = { .roles = (const char *const *)c->roles };
        hd_verdict v;
        int r;

        it->agent = spool_agent(sp, to);
        *out = NULL;
        if (!it->agent && sp->relay.ctx && config_remote(c, to))
                *out = &sp->relay;
        else if (!it->agent && sp->a2a.ctx && config_remote_a2a(c, to))
                *out = &sp->a2a;
        /* For an agent not served here the MAC decides between left and
         * rejected: not before it. */
        bool stale = (it->agent || *out) && stale_unsigned(it->doc, &pol, now, &v);
        r = stale ? -EBADMSG :
            canon_src_verify(it->doc, src, config_key_lookup, (void *)c, &pol, &po, now, &v);
        if (r == -EBADMSG) {
                /* A claim's leftover that no longer verifies (expired
                 * since, or its key gone) goes as after its claim:
                 * decide_reject() looks.  Past its times, one whose id is
                 * remembered is authenticated first (archived_leftover()):
                 * the MAC is paid for only then. */
                const char *hid = handoff_unverified_id(it->doc);
                hd_verdict av;
                if (stale && hid && hd_id_valid(hid) && spool_id_remembered(sp, hid))
                        it->authentic = auth_check_src(it->doc, src, config_key_lookup,
                                                       (void *)c, &av) == 0;
                if (it->agent || *out)
                        return decide_reject(sp, it, &v, false, now, ret);
                return decide_not_verified(p, it, to, &v, now, ret);
        }
        if (r < 0)
                return r;
        /* Verified: its fields are read once, here, for every module. */
        r = handoff_parse(it->doc, &it->h);
        if (r < 0)
                return r;
        if (src->len > 0) {
                it->h.canon = TAKE_PTR(*buf);
                memmove(it->h.canon, it->h.canon + src->off, src->len);
                it->h.canon_len = src->len;
        }
        if (!it->agent && !*out)
                return decide_left(p, it, to, HD_OK, &v, now, ret);
        return 0;
}

/* Steps 8-9 under the lock of its id, which it keeps until its bootstrap
 * is published, so recovery in another daemon keeps off it: still this
 * file, not seen before, taken by the relay (out) or within its agent's
 * quota and baton.  Always decides. */
static int decide_claim(struct spool *sp, const struct quota *quota, struct item *it,
                        const struct spool_relay *out, int64_t now, enum item_outcome *ret)
{
        const struct handoff *h = &it->h;
        bool session = h->ptype && h->ptype->session_store;
        struct stat cur;
        hd_verdict v;
        int r;

        r = lock_try_claim(sp->lock_fd, lock_off_id(h->id));
        if (r == -EAGAIN)
                return decided(ret, IO_BUSY);
        if (r < 0)
                return r;
        it->lock_id = lock_off_id(h->id);
        /* A plain bootstrap: nothing an agent sees is made before its
         * record.  A profile copy or a Baton patch is made before it, and
         * the relay has no record here. */
        bool by_link = !out && delivery_plain(it->agent) && !session;
        /* Still this file in handoff/?  It may have been rejected since we
         * opened it (decide_reject(), store_reject()), and a second link is
         * a move not finished: the next look sees to it.  With fsync = no
         * a plain claim moves the file right after its record, and that
         * move's look at what arrived is this look: a claim whose file has
         * left the name is withdrawn before it is published (intake.c). */
        if (!by_link || sp->cfg->fsync) {
                if (fstatat(sp->fd[SD_HANDOFF], it->name, &cur, AT_SYMLINK_NOFOLLOW) < 0)
                        return errno == ENOENT ? decided(ret, IO_GONE) : -errno;
                if (cur.st_dev != it->dev || cur.st_ino != it->ino)
                        return decided(ret, IO_GONE);
                if (cur.st_nlink > 1)
                        return decided(ret, IO_BUSY);
        }
        /* Claimed already?  For a plain bootstrap the record's link tells
         * (a link never replaces: the claim takes its EEXIST as this), so
         * no look in claimed/ is needed now; for the others it is. */
        if (by_link ? spool_id_remembered(sp, h->id) : spool_id_seen(sp, h->id)) {
                r = decide_claimed_again(sp, it, "was seen before", now, ret);
                return r < 0 ? r : 1;
        }
        if (out) {
                r = out->take(out->ctx, it->name, &cur, h, now);
                if (r == -EEXIST) {
                        v.reason = HD_R_DUPLICATE_ID;
                        snprintf(v.detail, sizeof(v.detail),
                                 "handoff_id '%s' is already in outbox/", h->id);
                        return decide_reject(sp, it, &v, true, now, ret);
                }
                if (r == -ENOENT)
                        return decided(ret, IO_GONE);
                return r < 0 ? r : decided(ret, IO_OUTBOX);
        }
        /* An agent's inbox is bounded (quota.c): refused, not remembered,
         * so the sender may send it again once there is room.  Counted as
         * waiting now, so every daemon's next claim sees it. */
        char pbuf[32];
        const struct quota_sender qs = {
                .from = h->from,
                .producer = quota_producer(quota, it->uid, pbuf, sizeof(pbuf)),
                .own_key = config_key_own(sp->cfg, h->kid[0] ? h->kid : NULL, h->from),
        };
        r = quota_take(sp, it->agent->cfg->name, h->id, &qs, &v, &it->counted);
        if (r == -EBADMSG)
                return decide_reject(sp, it, &v, false, now, ret);
        if (r == -EAGAIN)
                return decided(ret, IO_BUSY);
        if (r < 0)
                return r;
        if (session) {
                r = hd_baton_check_handoff(sp->fd[SD_BATON], h->doc, &v);
                if (r < 0)
                        decide_uncount(sp, it);
                if (r == -EBADMSG)
                        return decide_reject(sp, it, &v, true, now, ret);
                if (r < 0)
                        return r;
        }
        /* Verified and ours: the claim is the record that delivery
         * makes (delivery.c); until then the item is the producer's
         * file in handoff/, under the lock of its id. */
        return decided(ret, IO_TO_CLAIM);
}

int decide_item(struct parts *p, struct item *it, int64_t now, enum item_outcome *ret)
{
        struct spool *sp = p->sp;
        const struct spool_relay *out = NULL;
        _cleanup_free_ char *buf = NULL;
        struct canon_src src = { 0 };
        struct stat st;
        int r;

        r = decide_open(p, it, now, &st, ret);
        if (r == 0)
                r = decide_parse(p, it, now, &st, &buf, &src, ret);
        if (r == 0)
                r = decide_verify(p, it, &src, &buf, now, &out, ret);
        if (r == 0)
                r = decide_claim(sp, &p->quota, it, out, now, ret);
        return r < 0 ? r : 0;
}

int decide_memo_new(struct decide_memo **ret)
{
        struct decide_memo *m = calloc(1, sizeof(*m));

        if (!m)
                return -ENOMEM;
        dict_init(&m->seen, sizeof(struct seen_entry));
        dict_init(&m->dirs, sizeof(ino_t));
        *ret = m;
        return 0;
}

void decide_memo_free(struct decide_memo *m)
{
        if (!m)
                return;
        dict_clear(&m->seen);
        dict_clear(&m->dirs);
        free(m);
}
