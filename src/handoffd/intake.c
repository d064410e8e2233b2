/* Intake: the decision for each file dropped into handoff/, in the order
 * of DESIGN.md (name, safe open, parse, authenticate, validate, freshness,
 * target, replay, claim; for an agent served here, its own expiry before
 * the MAC, which needs no key), then the three delivery steps for a batch of
 * claims; items left for agents not served here, and their expiry; the
 * same checks on an earlier version's claimed item (intake_verify_claimed).
 * The decisions are made here; the moves are spool.c's, the files of a
 * delivery delivery.c's; the deadlines it finds go into the spool's
 * deadline queue (deadline.h).
 *
 * Exactly-once among several daemons on one spool rests on three things:
 * the claim is the link of the daemon's record as claimed/<handoff_id>.json
 * (a link never replaces), so of two files or two daemons with one id
 * only one wins; the claimer holds the lock of the id (lock.h: a byte of
 * SPOOL/.lock, which no producer can open) from before its verdict until
 * its bootstrap is published, so recovery in another daemon never
 * publishes an item that is being delivered; and ids/<handoff_id>
 * remembers every authenticated id after the item has left claimed/.
 * Nothing here waits for a lock. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "canon_src.h"
#include "deadline.h"
#include "delivery.h"
#include "files.h"
#include "intake.h"
#include "verified.h"
#include "layout.h"
#include "lock.h"
#include "log.h"
#include "payload.h"
#include "quota.h"

/* A file whose parse fails this soon after we first saw it (and after its
 * last change) may still be being written in place (no tmp/ + rename):
 * look again later.  Its mtime alone is its owner's to set. */
#define SETTLE_USEC (2 * 1000000LL)
/* Names remembered for that; when full, a new name gets no grace. */
#define SEEN_MAX 4096
/* Directories in handoff/ remembered as reported. */
#define DIRS_MAX 4096

static bool name_ignored(const char *name)
{
        size_t l = strlen(name);

        /* Dotfiles are writers' temp names (".NAME.tmp", ours too). */
        return name[0] == '.' || (l > 4 && !strcmp(name + l - 4, ".tmp")) ||
               name[l - 1] == '~';
}

int intake_verify_claimed(struct spool *sp, const json_t *doc, const char *id,
                          hd_verdict *v)
{
        const struct config *c = sp->cfg;
        hd_policy pol = { .max_clock_skew_s = c->max_clock_skew, .max_window_s = c->max_window };
        hd_payload_opts po = { .roles = (const char *const *)c->roles };
        const char *ini = json_string_value(json_object_get(doc, "initiated_at"));
        const char *hid, *to;
        int64_t at = 0;
        int r;

        /* Freshness was checked at the claim: verify as of the issue time,
         * when every signed handoff was fresh. */
        if (ini)
                hd_time_parse(ini, &at);
        r = hd_verify(doc, config_key_lookup, (void *)c, &pol, &po, at, v);
        if (r < 0)
                return r;
        hid = json_string_value(json_object_get(doc, "handoff_id"));
        if (!hid || strcmp(hid, id)) {
                v->reason = HD_R_BAD_ID;
                snprintf(v->detail, sizeof(v->detail),
                         "claimed as '%s', now says handoff_id '%.64s'", id, hid ? hid : "");
                return -EBADMSG;
        }
        to = json_string_value(json_object_get(doc, "to_agent"));
        if (!spool_agent(sp, to)) {
                v->reason = HD_R_BAD_AGENT;
                snprintf(v->detail, sizeof(v->detail),
                         "to_agent '%.64s' is not served here", to ? to : "");
                return -EBADMSG;
        }
        return 0;
}

/* When did we first see this file, the name with this inode?  Entries go
 * when the decision is made (intake_batch). */
static int64_t seen_first(struct spool *sp, const char *name, ino_t ino, int64_t mono)
{
        json_t *e = json_object_get(sp->seen, name);
        const char *k;
        void *tmp;
        json_t *v;

        if (e && json_integer_value(json_array_get(e, 0)) == (json_int_t)ino)
                return json_integer_value(json_array_get(e, 1));
        if (!e && json_object_size(sp->seen) >= SEEN_MAX) {
                /* Only names whose decision never came (a daemon bug) are
                 * this old; a flood of new ones just gets no grace. */
                json_object_foreach_safe(sp->seen, tmp, k, v)
                        if (mono - json_integer_value(json_array_get(v, 1)) > 60 * 1000000LL)
                                json_object_del(sp->seen, k);
                if (json_object_size(sp->seen) >= SEEN_MAX)
                        return mono - SETTLE_USEC;
        }
        json_object_set_new_nocheck(sp->seen, name, json_pack("[I, I]", (json_int_t)ino,
                                                              (json_int_t)mono));
        return mono;
}

/* A directory in handoff/ is no handoff, and it is never moved: in
 * rejected/ it would be its owner's to fill, out of retention's reach
 * (and moving a directory needs write access to it, so the move failed
 * and was retried for ever, an error each time).  Reported once (that
 * name with that inode), then left where it is; what no rescan meets
 * again is forgotten when the memory is full. */
