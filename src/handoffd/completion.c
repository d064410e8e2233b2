/* Agents' results (handoffd(8), RESULTS): the word of
 * the agent that consumed a handoff on what came of it, taken in
 * (libhandoff's result.c owns the document, this file what the daemon
 * does with it).
 *
 * The agent writes its signed result (hd_complete()) as .result.<id> into
 * its own handoffs/: the one directory it may write that the daemon
 * already watches, whose permissions already say who the agent is (they
 * are what a consume trusts).  archive/ stays the daemon's alone: a
 * result reaches it as a file the daemon wrote, archive/NAME.result
 * beside the item, after the daemon read it with the spool's limits,
 * verified it as a document from that agent (its own key where it has
 * one, hd_result_check()) and found that agent's consumed item of that
 * id.  The first result stands.  A refusal is .refused.<id> in the same
 * directory (the reason and a detail), so that the agent learns why.
 *
 * A result is looked at when it arrives (inotify), when its item is
 * archived (one written between the consume and the archive), and by the
 * sweep (inotify is a hint).  Every look holds the lock of the id, as the
 * archive does.  Durable as the outcome: NAME.result synced with
 * archive/ before the agent's file goes, so a crash between leaves the
 * agent's file, which the next look finds recorded already.
 *
 * Finding the item costs no listing of archive/ while it is claimed or
 * among the last RESULT_RECENT_MAX archived as consumed; else archive/ is
 * listed, at most once a second for all the results that wait (an agent
 * that signs results for ids never archived here must not make each one
 * cost a listing: 17 ms at 10,000 items), and a scan looks at
 * RESULT_SCAN_MAX results at most. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "store_doc.h"
#include "agents.h"
#include "delivery.h"
#include "files.h"
#include "layout.h"
#include "lock.h"
#include "log.h"
#include "parts.h"
#include "completion.h"
#include "verified.h"

#define RESULT_RETRY_USEC 1000000LL
#define RESULT_RECENT_MAX 4096          /* items archived as consumed, remembered */
#define RESULT_LIST_EVERY_USEC 1000000LL /* archive/ listed for results at most so often */
#define RESULT_SCAN_MAX 64              /* results looked at by one scan */

static const char *const refusal_names[_RR_MAX] = {
        [RR_NOT_CONSUMED] = "not_consumed",
        [RR_ALREADY_COMPLETED] = "already_completed",
};

const char *completion_refusal_name(enum completion_refusal r)
{
        return (unsigned)r < _RR_MAX ? refusal_names[r] : NULL;
}

/* Tell the agent why (.refused.<id>, written before its result goes:
 * whoever waits for the result to go finds the refusal there), and
 * remove its result. */
static int refuse(struct spool *sp, struct agent_rt *a, const char *id, const char *rname,
                  const char *reason, const char *detail, int64_t now)
{
        _cleanup_free_ char *buf = NULL;
        char fname[NAME_MAX + 1], q[300];
        size_t len;
        int r;

        r = store_refusal_dump(id, reason, detail, now, &buf, &len);
        if (r == 0)
                r = layout_prefixed(LAYOUT_REFUSED, id, fname, sizeof(fname));
        if (r == 0)
                r = store_boot_note(sp, a, fname, buf, len);
        if (r < 0)
                return r;
        (void) store_boot_drop(sp, a, rname);
        sp->st.results_refused++;
        log_decision(LOG_WARNING, id, a->cfg->name, "result_refused", reason,
                     "Refused the result of %s from %s: %s: %s", id, a->cfg->name, reason,
                     log_quote(detail, q, sizeof(q)));
        return 0;
}

/* An item archived as consumed: found again without a listing while it
 * is among the last RESULT_RECENT_MAX (most results come soon after
 * their consume). */
static void recent_note(struct parts *p, const char *id, const char *aname)
{
        struct result_recent *e;

        dict_del(&p->results->recent, id);
        e = dict_put(&p->results->recent, id, NULL);
        if (e && xsnprintf(e->archive, sizeof(e->archive), "%s", aname) < 0)
                dict_remove(&p->results->recent, e);
        /* in the order of adding: the first is the oldest */
        while (dict_count(&p->results->recent) > RESULT_RECENT_MAX)
                dict_remove(&p->results->recent, dict_first(&p->results->recent));
}