static int decide_dir(struct spool *sp, const char *name, const struct stat *st)
{
        json_t *e = json_object_get(sp->dirs, name);
        struct stat now;
        const char *k;
        void *tmp;
        json_t *v;
        char q[300];

        if (e && json_integer_value(e) == (json_int_t)st->st_ino)
                return IO_IGNORED;
        if (!e && json_object_size(sp->dirs) >= DIRS_MAX)
                json_object_foreach_safe(sp->dirs, tmp, k, v)
                        if (fstatat(sp->fd[SD_HANDOFF], k, &now, AT_SYMLINK_NOFOLLOW) < 0 ||
                            !S_ISDIR(now.st_mode) || (json_int_t)now.st_ino != json_integer_value(v))
                                json_object_del(sp->dirs, k);
        if (e || json_object_size(sp->dirs) < DIRS_MAX) {
                json_object_set_new_nocheck(sp->dirs, name, json_integer((json_int_t)st->st_ino));
        } else {
                /* One line for all that do not fit. */
                if (!sp->dirs_full)
                        log_warning("More than %d directories in handoff/: the others are "
                                    "left there without a line each", DIRS_MAX);
                sp->dirs_full = true;
                return IO_IGNORED;
        }
        log_decision(LOG_WARNING, NULL, NULL, "left", NULL,
                     "Left %s in handoff/: a directory, not a handoff",
                     log_quote(name, q, sizeof(q)));
        return IO_IGNORED;
}

/* Is handoff/name a directory (st)?  For a name that was not opened. */
static bool is_dir(struct spool *sp, const char *name, struct stat *st)
{
        return fstatat(sp->fd[SD_HANDOFF], name, st, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISDIR(st->st_mode);
}

/* The file we left for another agent, unchanged, and not yet expired?
 * Names get reused (the real writer's "{caller_hash}-{seq}.json"), so the
 * inode and ctime must match too. */
static bool foreign_fresh(struct spool *sp, const char *name, int64_t now)
{
        json_t *e = json_object_get(sp->foreign, name);
        struct stat st;

        if (!e || json_integer_value(json_array_get(e, 0)) < now)
                return false;
        if (fstatat(sp->fd[SD_HANDOFF], name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return false;
        return (json_int_t)st.st_ino == json_integer_value(json_array_get(e, 1)) &&
               (json_int_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec ==
                       json_integer_value(json_array_get(e, 2));
}

/* sp->foreign and the bytes its files hold, changed together. */
static void foreign_drop(struct spool *sp, const char *name)
{
        json_t *e = json_object_get(sp->foreign, name);
        json_int_t b = json_integer_value(json_array_get(e, 4));

        if (!e)
                return;
        sp->foreign_bytes -= b > 0 && (uint64_t)b <= sp->foreign_bytes ? (uint64_t)b
                                                                       : sp->foreign_bytes;
        json_object_del(sp->foreign, name);
}

static void foreign_put(struct spool *sp, const char *name, json_t *e)
{
        json_int_t b = json_integer_value(json_array_get(e, 4));

        if (!e)
                return;
        foreign_drop(sp, name);
        if (json_object_set_new_nocheck(sp->foreign, name, e) == 0 && b > 0)
                sp->foreign_bytes += (uint64_t)b;
}

void intake_foreign_clear(struct spool *sp)
{
        json_object_clear(sp->foreign);
        sp->foreign_bytes = 0;
}

/* [expires, ino, ctime ns, to_agent, bytes]: the agent for status
 * (control.c), the bytes for [retention] unclaimed_max_bytes */
static void foreign_note(struct spool *sp, const char *name, const struct stat *st,
                         int64_t expires, const char *to)
{
        foreign_put(sp, name,
                json_pack("[I, I, I, s, I]", (json_int_t)expires, (json_int_t)st->st_ino,
                          (json_int_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec,
                          to && hd_agent_valid(to) ? to : "(invalid)", (json_int_t)st_bytes(st)));
}

/* Would one more file of bytes put what waits in handoff/ for agents not
 * served here past [retention] unclaimed_max_items or _bytes?  Entries
 * whose file is gone or replaced (another daemon claimed it, its producer
 * took it back) are let go first, a look at all of them at most once a
 * second. */
static bool unclaimed_full(struct spool *sp, const char *name, uint64_t bytes)
{
        const struct config *c = sp->cfg;
        const char *k;
        void *tmp;
        json_t *v;

        if (!c->unclaimed_max_items && !c->unclaimed_max_bytes)
                return false;
        foreign_drop(sp, name);
        for (int pass = 0; pass < 2; pass++) {
                bool over = (c->unclaimed_max_items &&
                             json_object_size(sp->foreign) + 1 > c->unclaimed_max_items) ||
                            (c->unclaimed_max_bytes && sp->foreign_bytes + bytes > c->unclaimed_max_bytes);
                if (!over || pass == 1 || mono_usec() - sp->foreign_purged < 1000000)
                        return over;
                sp->foreign_purged = mono_usec();
                json_object_foreach_safe(sp->foreign, tmp, k, v) {
                        struct stat st;
                        if (fstatat(sp->fd[SD_HANDOFF], k, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                            (json_int_t)st.st_ino != json_integer_value(json_array_get(v, 1)))
                                foreign_drop(sp, k);
                }
        }
        return true;
}

/* Past its own expiry (or issued too far ahead), by times that are
 * well-formed: for an agent served here that is a rejection whoever
 * signed it, known without a key from what its sender wrote, where the
 * canonical bytes and the MAC cost about what the parse did.  Times that
 * are not well-formed are the checks' after the MAC (bad_mac first: an
 * unauthenticated sender learns nothing of the rules). */
static bool stale_unsigned(const json_t *doc, const hd_policy *pol, int64_t now, hd_verdict *v)
{
        const char *ini = json_string_value(json_object_get(doc, "initiated_at"));
        const char *exp = json_string_value(json_object_get(doc, "expires_at"));
        int64_t a, b;

        if (!ini || !exp || hd_time_parse(ini, &a) < 0 || hd_time_parse(exp, &b) < 0 || b <= a)
                return false;
        return hd_check_fresh(doc, pol, now, v) == -EBADMSG &&
               (v->reason == HD_R_EXPIRED || v->reason == HD_R_FUTURE_TIMESTAMP);
}

/* One item between the first look and the claim rename. */
struct item {
        const char *name;
        int fd;
        uint64_t lock_id;
        json_t *doc;
        const char *id;
        struct agent_rt *agent;
        dev_t dev;              /* the producer's file, left once claimed */
        ino_t ino;
        struct timespec mtim;   /* its mtime, for claim_leftover() */
        bool counted;           /* quota_take() counted it as waiting */
        int outcome;
};

/* It will not wait: what quota_take() counted goes. */
static void uncount(struct spool *sp, struct item *it)
{
        if (it->counted)
                quota_release(sp, it->agent->cfg->name, it->id);
        it->counted = false;
}

static bool drop_claim_leftover(struct spool *sp, struct item *it, const char *id);

/* Move it to rejected/ for v; an authenticated one's id is remembered.
 * A file the record of its id holds already is that claim's leftover (a
 * crash, or another daemon's claim whose record is not yet synced): it
 * goes as after its claim, not rejected (its id would be in rejected/
 * beside its record: test_powercut found it).  Another daemon may reach
 * the other verdict on the same file (its clock not yet past expires_at,
 * another set of keys) and claim it meanwhile: so the rejection of a
 * file that names an id holds the id's lock, as the claim does (busy:
 * looked at again later), and looks for the record under it. */
static int decide_reject(struct spool *sp, struct item *it, const hd_verdict *v,
                         bool authenticated, int64_t now)
{
        const char *hid = it->doc ? json_string_value(json_object_get(it->doc, "handoff_id")) : NULL;
        struct spool_ino was = { .dev = it->dev, .ino = it->ino };
        int r;

        if (hid && hd_id_valid(hid) && !it->lock_id) {
                r = lock_try_claim(sp->lock_fd, lock_off_id(hid));
                if (r == -EAGAIN)
                        return IO_BUSY;
                if (r < 0)
                        return r;
                it->lock_id = lock_off_id(hid);
                if (drop_claim_leftover(sp, it, hid))
                        return IO_GONE;
        }
        /* Only the inode decided on, once one was looked at. */
        r = spool_reject(sp, it->name, it->ino ? &was : NULL, v->reason, v->detail,
                         authenticated ? hid : NULL, now);
        return r < 0 ? r : r == IO_GONE ? IO_GONE : IO_REJECTED;
}

/* Why to, an agent of this config, is out of service here (agents.c), or
 * NULL: a handoff left for it says so, not "not served here". */
static const char *unserved_why(const struct spool *sp, const char *to)
{
        return to ? json_string_value(json_object_get(sp->unserved, to)) : NULL;
}

/* For an agent not served here: left in handoff/ and looked at again when
 * it expires, or rejected as expired_unclaimed once past that.  was: why
 * it does not verify here (HD_OK: it does). */
static int decide_left(struct spool *sp, struct item *it, const char *to, hd_reason was,
                       hd_verdict *v, int64_t now)
{
        const struct config *c = sp->cfg;
        const char *exp = json_string_value(json_object_get(it->doc, "expires_at"));
        const char *ini = json_string_value(json_object_get(it->doc, "initiated_at"));
        const char *oos = unserved_why(sp, to);
        struct stat st;
        int64_t t, x;
        char q[300];

        /* Its own times may be forged (it may not be authenticated here),
         * so it expires at the latest max_window after it arrived. */
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
                return decide_reject(sp, it, v, !was, now);
        }
        /* Bounded as rejected/ is: no room, it is refused now, and not
         * remembered (as inbox_full: it may come again). */
        if (unclaimed_full(sp, it->name, st_bytes(&st))) {
                snprintf(v->detail, sizeof(v->detail),
                         "for agent %s, not served here; what waits unclaimed in handoff/ is at "
                         "its bound ([retention] unclaimed_max_items %llu, unclaimed_max_bytes %llu)",
                         to && hd_agent_valid(to) ? to : "(invalid)",
                         (unsigned long long)c->unclaimed_max_items,
                         (unsigned long long)c->unclaimed_max_bytes);
                v->reason = HD_R_NOT_SERVED;
                return decide_reject(sp, it, v, false, now);
        }
        foreign_note(sp, it->name, &st, t + 1, to);
        deadline_note(&sp->deadline, t + 1);
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
        return IO_LEFT;
}

/* Is the producer's file (src, which holds doc) what a claim left in
 * handoff/: our record claimed/<id>.json holds doc, and src was last
 * written before the record was?  A copy written since is a replay
 * (rejected as duplicate_id, as before).  Its mtime is the producer's to
 * set (a power cut that undoes our unlink keeps it, not its ctime): one
 * set back makes her own copy go without a rejection, nothing more. */
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
        return json_equal(json_object_get(rec, "handoff"), (json_t *)doc);
}

/* claim_leftover(): then the producer's name goes, as the claim would
 * have done; true when it is a leftover. */
static bool drop_claim_leftover(struct spool *sp, struct item *it, const char *id)
{
        char q[300];

        if (!claim_leftover(sp, id, it->doc, &it->mtim))
                return false;
        spool_drop_source(sp, it->name, it->dev, it->ino);
        log_info("Removed %s: claimed already as %s (left by a crash)",
                 log_quote(it->name, q, sizeof(q)), id);
        return true;
}

/* Its id is known here already: the producer's file of a claim whose
 * record a crash kept beside it (the record made, this name not yet
 * removed) goes, as the claim would have done; anything else is a
 * replay, rejected as duplicate_id. */
static int claimed_again(struct spool *sp, struct item *it, const char *how, int64_t now)
{
        hd_verdict v = { .reason = HD_R_DUPLICATE_ID };

        if (drop_claim_leftover(sp, it, it->id))
                return IO_GONE;
        snprintf(v.detail, sizeof(v.detail), "handoff_id '%s' %s", it->id, how);
        return decide_reject(sp, it, &v, true, now);
}

/* it (st: more than one link) is what a move the daemon made left in
 * handoff/ beside the move's destination (a power cut), or another name
 * of a file kept already: it goes.  The places named by its id are
 * looked at only when the others are not it, the id read for it. */
static bool link_leftover(struct spool *sp, struct item *it, const struct stat *st)
{
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_t *doc = NULL;
        hd_limits lim = { .max_size = sp->cfg->max_file_size, .max_depth = HD_DEFAULT_MAX_DEPTH };
        hd_verdict v;
        size_t len;

        if (spool_drop_claim_leftover(sp, it->name))
                return true;
        if ((uintmax_t)st->st_size > sp->cfg->max_file_size ||
            read_all_sized(it->fd, sp->cfg->max_file_size, (size_t)st->st_size, &buf, &len) < 0 ||
            hd_parse(buf, len, &lim, &doc, &v) < 0)
                return false;
        return spool_drop_id_leftover(sp, it->name,
                                      json_string_value(json_object_get(doc, "handoff_id")));
}

/* Steps 1-9 for one name; on IO_CLAIMED it->doc/fd stay for delivery. */
static int decide(struct spool *sp, struct item *it, int64_t now)
{
        const struct config *c = sp->cfg;
        const char *name = it->name;
        _cleanup_free_ char *buf = NULL;
        hd_verdict v;
        size_t len;
        struct stat st;
        int r;

        if (name_ignored(name))
                return IO_IGNORED;
        if (!hd_name_safe(name)) {
                if (is_dir(sp, name, &st))
                        return decide_dir(sp, name, &st);
                return spool_reject(sp, name, NULL, HD_R_BAD_NAME,
                                    "file name is not a safe name", NULL, now) ?: IO_REJECTED;
        }
        if (foreign_fresh(sp, name, now))
                return IO_LEFT;

        r = hd_open_at(sp->fd[SD_HANDOFF], name, &it->fd, &v);
        if (r == -ENOENT)
                return IO_GONE;
        if (r == -EACCES) {
                if (is_dir(sp, name, &st))
                        return decide_dir(sp, name, &st);
                /* Its owner's mode keeps us out: no later look will do
                 * better (issue 25), so it is not retried forever. */
                v.reason = HD_R_UNREADABLE;
                snprintf(v.detail, sizeof(v.detail),
                         "the daemon's user may not read it (mode or owner)");
                return decide_reject(sp, it, &v, false, now);
        }
        if (r == -EBADMSG)
                return decide_reject(sp, it, &v, false, now);
        if (r < 0)
                return r;
        if (fstat(it->fd, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode))
                return decide_dir(sp, name, &st);
        it->dev = st.st_dev;
        it->ino = st.st_ino;
        /* Moved by this batch already (twice in its names). */
        if (spool_leaving(sp, name, &st))
                return IO_GONE;
        /* No lock on the file: two daemons may decide it at once.  Both
         * reach the same verdict; of two rejections one finds it gone,
         * of two claims one finds the id locked, then claimed (the
         * record holds it: claim_leftover()). */
        r = read_fd_stat(it->fd, &st, name, c->max_file_size, &buf, &len, &v);
        /* Two links (read_fd_stat() tells, not hd_open_at()): the one a
         * claim or a move left here beside its next state, that a power
         * cut kept.  Any other second link is rejected as hardlink. */
        if (r == -EBADMSG && v.reason == HD_R_HARDLINK && link_leftover(sp, it, &st))
                return IO_GONE;
        if (r == -ENOENT)
                return IO_GONE;
        if (r == -EBADMSG)
                return decide_reject(sp, it, &v, false, now);
        if (r < 0)
                return r;
        it->mtim = st.st_mtim;
        hd_limits lim = { .max_size = c->max_file_size, .max_depth = HD_DEFAULT_MAX_DEPTH };
        struct canon_src src;
        r = canon_src_parse(buf, len, &lim, &it->doc, &src, &v);
        if (r == -EBADMSG) {
                int64_t mono = mono_usec();
                if (now - (int64_t)st.st_mtim.tv_sec * 1000000LL - st.st_mtim.tv_nsec / 1000 < SETTLE_USEC &&
                    mono - seen_first(sp, name, st.st_ino, mono) < SETTLE_USEC) {
                        sp->st.deferred++;
                        return IO_DEFERRED;
                }
                return decide_reject(sp, it, &v, false, now);
        }
        if (r < 0)
                return r;

        const char *to = json_string_value(json_object_get(it->doc, "to_agent"));
        hd_policy pol = { .max_clock_skew_s = c->max_clock_skew, .max_window_s = c->max_window };
        hd_payload_opts po = { .roles = (const char *const *)c->roles };
        it->agent = spool_agent(sp, to);
        /* For a remote agent: checked here as for our own (never an open
         * relay), then handed to the relay. */
        const char *remote = !it->agent && sp->relay.ctx ? config_remote(c, to) : NULL;
        /* or sent to an A2A server (a2a_out.c) */
        const struct spool_relay *out = remote ? &sp->relay : NULL;
        if (!it->agent && !remote && sp->a2a.ctx && config_remote_a2a(c, to)) {
                remote = to;
                out = &sp->a2a;
        }
        /* For an agent not served here the MAC decides between left and
         * rejected: not before it. */
        r = (it->agent || remote) && stale_unsigned(it->doc, &pol, now, &v) ? -EBADMSG :
            canon_src_verify(it->doc, &src, config_key_lookup, (void *)c, &pol, &po, now, &v);
        if (r == -EBADMSG) {
                /* A claim's leftover that no longer verifies (expired
                 * since, or its key gone) goes as after its claim:
                 * decide_reject() looks. */
                if (it->agent || remote)
                        return decide_reject(sp, it, &v, false, now);
                /* Not ours: another daemon may hold the sender's key;
                 * unless a document that verified holds its id already:
                 * then no daemon will ever claim it (issue 24.2). */
                const char *hid = json_string_value(json_object_get(it->doc, "handoff_id"));
                if ((v.reason == HD_R_UNKNOWN_KEY || v.reason == HD_R_BAD_MAC) &&
                    hid && hd_id_valid(hid) && spool_id_seen(sp, hid)) {
                        size_t l = strlen(v.detail);
                        snprintf(v.detail + l, sizeof(v.detail) - l,
                                 "; handoff_id is held here by a handoff that verified");
                        return decide_reject(sp, it, &v, false, now);
                }
                if (v.reason == HD_R_UNKNOWN_KEY || v.reason == HD_R_BAD_MAC)
                        return decide_left(sp, it, to, v.reason, &v, now);
                if (v.reason == HD_R_EXPIRED && to && hd_agent_valid(to)) {
                        const char *oos = unserved_why(sp, to);
                        char was[sizeof(v.detail)];
                        snprintf(was, sizeof(was), "%s", v.detail);
                        /* truncation only shortens the quoted detail */
                        if (snprintf(v.detail, sizeof(v.detail),
                                     "no daemon claimed it for agent %s before it expired "
                                     "(%s%.170s)", to, oos ? "out of service here: " : "",
                                     oos ? oos : was) < 0)
                                v.detail[0] = '\0';
                        v.reason = HD_R_EXPIRED_UNCLAIMED;
                        return decide_reject(sp, it, &v, true, now);
                }
                return decide_reject(sp, it, &v, false, now);
        }
        if (r < 0)
                return r;
        it->id = json_string_value(json_object_get(it->doc, "handoff_id"));
        if (!it->agent && !remote)
                return decide_left(sp, it, to, HD_OK, &v, now);

        /* From here to the publish, recovery in another daemon
         * keeps off this id. */
        r = lock_try_claim(sp->lock_fd, lock_off_id(it->id));
        if (r == -EAGAIN)
                return IO_BUSY;
        if (r < 0)
                return r;
        it->lock_id = lock_off_id(it->id);
        /* Rejected since we opened it, by a daemon that held the lock
         * (decide_reject(); an unauthenticated rejection leaves no trace
         * of its id): no longer this file in handoff/.  A second link is
         * a move not finished: the next look sees to it. */
        struct stat cur;
        if (fstatat(sp->fd[SD_HANDOFF], name, &cur, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? IO_GONE : -errno;
        if (cur.st_dev != it->dev || cur.st_ino != it->ino)
                return IO_GONE;
        if (cur.st_nlink > 1)
                return IO_BUSY;
        const char *ptype = json_string_value(json_object_get(it->doc, "payload_type"));
        /* Claimed already?  For a plain bootstrap the record's link tells
         * (a link never replaces: deliver() takes its EEXIST as this), and
         * nothing an agent sees is made before it, so the look in
         * claimed/ is saved (issue 25: one system call per item).  A
         * profile copy or a Baton patch is made before the record, and
         * the relay has no record here: for them it is looked at now. */
        bool by_link = !remote && delivery_plain(it->agent) && !payload_type_session_store(ptype);
        if (by_link ? spool_id_remembered(sp, it->id) : spool_id_seen(sp, it->id))
                return claimed_again(sp, it, "was seen before", now);
        if (remote) {
                struct spool_ino was = { .dev = it->dev, .ino = it->ino };
                r = out->take(out->ctx, name, &was, it->doc, now);
                if (r == -EEXIST) {
                        v.reason = HD_R_DUPLICATE_ID;
                        snprintf(v.detail, sizeof(v.detail), "handoff_id '%s' is already in outbox/", it->id);
                        return decide_reject(sp, it, &v, true, now);
                }
                return r == -ENOENT ? IO_GONE : r < 0 ? r : IO_OUTBOX;
        }
        /* An agent's inbox is bounded (quota.c): refused, not remembered,
         * so the sender may send it again once there is room.  Counted as
         * waiting now, so every daemon's next claim sees it. */
        const char *from = json_string_value(json_object_get(it->doc, "from_agent"));
        r = quota_take(sp, it->agent->cfg->name, it->id, from, &v, &it->counted);
        if (r == -EBADMSG)
                return decide_reject(sp, it, &v, false, now);
        if (r == -EAGAIN)
                return IO_BUSY;
        if (r < 0)
                return r;
        if (payload_type_session_store(ptype)) {
                r = hd_baton_check_handoff(sp->fd[SD_BATON], it->doc, &v);
                if (r < 0)
                        uncount(sp, it);
                if (r == -EBADMSG)
                        return decide_reject(sp, it, &v, true, now);
                if (r < 0)
                        return r;
        }

        /* Verified and ours: the claim is the record that delivery
         * makes (delivery.c); until then the item is the producer's
         * file in handoff/, under the lock of its id. */
        return IO_CLAIMED;
}

/* Step 1's hidden bootstraps of a burst, written unsynced, synced
 * together (files.c fsync_many_at(): they share the device's flushes)
 * before any record is made: as durable, at the same point, as one
 * fsync each.  One that does not sync is removed again, as if its write
 * had failed: it is not claimed, a later look delivers it. */
static int sync_written(struct spool *sp, struct item *items, size_t n)
{
        _cleanup_free_ int *dirfds = NULL, *rets = NULL;
        _cleanup_free_ const char **names = NULL;
        _cleanup_free_ char (*pnames)[NAME_MAX + 1] = NULL;
        _cleanup_free_ size_t *idx = NULL;
        size_t k = 0, cap = n + sp->n_agents;
        int errors = 0;

        dirfds = calloc(cap, sizeof(*dirfds));
        rets = calloc(cap, sizeof(*rets));
        names = calloc(cap, sizeof(*names));
        pnames = calloc(cap, sizeof(*pnames));
        idx = calloc(cap, sizeof(*idx));
        if (!dirfds || !rets || !names || !pnames || !idx)
                return -ENOMEM;
        /* Their directories' new names in the same round: all were made
         * before any of these syncs starts. */
        for (size_t i = 0; i < sp->n_agents; i++)
                if (sp->agents[i].dirty) {
                        sp->agents[i].dirty = false;
                        dirfds[k] = sp->agents[i].handoffs_fd;
                        names[k] = NULL;
                        idx[k++] = SIZE_MAX;
                }
        for (size_t i = 0; i < n; i++) {
                if (items[i].outcome != IO_CLAIMED)
                        continue;
                if (delivery_pending_name(items[i].id, pnames[k], sizeof(pnames[k])) < 0)
                        return -EINVAL;         /* delivery_write() made it */
                dirfds[k] = items[i].agent->handoffs_fd;
                names[k] = pnames[k];
                idx[k++] = i;
        }
        if (fsync_many_at(dirfds, names, k, rets) == 0)
                return 0;
        for (size_t j = 0; j < k; j++) {
                if (rets[j] == 0)
                        continue;
                /* A directory: nothing of this burst may be recorded. */
                if (idx[j] == SIZE_MAX)
                        return rets[j];
                struct item *it = &items[idx[j]];
                (void) unlinkat(dirfds[j], names[j], 0);
                uncount(sp, it);
                it->outcome = rets[j];
                spool_error(sp, rets[j], "Cannot deliver %s to %s", it->id, it->agent->cfg->name);
                errors++;
        }
        return errors;
}

/* Its document freed; its id byte stays locked until the batch ends
 * (intake_batch() releases them all at once). */
static void item_release(struct spool *sp, struct item *it)
{
        (void)sp;
        json_decref(TAKE_PTR(it->doc));
        it->id = NULL;
}

/* The item will not be claimed this time: its hidden bootstrap goes, and
 * it no longer counts as waiting. */
static void drop_pending(struct spool *sp, struct item *it)
{
        char pname[NAME_MAX + 1];

        uncount(sp, it);
        if (delivery_pending_name(it->id, pname, sizeof(pname)) == 0 &&
            unlinkat(it->agent->handoffs_fd, pname, 0) == 0)
                it->agent->dirty = true;
}

/* A step of an item's delivery failed (q < 0): before its record it is
 * not claimed, and stays in handoff/ for a later look (its hidden
 * bootstrap removed); after, it is claimed and the sweep publishes it. */
static int deliver_failed(struct spool *sp, struct item *it, int step, int q, int64_t now)
{
        if (step < 3)
                drop_pending(sp, it);
        if (q == -EAGAIN) {
                /* Another daemon holds the baton lock: not an error; a
                 * later look delivers it. */
                log_debug("Delivery of %s waits for the baton lock", it->id);
                it->outcome = IO_BUSY;
                return 0;
        }
        it->outcome = step < 3 ? q : IO_CLAIMED;
        spool_error(sp, q, "Cannot deliver %s to %s", it->id, it->agent->cfg->name);
        if (step == 3)
                delivery_failed(sp, it->id, now);
        return 1;
}

/* Steps 1-3 of delivery.c for the items of a batch that verified
 * (IO_CLAIMED so far means: to be claimed), each step for the whole
 * batch, then one sync per directory; with fsync, a burst's bootstraps
 * are synced together, a lone one at once.  Returns the number of
 * errors; the items' outcomes are final; their documents and locks are
 * released. */
static int deliver(struct spool *sp, struct item *items, size_t n, int64_t now)
{
        int errors = 0, r = 0;
        size_t n_claimed = 0;

        for (size_t i = 0; i < n; i++)
                n_claimed += items[i].outcome == IO_CLAIMED;
        bool sync_later = sp->cfg->fsync && n_claimed > 1;
        for (int step = 1; step <= 3; step++) {
                for (size_t i = 0; i < n; i++) {
                        struct item *it = &items[i];
                        int q;
                        if (it->outcome != IO_CLAIMED)
                                continue;
                        if (r < 0) {
                                /* A sync of the burst failed, and was
                                 * reported once. */
                                errors += deliver_failed(sp, it, step, r, now);
                                continue;
                        }
                        if (step == 1)
                                q = delivery_write(sp, it->agent, it->doc, now,
                                                   DELIVERY_NEW_CLAIM |
                                                   (sync_later ? DELIVERY_SYNC_LATER : 0));
                        else if (step == 2)
                                q = delivery_record(sp, it->agent, it->id, false);
                        else
                                q = delivery_publish(sp, it->agent, it->id);
                        if (step <= 2 && q == -EEXIST) {
                                /* Claimed already (decide() left the
                                 * look to here): at step 1 the .pending
                                 * there is that claim's, at step 2 ours. */
                                if (step == 2)
                                        drop_pending(sp, it);
                                else
                                        uncount(sp, it);
                                q = claimed_again(sp, it, "is already claimed", now);
                                it->outcome = q;
                                errors += q < 0;
                        } else if (q < 0) {
                                errors += deliver_failed(sp, it, step, q, now);
                        } else if (step == 2) {
                                spool_drop_source(sp, it->name, it->dev, it->ino);
                                sp->st.claimed++;
                        } else if (step == 3) {
                                sp->deliver_backoff_usec = 0;
                                log_decision(LOG_INFO, it->id, it->agent->cfg->name, "claimed",
                                             NULL, "Claimed %s for %s", it->id,
                                             it->agent->cfg->name);
                        }
                }
                if (step == 1 && sync_later) {
                        int e = sync_written(sp, items, n);
                        if (e < 0) {
                                /* Not all synced: none may be recorded. */
                                spool_error(sp, e, "Cannot fsync the agents' handoffs/");
                                r = e;
                        } else {
                                errors += e;
                        }
                }
                /* Before the records, the hidden bootstraps are on disk;
                 * before the publish, the records (and the producers'
                 * names leave handoff/ after them). */
                if (r == 0 && (r = spool_flush(sp)) < 0)
                        spool_error(sp, r, "Cannot fsync the spool or the agents' handoffs/");
        }
        /* What the failed sync left dirty: tried again, not reported again. */
        int q = spool_flush(sp);
        if (q < 0 && r == 0)
                spool_error(sp, q, "Cannot fsync the spool");
        for (size_t i = 0; i < n; i++)
                item_release(sp, &items[i]);
        return errors;
}

int intake_batch(struct spool *sp, char *const *names, size_t n,
                 int64_t now, int *outcomes)
{
        struct item *items;
        int64_t t0 = mono_usec();
        int errors = 0, r;

        items = calloc(n ? n : 1, sizeof(*items));
        if (!items) {
                /* Every name a system error, so the caller's routing of
                 * outcomes (drain(): the retry timer, with its back-off)
                 * holds: nothing was looked at, each stays in handoff/. */
                spool_error(sp, -ENOMEM, "Cannot decide %zu name(s) in handoff/", n);
                for (size_t i = 0; outcomes && i < n; i++)
                        outcomes[i] = -ENOMEM;
                return (int)n;
        }
        for (size_t i = 0; i < n; i++) {
                items[i].name = names[i];
                items[i].fd = -1;
                /* Never hold the loop long: the rest waits for a later turn. */
                if (i > 0 && mono_usec() - t0 > INTAKE_BATCH_MAX_USEC) {
                        items[i].outcome = IO_SKIPPED;
                        if (outcomes)
                                outcomes[i] = IO_SKIPPED;
                        continue;
                }
                r = items[i].outcome = decide(sp, &items[i], now);
                /* Only a claimed item's document is needed (for delivery):
                 * a batch of big rejected ones must not add up. */
                if (r != IO_CLAIMED) {
                        json_decref(TAKE_PTR(items[i].doc));
                        items[i].id = NULL;
                }
                if (items[i].fd >= 0)
                        close(TAKE_FD(items[i].fd));
                if (r != IO_DEFERRED && r != IO_BUSY)
                        json_object_del(sp->seen, names[i]);
                if (r < 0) {
                        char q[300];
                        spool_error(sp, r, "Cannot process %s",
                                    log_quote(names[i], q, sizeof(q)));
                        errors++;
                }
                if (outcomes)
                        outcomes[i] = r;
                /* Without fsync nothing is gained by holding a burst's
                 * claims for their delivery together (the syncs are what
                 * a batch shares): each is delivered at once, and its
                 * document freed, so a burst holds one document. */
                if (r == IO_CLAIMED && !sp->cfg->fsync) {
                        errors += deliver(sp, &items[i], 1, now);
                        if (outcomes)
                                outcomes[i] = items[i].outcome;
                }
        }
        if (sp->cfg->fsync) {
                errors += deliver(sp, items, n, now);
                for (size_t i = 0; outcomes && i < n; i++)
                        outcomes[i] = items[i].outcome;
        } else if (json_object_size(sp->leaving) > 0) {
                /* Rejections linked out (spool_reject_from(), with the
                 * relay) leave handoff/ now; with fsync deliver() did. */
                (void) spool_flush(sp);
        }
        bool locked = false;
        for (size_t i = 0; i < n; i++) {
                locked |= items[i].lock_id != 0;
                item_release(sp, &items[i]);
        }
        /* Only this batch holds id bytes now (the sweep's checks release
         * theirs before they return): all of them go in one call. */
        if (locked)
                lock_release_ids(sp->lock_fd);
        free(items);
        return errors;
}

void intake_foreign_due(struct spool *sp, int64_t now)
{
        const char *k;
        void *tmp;
        json_t *v;

        json_t *due = json_array();
        json_object_foreach_safe(sp->foreign, tmp, k, v) {
                int64_t t = json_integer_value(json_array_get(v, 0));
                if (t <= now) {
                        json_array_append_new(due, json_string_nocheck(k));
                        foreign_drop(sp, k);
                } else {
                        deadline_note(&sp->deadline, t);
                }
        }
        if (json_array_size(due) > 0) {
                size_t n = json_array_size(due);
                char **names = calloc(n, sizeof(char *));
                int *outcomes = calloc(n, sizeof(int));
                if (names && outcomes) {
                        for (size_t i = 0; i < n; i++)
                                names[i] = (char *)json_string_value(json_array_get(due, i));
                        intake_batch(sp, names, n, now, outcomes);
                        /* Past the batch's time: at the next deadline. */
                        for (size_t i = 0; i < n; i++)
                                if (outcomes[i] == IO_SKIPPED)
                                        foreign_put(sp, names[i],
                                                json_pack("[I, I, I]", (json_int_t)now, (json_int_t)-1,
                                                          (json_int_t)-1));
                        if (json_object_size(sp->foreign))
                                deadline_note(&sp->deadline, now + 1000);
                }
                free(names);
                free(outcomes);
        }
        json_decref(due);
}