/* A result waiting for the one listing of archive/ (archived_find()):
 * its agent, and the newest archive of its id found. */
struct result_wait {
        size_t agent;           /* index in sp->agents */
        bool found;
        int64_t at;             /* its archived_at, usec */
        char name[NAME_MAX + 1];
};

/* The newest item in archive/ of each id of want (id -> struct
 * result_wait), by one listing.
 * An archive name ends with "-ID.json" (or "-ID~N.json"): each '-' of a
 * name's stem is a place its id may begin, looked up in want, so one
 * listing serves any number of results, each name costing its length. */
static int archived_find(struct spool *sp, struct results *rs, struct dict *want)
{
        struct dirent *de;
        DIR *d;

        rs->listed_at = mono_usec();
        d = opendir_at(sp->fd[SD_ARCHIVE]);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char stem[NAME_MAX + 1], sname[NAME_MAX + 16];

                if (de->d_name[0] == '.' || layout_strip(de->d_name, ".json", stem, sizeof(stem)) < 0)
                        continue;
                stem[layout_base_len(stem)] = '\0';
                for (char *p = strchr(stem, '-'); p; p = strchr(p + 1, '-')) {
                        const char *id = p + 1;
                        struct result_wait *cur = dict_get(want, id);
                        struct store_outcome side;

                        if (!cur || layout_suffixed(de->d_name, LAYOUT_OUTCOME, sname, sizeof(sname)) < 0 ||
                            store_outcome_load(sp->fd[SD_ARCHIVE], sname, &side) < 0)
                                continue;
                        int64_t t = side.archived_usec;
                        bool newer = !strcmp(side.id, id) && (!cur->found || t > cur->at);
                        if (newer && xsnprintf(cur->name, sizeof(cur->name), "%s", de->d_name) >= 0) {
                                cur->found = true;
                                cur->at = t;
                        }
                }
        }
        closedir(d);
        return 0;
}

/* What a look at a result found, and what it needs to act on it. */
enum result_state {
        RS_ABSENT,      /* no result file: nothing to do */
        RS_REFUSED,     /* not one to record (why, detail): refused */
        RS_WAITS,       /* its item is consumed but not archived yet: looked at again */
        RS_UNLISTED,    /* archived, not lately: only a listing of archive/ tells where */
        RS_RECORDED,    /* recorded already, the same: a crash kept the agent's file */
        RS_NEW,         /* to be recorded beside its item in archive/ */
        _RS_MAX
};

struct result_look {
        struct agent_rt *a;
        const char *id;
        char rname[NAME_MAX + 1];       /* the agent's .result.<id> */
        char xname[NAME_MAX + 16];      /* archive/NAME.result */
        json_t *doc;                    /* the result, checked */
        const char *why;                /* RS_REFUSED: the reason's name */
        char detail[HD_DETAIL_MAX + 64];
        char at[64];                    /* RS_RECORDED: when it was recorded */
};

/* id is still in claimed/: refused when it is not a's or not taken yet;
 * else (a consume in progress, an archive not done) it waits.  *ret
 * untouched (and 0) when id is not in claimed/. */
static int while_claimed(struct parts *p, struct result_look *l, enum result_state *ret)
{
        struct spool *sp = p->sp;
        char cname[NAME_MAX + 1], bname[NAME_MAX + 1], pname[NAME_MAX + 1];
        _cleanup_close_ int fd = -1;
        _cleanup_json_ json_t *rec = NULL;
        _cleanup_handoff_ struct handoff h = { 0 };
        const char *agent = l->a->cfg->name;
        int64_t acc;
        struct stat st;
        int r;

        if (xsnprintf(cname, sizeof(cname), "%s.json", l->id) < 0)
                return -ENAMETOOLONG;
        fd = openat(sp->fd[SD_CLAIMED], cname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        /* An earlier version's item (no record): its archive decides. */
        if (!verified_lookup(&p->verified, l->id, &st, &h, &acc) &&
            delivery_record_read(sp, fd, &st, &rec) == 0)
                (void) handoff_from_record(rec, &h);
        l->why = completion_refusal_name(RR_NOT_CONSUMED);
        *ret = RS_REFUSED;
        if (h.to[0] && strcmp(h.to, agent)) {
                snprintf(l->detail, sizeof(l->detail), "%s was delivered to %s, not to %s",
                         l->id, h.to, agent);
                return 0;
        }
        r = hd_bootstrap_name(l->id, bname, sizeof(bname));
        if (r == 0)
                r = delivery_pending_name(l->id, pname, sizeof(pname));
        if (r < 0)
                return r;
        if (spool_exists_at(l->a->handoffs_fd, bname) || spool_exists_at(l->a->handoffs_fd, pname)) {
                snprintf(l->detail, sizeof(l->detail), "%s is delivered and not taken yet: "
                         "consume it first", l->id);
                return 0;
        }
        *ret = RS_WAITS;
        return 0;
}

/* Why the item archived as side is not one a's result may be given for,
 * into detail; NULL when it is. */
static const char *not_completable(const struct store_outcome *side, const char *agent,
                                   char *detail, size_t n)
{
        const char *outcome = side->outcome, *to = side->to, *id = side->id;

        if (strcmp(outcome, "relayed") && *to && strcmp(to, agent))
                snprintf(detail, n, "%s was for %.64s, not for %s", id, to, agent);
        else if (!strcmp(outcome, "relayed"))
                snprintf(detail, n, "%s was relayed to host %.100s: its agent reports there", id,
                         side->relayed_to[0] ? side->relayed_to : "?");
        else if (strcmp(outcome, "consumed"))
                snprintf(detail, n, "%s was not consumed: archived as %s", id, outcome);
        else
                return NULL;
        return detail;
}

/* Refused for why; l->detail says more. */
static enum result_state refused(struct result_look *l, const char *why)
{
        l->why = why;
        return RS_REFUSED;
}

/* The agent's result: read, parsed and checked as a's for id. */
static int look_file(struct spool *sp, struct result_look *l, enum result_state *ret)
{
        hd_limits lim = { .max_size = HD_RESULT_MAX_SIZE, .max_depth = HD_DEFAULT_MAX_DEPTH };
        _cleanup_free_ char *buf = NULL;
        size_t len;
        hd_verdict v;
        int r;

        r = hd_result_name(l->id, l->rname, sizeof(l->rname));
        if (r < 0)
                return r;
        r = hd_read_at(l->a->handoffs_fd, l->rname, HD_RESULT_MAX_SIZE, &buf, &len, &v);
        if (r == -ENOENT) {
                *ret = RS_ABSENT;
                return 0;
        }
        if (r == -EACCES) {
                /* its owner's mode: refused once, not an error at every look */
                snprintf(l->detail, sizeof(l->detail), "the daemon may not read it: it needs "
                         "others' read bit (hd_complete() writes it 0644)");
                *ret = refused(l, hd_reason_name(HD_R_UNREADABLE));
                return 0;
        }
        if (r == 0)
                r = hd_parse(buf, len, &lim, &l->doc, &v);
        if (r == 0)
                r = hd_result_check(l->doc, l->id, l->a->cfg->name, config_key_lookup, sp->cfg, &v);
        if (r == -EBADMSG) {
                snprintf(l->detail, sizeof(l->detail), "%s", v.detail);
                *ret = refused(l, hd_reason_name(v.reason));
                return 0;
        }
        if (r < 0)
                return r;
        *ret = RS_NEW;
        return 0;
}

/* Its item, archived as aname and consumed by a (hook: the archive
 * says so already), and no other result recorded for it. */
static int look_archived(struct spool *sp, struct result_look *l, const char *aname, bool hook,
                         enum result_state *ret)
{
        const char *no = completion_refusal_name(RR_NOT_CONSUMED);
        _cleanup_json_ json_t *had = NULL;
        struct store_outcome side;
        char sname[NAME_MAX + 16], at[HD_TIME_MAX];
        int r;

        if (!*aname) {
                snprintf(l->detail, sizeof(l->detail), "no item of %s is archived here "
                         "(never delivered here, or pruned)", l->id);
                *ret = refused(l, no);
                return 0;
        }
        if (!hook) {
                /* whose it was and how it ended: the daemon's .outcome */
                r = layout_suffixed(aname, LAYOUT_OUTCOME, sname, sizeof(sname));
                if (r == 0)
                        r = store_outcome_load(sp->fd[SD_ARCHIVE], sname, &side);
                if (r == -ENOENT || r == -EBADMSG) {
                        snprintf(l->detail, sizeof(l->detail), "no item of %s is archived here "
                                 "(pruned)", l->id);
                        *ret = refused(l, no);
                        return 0;
                }
                if (r < 0)
                        return r;
                if (not_completable(&side, l->a->cfg->name, l->detail, sizeof(l->detail))) {
                        *ret = refused(l, no);
                        return 0;
                }
        }
        r = layout_suffixed(aname, LAYOUT_RESULT, l->xname, sizeof(l->xname));
        if (r < 0)
                return r;
        r = store_result_load(sp->fd[SD_ARCHIVE], l->xname, HD_RESULT_MAX_SIZE, &had, at, sizeof(at));
        if (r == 0 && json_equal(had, l->doc)) {
                snprintf(l->at, sizeof(l->at), "%s", at);
                *ret = RS_RECORDED;
                return 0;
        }
        if (r == 0) {
                snprintf(l->detail, sizeof(l->detail), "%s has a result already, recorded at "
                         "%s: the first stands", l->id, at);
                *ret = refused(l, completion_refusal_name(RR_ALREADY_COMPLETED));
                return 0;
        }
        if (r != -ENOENT && r != -EBADMSG)
                return r;
        *ret = RS_NEW;
        return 0;
}

/* The state of a's result for id.  aname is the item's archive name:
 * the one archive() just made (hook), the one a listing found ("" when
 * it found none), or NULL to look in claimed/ and among the recent
 * archives. */
static int result_state(struct parts *p, struct result_look *l, const char *aname, bool hook,
                        enum result_state *ret)
{
        int r = look_file(p->sp, l, ret);

        if (r < 0 || *ret != RS_NEW)
                return r;
        if (!aname) {
                r = while_claimed(p, l, ret);
                if (r < 0 || *ret != RS_NEW)
                        return r;
                const struct result_recent *e = dict_get(&p->results->recent, l->id);
                if (!e) {
                        *ret = RS_UNLISTED;
                        return 0;
                }
                aname = e->archive;
        }
        return look_archived(p->sp, l, aname, hook, ret);
}

typedef int result_action(struct parts *p, struct result_look *l, int64_t now);

static int act_none(struct parts *p, struct result_look *l, int64_t now)
{
        return 0;
}

static int act_refuse(struct parts *p, struct result_look *l, int64_t now)
{
        return refuse(p->sp, l->a, l->id, l->rname, l->why, l->detail, now);
}

/* At the sweep's end, and within RESULT_RETRY_USEC. */
static int act_wait(struct parts *p, struct result_look *l, int64_t now)
{
        p->results->due = true;
        deadline_note(&p->deadline, now + RESULT_RETRY_USEC);
        return 0;
}

static int act_unlisted(struct parts *p, struct result_look *l, int64_t now)
{
        return -EAGAIN;
}

/* Recorded already, and a crash kept the agent's file: done, but for
 * the origin's receipt, which the crash may have cut off (the relay
 * writes it once). */
static int act_drop(struct parts *p, struct result_look *l, int64_t now)
{
        struct spool *sp = p->sp;
        const char *status = json_string_value(json_object_get(l->doc, "status"));
        _cleanup_free_ char *out = NULL;
        size_t len;
        int64_t t;

        if (sp->relay.result && l->at[0] && hd_time_parse(l->at, &t) == 0 &&
            store_result_dump(l->id, l->a->cfg->name, status, t, l->doc, &out, &len) == 0)
                sp->relay.result(sp->relay.ctx, l->id, status, out, len, now);
        (void) store_boot_drop(sp, l->a, l->rname);
        return 0;
}

/* archive/NAME.result, synced with archive/ (and whatever the archive
 * moved) before the agent's file goes. */
static int act_record(struct parts *p, struct result_look *l, int64_t now)
{
        struct spool *sp = p->sp;
        const char *agent = l->a->cfg->name;
        const char *status = json_string_value(json_object_get(l->doc, "status"));
        _cleanup_free_ char *out = NULL;
        char fname[NAME_MAX + 1];
        size_t len;
        int r;

        r = store_result_dump(l->id, agent, status, now, l->doc, &out, &len);
        if (r == 0)
                r = store_side_write(sp, SD_ARCHIVE, l->xname, out, len);
        /* An item that came through the relay: its origin's receipt,
         * synced with the file. */
        if (r == 0 && sp->relay.result)
                sp->relay.result(sp->relay.ctx, l->id, status, out, len, now);
        if (r == 0)
                r = store_flush(sp);
        if (r < 0)
                return r;
        (void) store_boot_drop(sp, l->a, l->rname);
        if (layout_prefixed(LAYOUT_REFUSED, l->id, fname, sizeof(fname)) == 0)
                (void) store_boot_drop(sp, l->a, fname);        /* an earlier try's */
        if (!strcmp(status, "failed"))
                sp->st.failed++;
        else if (strcmp(status, "input_required"))      /* a question: not an end */
                sp->st.completed++;
        log_decision(LOG_INFO, l->id, agent, status, NULL, "Result of %s from %s: %s", l->id,
                     agent, status);
        return 1;
}

/* state -> action: the one place that says what happens to a result. */
static result_action *const result_actions[_RS_MAX] = {
        [RS_ABSENT]   = act_none,
        [RS_REFUSED]  = act_refuse,     /* .refused.<id> says why; the result goes */
        [RS_WAITS]    = act_wait,
        [RS_UNLISTED] = act_unlisted,   /* the caller lists archive/ */
        [RS_RECORDED] = act_drop,
        [RS_NEW]      = act_record,
};

/* The result .result.<id> of a, the lock of id held (result_state() for
 * aname and hook).  0 (nothing there, refused, or waits), 1 recorded,
 * -EAGAIN when only a listing of archive/ can tell, -errno. */
static int take_locked(struct parts *p, struct agent_rt *a, const char *id, const char *aname,
                       bool hook, int64_t now)
{
        struct result_look l = { .a = a, .id = id };
        enum result_state s;
        int r;

        r = result_state(p, &l, aname, hook, &s);
        if (r == 0)
                r = result_actions[s](p, &l, now);
        json_decref(l.doc);
        return r;
}

/* The name a listing found for an id (archived_find()), or "". */
static const char *found_name(const struct result_wait *w)
{
        return w && w->found ? w->name : "";
}

int completion_archived_locked(struct parts *p, struct agent_rt *a, const char *id,
                           const char *aname, int64_t now)
{
        char rname[NAME_MAX + 1];

        recent_note(p, id, aname);
        /* One look per archive: most items have no result waiting. */
        if (hd_result_name(id, rname, sizeof(rname)) < 0 || !spool_exists_at(a->handoffs_fd, rname))
                return 0;
        return take_locked(p, a, id, aname, true, now);
}

/* May archive/ be listed for results now?  At most once a second: an
 * agent that writes results for ids never archived costs a listing a
 * second, however many it writes. */
static bool may_list(const struct parts *p)
{
        return p->results->listed_at == 0 ||
               mono_usec() - p->results->listed_at >= RESULT_LIST_EVERY_USEC;
}

/* A result that waits: the sweep's end looks again, in a second, or as
 * soon as a listing is allowed again (no sooner: the look would be lost). */
static void result_later(struct parts *p, int64_t now)
{
        int64_t wait = RESULT_RETRY_USEC;

        if (!may_list(p))
                wait = p->results->listed_at + RESULT_LIST_EVERY_USEC - mono_usec();
        p->results->due = true;
        deadline_note(&p->deadline, now + (wait > 0 ? wait : 0));
}

/* Look at the result of id in a's handoffs/ now.  If its item is consumed
 * but still claimed, the result waits for the archive, which takes it
 * (completion_archived_locked()).  The bootstrap's removal is the archive's
 * event, and the sweep at a deadline is its look. lifecycle.c owns the
 * archive and calls here, never the other way round. */
static int look(struct parts *p, struct agent_rt *a, const char *id, int64_t now,
                struct dict *later)
{
        struct spool *sp = p->sp;
        uint64_t off;
        int r;

        off = lock_off_id(id);
        r = lock_try(sp->lock_fd, off, true);
        if (r == -EAGAIN) {
                result_later(p, now);
                return 0;
        }
        if (r < 0)
                return r;
        r = take_locked(p, a, id, NULL, false, now);
        if (r == -EAGAIN && later) {
                /* for the scan's one listing; another agent's result of
                 * the same id at the next */
                struct result_wait *w = NULL;
                if (dict_get(later, id) || !(w = dict_put(later, id, NULL)))
                        result_later(p, now);
                else
                        w->agent = (size_t)(a - sp->agents);
                r = 0;
        } else if (r == -EAGAIN && may_list(p)) {
                struct dict want;
                dict_init(&want, sizeof(struct result_wait));
                r = dict_put(&want, id, NULL) ? archived_find(p->sp, p->results, &want) : -ENOMEM;
                if (r == 0)
                        r = take_locked(p, a, id, found_name(dict_get(&want, id)), false, now);
                dict_clear(&want);
        } else if (r == -EAGAIN) {
                result_later(p, now);
                r = 0;
        }
        lock_release(sp->lock_fd, off);
        return r;
}

int completion_arrived(struct parts *p, struct agent_rt *a, const char *name, int64_t now)
{
        struct spool *sp = p->sp;
        const char *id;
        int r;

        if (layout_classify(name) != LK_RESULT)
                return 0;
        id = name + strlen(LAYOUT_RESULT_IN);
        /* Not a name hd_complete() writes (an agent's own temp name, say):
         * not ours to touch. */
        if (!hd_id_valid(id))
                return 0;
        r = look(p, a, id, now, NULL);
        int q = store_flush(sp);
        return r < 0 ? r : q;
}

/* The results of later (id -> agent index), after one listing. */
static void take_listed(struct parts *p, struct dict *later, int64_t now)
{
        struct spool *sp = p->sp;
        struct result_wait *w;
        int r;

        if (dict_count(later) == 0)
                return;
        if (!may_list(p)) {
                result_later(p, now);
                return;
        }
        r = archived_find(p->sp, p->results, later);
        if (r < 0) {
                spool_error(sp, r, "Cannot list archive/ for the agents' results");
                result_later(p, now);
                return;
        }
        for (w = dict_first(later); w; w = dict_next(w)) {
                const char *id = dict_key(w);
                struct agent_rt *a = &sp->agents[w->agent];
                uint64_t off = lock_off_id(id);
                if (lock_try(sp->lock_fd, off, true) < 0) {
                        result_later(p, now);
                        continue;
                }
                r = take_locked(p, a, id, found_name(w), false, now);
                lock_release(sp->lock_fd, off);
                if (r < 0 && r != -EAGAIN)
                        spool_error(sp, r, "Cannot take the result of %s", id);
        }
}

void completion_scan(struct parts *p, int64_t now)
{
        struct spool *sp = p->sp;
        struct dict later;
        unsigned looked = 0;

        dict_init(&later, sizeof(struct result_wait));

        p->results->due = false;
        /* too soon after a listing: what needs one would be looked at
         * for nothing */
        if (!may_list(p)) {
                result_later(p, now);
                return;
        }
        for (size_t i = 0; i < sp->n_agents; i++) {
                struct agent_rt *a = &sp->agents[i];
                struct dirent *de;
                DIR *d;

                d = opendir_at(a->handoffs_fd);
                if (!d)
                        continue;
                while ((de = readdir(d))) {
                        enum layout_kind k = layout_classify(de->d_name);
                        const char *id = de->d_name + strlen(LAYOUT_RESULT_IN);
                        struct stat st;
                        int r;

                        if (k == LK_REFUSED) {
                                if (fstatat(a->handoffs_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                                    st.st_mtime < now / 1000000 - RESULT_REFUSED_KEEP_S)
                                        (void) store_boot_drop(sp, a, de->d_name);
                                continue;
                        }
                        if (k != LK_RESULT || !hd_id_valid(id))
                                continue;
                        /* a bounded number a scan, the rest at the next */
                        if (looked++ >= RESULT_SCAN_MAX) {
                                result_later(p, now);
                                break;
                        }
                        r = look(p, a, id, now, &later);
                        if (r < 0) {
                                char q[300];
                                spool_error(sp, r, "Cannot take the result %s of agent %s",
                                            log_quote(de->d_name, q, sizeof(q)), a->cfg->name);
                        }
                }
                closedir(d);
        }
        take_listed(p, &later, now);
        dict_clear(&later);
        (void)store_flush(sp);          /* a failure said there, once */
}

int completion_new(struct results **ret)
{
        struct results *rs = calloc(1, sizeof(*rs));

        if (!rs)
                return -ENOMEM;
        dict_init(&rs->recent, sizeof(struct result_recent));
        *ret = rs;
        return 0;
}

void completion_free(struct results *rs)
{
        if (!rs)
                return;
        dict_clear(&rs->recent);
        free(rs);
}
