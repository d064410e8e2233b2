/* Cancel requests; see cancel.h.  A request is the sender's file in
 * cancel/, a directory like handoff/: the group writes it, sticky and
 * setgid.  The daemon trusts only what the signature proves: the key that
 * checks from_agent's handoffs signed it, and the item's record names that
 * agent as its sender (item.c calls cancel_wanted() with the record's
 * from_agent).
 *
 * A request is kept in memory until it is answered, and is an event of
 * item.c's table.  Its file stays until then, so a restart reads it again
 * (cancel_open(), before the first claim: an item canceled before its
 * claim is never published).  The answer is a rename of the request
 * (cancelreq.h), made once what it answers is on disk.
 *
 * Two tables say what happens: cancel_actions[] for a name seen in
 * cancel/, kept_answers[] for how a kept request ends. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "cancel.h"
#include "files.h"
#include "log.h"
#include "parts.h"

struct cancel_req {
        char name[NAME_MAX + 1];        /* in cancel/ */
        char id[129];                   /* hd_id_valid(): 128 at most */
        char from[65];                  /* hd_agent_valid(): 64 at most */
        uid_t uid;                      /* the file's owner */
        bool own_key;                   /* signed with a key only from has */
        int64_t expires;                /* usec: an id unknown by then: unknown */
        uint64_t seen;                  /* the scan that last saw the file */
};

struct cancels {
        struct cancel_req *v;
        size_t n, cap;
        uint64_t scan;                  /* scans begun */
        int ifd;                        /* inotify on cancel/, or -1 */
        uv_poll_t poll;
        bool polling;
        /* Refusals and busy answers: whoever writes cancel/ makes them. */
        struct log_quiet quiet[2];
};

static struct cancel_req *find_name(struct cancels *c, const char *name)
{
        for (size_t i = 0; i < c->n; i++)
                if (!strcmp(c->v[i].name, name))
                        return &c->v[i];
        return NULL;
}

bool cancel_wanted(const struct parts *p, const char *id, const char *from)
{
        const struct cancels *c = p->cancels;

        for (size_t i = 0; c && id && i < c->n; i++)
                if (!strcmp(c->v[i].id, id) && (!from || !strcmp(c->v[i].from, from)))
                        return true;
        return false;
}

/* cancel/name answered a: renamed to its answer.  Gone meanwhile (its
 * requester gave up and removed it): nothing to answer.  A refusal or a
 * busy answer is logged at most once per LOG_QUIET_USEC, with how many
 * there were: any member of the group can make thousands a second. */
static void answer_file(struct parts *p, const char *name, const char *id, const char *from,
                        enum cancelreq_answer a, const char *why)
{
        struct spool *sp = p->sp;
        const char *word = cancelreq_answer_name(a);
        char an[NAME_MAX + 1], q[300], more[80] = "";
        unsigned n = 1;

        if (cancelreq_answer_file(name, a, an, sizeof(an)) < 0) {
                /* No room for the answer's name (a request named so
                 * long): the request goes, unanswered. */
                (void) store_cancel_answer(sp, name, NULL);
        } else if (store_cancel_answer(sp, name, an) == -ENOENT) {
                return;         /* its requester gave up and removed it */
        }
        if (a == CA_REFUSED || a == CA_BUSY) {
                if (!log_quiet_due(&p->cancels->quiet[a == CA_BUSY], mono_usec(), &n))
                        return;
                if (n > 1)
                        snprintf(more, sizeof(more), " (%u %s answer(s) since the last such line)",
                                 n, word);
        }
        log_decision(a == CA_REFUSED || a == CA_BUSY ? LOG_WARNING : LOG_INFO, id, NULL,
                     "cancel", word, "Cancel request %s%s%s%s%s: %s%s%s%s",
                     log_quote(name, q, sizeof(q)), id ? " for " : "", id ? id : "",
                     from ? " from " : "", from ? from : "", word, why ? ": " : "",
                     why ? why : "", more);
}

/* What happens to a kept request, and the answer it gets. */
enum cancel_event {
        CE_UNSEEN,      /* its file is gone (its requester gave up) */
        CE_EXPIRED,     /* no such handoff came before the request expired */
        CE_NOT_SENDER,  /* its item names another sender */
        CE_OUTCOME,     /* its item has an outcome (ids/), not claimed here */
        CE_DECIDED,     /* its item's action decided the answer */
        _CE_MAX
};

/* event -> answer: the one place that says how a kept request ends.
 * CA_NONE: forgotten unanswered (CE_UNSEEN), or the item's answer
 * (CE_DECIDED). */
static const struct {
        enum cancelreq_answer answer;
        const char *why;
} kept_answers[_CE_MAX] = {
        [CE_UNSEEN]     = { CA_NONE, NULL },
        [CE_EXPIRED]    = { CA_UNKNOWN, "no such handoff here before the request expired" },
        [CE_NOT_SENDER] = { CA_REFUSED, "not the handoff's sender" },
        [CE_OUTCOME]    = { CA_NOT_CANCELABLE, "it has an outcome already" },
        [CE_DECIDED]    = { CA_NONE, NULL },
};

/* c->v[i] meets event e (CE_DECIDED: answered a) and is forgotten (the
 * last one takes its place). */
static void kept_event(struct parts *p, size_t i, enum cancel_event e, enum cancelreq_answer a)
{
        struct cancels *c = p->cancels;
        struct cancel_req r = c->v[i];

        if (e != CE_DECIDED)
                a = kept_answers[e].answer;
        c->v[i] = c->v[--c->n];
        if (e != CE_UNSEEN)
                answer_file(p, r.name, r.id, r.from, a, kept_answers[e].why);
}

void cancel_answer(struct parts *p, const char *id, const char *from,
                   enum cancelreq_answer a)
{
        struct cancels *c = p->cancels;

        for (size_t i = c ? c->n : 0; i-- > 0;) {
                if (strcmp(c->v[i].id, id))
                        continue;
                if (!from || strcmp(c->v[i].from, from))
                        kept_event(p, i, CE_NOT_SENDER, CA_NONE);
                else if (a != CA_NONE)
                        kept_event(p, i, CE_DECIDED, a);
        }
}

void cancel_unclaimed(struct parts *p, const char *id)
{
        struct spool *sp = p->sp;
        int64_t now = hd_now_usec();

        if (!cancel_wanted(p, id, NULL) || !spool_id_remembered(sp, id) ||
            spool_id_claimed(sp, id))
                return;
        for (size_t i = p->cancels->n; i-- > 0;) {
                const struct cancel_req *k = &p->cancels->v[i];

                if (strcmp(k->id, id))
                        continue;
                /* Relayed from here: the host it went to answers, while
                 * the request is good. */
                if (sp->relay.cancel && now <= k->expires &&
                    sp->relay.cancel(sp->relay.ctx, id, k->name))
                        continue;
                kept_event(p, i, CE_OUTCOME, CA_NONE);
        }
}

/* Was it signed with a key of from's own (an [agent] key, a public key),
 * not one the group shares ([keys] default, a named key)?  Its request
 * verified. */
static bool signed_own_key(const struct config *cfg, const char *kid, const char *from)
{
        const hd_key *k = config_key_lookup((void *)cfg, kid, from);

        if (!k || k == cfg->default_key)
                return false;
        for (size_t i = 0; i < cfg->n_kids; i++)
                if (k == cfg->kid_keys[i])
                        return false;
        return true;
}

/* Is there room for one more request of from, owned by uid?  When not,
 * why into why. */
static bool room_for(const struct cancels *c, const char *from, uid_t uid, bool own_key,
                     char *why, size_t n)
{
        size_t of_from = 0, of_uid = 0, shared = 0;

        for (size_t i = 0; i < c->n; i++) {
                of_from += !strcmp(c->v[i].from, from);
                shared += !c->v[i].own_key;
                of_uid += !c->v[i].own_key && c->v[i].uid == uid;
        }
        if (c->n >= CANCEL_PENDING_MAX)
                snprintf(why, n, "%zu requests wait (the most)", c->n);
        else if (of_from >= CANCEL_PENDING_PER_SENDER)
                snprintf(why, n, "%zu requests of %s wait (the most of one sender)", of_from, from);
        else if (!own_key && of_uid >= CANCEL_PENDING_PER_UID)
                snprintf(why, n, "%zu requests of uid %u signed with a shared key wait (the "
                         "most of one uid)", of_uid, (unsigned)uid);
        else if (!own_key && shared >= CANCEL_PENDING_MAX - CANCEL_PENDING_RESERVE)
                snprintf(why, n, "%zu requests signed with a shared key wait (the rest is "
                         "kept for senders with keys of their own)", shared);
        else
                return true;
        return false;
}

/* What a look at a name of cancel/ found. */
enum cancel_look {
        CL_IGNORED,     /* a temp name or an answer: no request */
        CL_GONE,        /* removed by its requester meanwhile */
        CL_KEPT,        /* kept already: seen by this scan */
        CL_INVALID,     /* it does not verify: refused */
        CL_NO_ROOM,     /* past a bound of CANCEL_PENDING_*: busy */
        CL_NEW,         /* a good request: kept until it is answered */
        _CL_MAX
};

/* A request as its look found it. */
struct cancel_seen {
        const char *name;
        struct cancel_req req;          /* CL_NEW, and what is known of others */
        char why[HD_DETAIL_MAX + 32];   /* CL_INVALID, CL_NO_ROOM */
};

/* cancel/name read and checked, into *l; the state in *ret.  0 or -errno. */
static int look(struct parts *p, struct cancel_seen *l, int64_t now, enum cancel_look *ret)
{
        struct spool *sp = p->sp;
        const struct config *cfg = sp->cfg;
        const hd_limits lim = { .max_size = CANCELREQ_MAX, .max_depth = 4 };
        const hd_policy pol = { .max_clock_skew_s = cfg->max_clock_skew,
                                .max_window_s = cfg->max_window };
        struct cancels *c = p->cancels;
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_t *doc = NULL;
        _cleanup_close_ int fd = -1;
        struct cancelreq_fields rf;
        struct cancel_req *k;
        struct stat st = {};
        int64_t t = 0;
        size_t len;
        hd_verdict v;
        int r;

        if (l->name[0] == '.' || !hd_name_safe(l->name)) {
                *ret = CL_IGNORED;
                return 0;
        }
        if ((k = find_name(c, l->name))) {
                k->seen = c->scan;
                *ret = CL_KEPT;
                return 0;
        }
        r = hd_open_at(sp->fd[SD_CANCEL], l->name, &fd, &v);
        if (r == -ENOENT) {
                *ret = CL_GONE;
                return 0;
        }
        if (r == 0 && fstat(fd, &st) < 0)
                r = -errno;
        if (r == 0)
                r = hd_read_fd(fd, l->name, CANCELREQ_MAX, &buf, &len, &v);
        if (r == 0)
                r = hd_parse(buf, len, &lim, &doc, &v);
        if (r == 0)
                r = cancelreq_check(doc, config_key_lookup, (void *)cfg, &pol, now, &v);
        if (r < 0 && r != -EBADMSG)
                return r;
        cancelreq_fields(doc, &rf);
        if (r == -EBADMSG) {
                snprintf(l->why, sizeof(l->why), "%s: %s", hd_reason_name(v.reason), v.detail);
                if (rf.id && hd_id_valid(rf.id))
                        snprintf(l->req.id, sizeof(l->req.id), "%s", rf.id);
                *ret = CL_INVALID;
                return 0;
        }
        hd_time_parse(rf.expires_at, &t);       /* checked: cancelreq_check() */
        l->req = (struct cancel_req){ .uid = st.st_uid, .own_key = signed_own_key(cfg, rf.kid, rf.from),
                                      .expires = t, .seen = c->scan };
        snprintf(l->req.name, sizeof(l->req.name), "%s", l->name);
        snprintf(l->req.id, sizeof(l->req.id), "%s", rf.id);
        snprintf(l->req.from, sizeof(l->req.from), "%s", rf.from);
        *ret = room_for(c, rf.from, st.st_uid, l->req.own_key, l->why, sizeof(l->why)) ?
               CL_NEW : CL_NO_ROOM;
        return 0;
}

typedef int cancel_action(struct parts *p, const struct cancel_seen *l, bool *ret_kept);

static int act_none(struct parts *p, const struct cancel_seen *l, bool *ret_kept)
{
        *ret_kept = false;
        return 0;
}

static int act_seen(struct parts *p, const struct cancel_seen *l, bool *ret_kept)
{
        *ret_kept = true;
        return 0;
}

static int act_refuse(struct parts *p, const struct cancel_seen *l, bool *ret_kept)
{
        answer_file(p, l->name, l->req.id[0] ? l->req.id : NULL, NULL, CA_REFUSED, l->why);
        *ret_kept = false;
        return 0;
}

static int act_busy(struct parts *p, const struct cancel_seen *l, bool *ret_kept)
{
        answer_file(p, l->name, l->req.id, l->req.from, CA_BUSY, l->why);
        *ret_kept = false;
        return 0;
}

/* Kept in memory until its item answers it; its file stays till then. */
static int act_keep(struct parts *p, const struct cancel_seen *l, bool *ret_kept)
{
        struct cancels *c = p->cancels;
        const struct cancel_req *k = &l->req;

        if (c->n == c->cap) {
                size_t cap = c->cap ? 2 * c->cap : 16;
                struct cancel_req *nv = realloc(c->v, cap * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                c->v = nv;
                c->cap = cap;
        }
        c->v[c->n++] = *k;
        log_decision(LOG_INFO, k->id, NULL, "cancel_requested", NULL,
                     "Cancel request for %s from %s (uid %u, %s key)", k->id, k->from,
                     (unsigned)k->uid, k->own_key ? "its own" : "a shared");
        *ret_kept = true;
        return 0;
}

/* look -> action: the one place that says what a new name of cancel/
 * gets. */
static cancel_action *const cancel_actions[_CL_MAX] = {
        [CL_IGNORED] = act_none,
        [CL_GONE]    = act_none,
        [CL_KEPT]    = act_seen,
        [CL_INVALID] = act_refuse,      /* refused, with why */
        [CL_NO_ROOM] = act_busy,        /* busy: sent again later, it may fit */
        [CL_NEW]     = act_keep,
};

/* cancel/name read and checked: *ret_kept, or not (refused, or no
 * request); 0 or -errno. */
static int load(struct parts *p, const char *name, int64_t now, bool *ret_kept)
{
        struct cancel_seen l = { .name = name };
        enum cancel_look s = CL_IGNORED;
        int r;

        r = look(p, &l, now, &s);
        if (r < 0)
                return r;
        return cancel_actions[s](p, &l, ret_kept);
}

/* The item of id looked at now (p->check_item, lifecycle_check(), takes
 * its lock): it answers the requests it can. */
static int decide(struct parts *p, const char *id, int64_t now)
{
        struct spool *sp = p->sp;
        char copy[129];

        /* The requests may be answered (and moved) meanwhile. */
        snprintf(copy, sizeof(copy), "%s", id);
        int r = p->check_item ? p->check_item(p, copy, now) : 0;
        int q = store_flush(sp);
        return r < 0 ? r : q;
}

int cancel_request(struct parts *p, const char *name, int64_t now)
{
        struct cancel_req *k;
        bool kept;
        int r;

        if (!p->cancels)
                return 0;
        r = load(p, name, now, &kept);
        if (r < 0 || !kept)
                return r;
        k = find_name(p->cancels, name);
        return k ? decide(p, k->id, now) : 0;
}

static void scan_dir(struct parts *p, int64_t now)
{
        struct spool *sp = p->sp;
        struct dirent *de;
        struct stat st;
        DIR *d;

        d = opendir_at(sp->fd[SD_CANCEL]);
        if (!d) {
                spool_error(sp, -errno, "Cannot list cancel/");
                return;
        }
        while ((de = readdir(d))) {
                const char *n = de->d_name;
                if (!strcmp(n, ".") || !strcmp(n, ".."))
                        continue;
                if (n[0] == '.') {
                        /* An answer nobody took, a requester's temp
                         * name: removed once surely forgotten. */
                        if (fstatat(sp->fd[SD_CANCEL], n, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                            st.st_mtime < now / 1000000 - CANCELREQ_ANSWER_KEEP_S)
                                (void) store_cancel_forget(sp, n, S_ISDIR(st.st_mode));
                        continue;
                }
                bool kept;
                int r = load(p, n, now, &kept);
                if (r < 0) {
                        char q[300];
                        spool_error(sp, r, "Cannot read cancel request %s",
                                    log_quote(n, q, sizeof(q)));
                }
        }
        closedir(d);
}

void cancel_scan(struct parts *p, int64_t now)
{
        struct spool *sp = p->sp;
        struct cancels *c = p->cancels;
        char (*ids)[129] = NULL;
        size_t n = 0;

        if (!c)
                return;
        c->scan++;
        scan_dir(p, now);
        /* Removed by its requester: forgotten. */
        for (size_t i = c->n; i-- > 0;)
                if (c->v[i].seen != c->scan)
                        kept_event(p, i, CE_UNSEEN, CA_NONE);
        if (c->n == 0)
                return;
        ids = calloc(c->n, sizeof(*ids));
        if (!ids)
                return;
        for (size_t i = c->n; i-- > 0;) {
                struct cancel_req *k = &c->v[i];
                /* No such handoff came while the request was good. */
                if (now > k->expires && !spool_id_seen(sp, k->id)) {
                        kept_event(p, i, CE_EXPIRED, CA_NONE);
                        continue;
                }
                bool dup = false;
                for (size_t j = 0; j < n && !dup; j++)
                        dup = !strcmp(ids[j], k->id);
                if (!dup)
                        memcpy(ids[n++], k->id, sizeof(ids[0]));
        }
        for (size_t j = 0; j < n; j++) {
                int r = decide(p, ids[j], now);
                if (r < 0)
                        spool_error(sp, r, "Cannot act on the cancel of %s", ids[j]);
        }
        free(ids);
}

int cancel_open(struct parts *p, int64_t now)
{
        struct cancels *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        c->ifd = -1;
        p->cancels = c;
        c->scan++;
        scan_dir(p, now);
        if (c->n)
                log_info("%zu cancel request(s) wait in cancel/", c->n);
        return 0;
}

static void on_inotify(uv_poll_t *h, int status, int events)
{
        struct parts *pt = h->data;
        struct cancels *c = pt->cancels;
        char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
        int64_t now = hd_now_usec();
        ssize_t n;

        (void)events;
        if (status < 0)
                return;
        /* One read a turn: the rest of the queue makes the fd readable
         * again, so a flood of requests cannot hold the loop. */
        n = read(c->ifd, buf, sizeof(buf));
        for (char *p = buf; n > 0 && p < buf + n;) {
                const struct inotify_event *ev = (const struct inotify_event *)p;
                p += sizeof(*ev) + ev->len;
                if (ev->mask & IN_Q_OVERFLOW) {
                        cancel_scan(pt, now);
                        continue;
                }
                if (ev->len == 0 || !ev->name[0])
                        continue;
                int r = cancel_request(pt, ev->name, now);
                if (r < 0) {
                        char q[300];
                        spool_error(pt->sp, r, "Cannot act on cancel request %s",
                                    log_quote(ev->name, q, sizeof(q)));
                }
        }
}

int cancel_watch(struct parts *p, uv_loop_t *loop)
{
        struct spool *sp = p->sp;
        struct cancels *c = p->cancels;
        char path[64];
        int r;

        if (!c)
                return -EINVAL;
        c->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        snprintf(path, sizeof(path), "/proc/self/fd/%d", sp->fd[SD_CANCEL]);
        if (c->ifd < 0 ||
            inotify_add_watch(c->ifd, path, IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR) < 0) {
                log_warning_errno(errno, "Cannot watch cancel/: cancel requests wait for "
                                  "the next sweep");
                closep(&c->ifd);
                return 0;
        }
        r = uv_poll_init(loop, &c->poll, c->ifd);
        if (r == 0) {
                c->poll.data = p;
                c->polling = true;
                r = uv_poll_start(&c->poll, UV_READABLE, on_inotify);
        }
        if (r < 0)
                return log_error_errno(r, "Cannot watch cancel/");
        return 0;
}

void cancel_free(struct parts *p)
{
        struct cancels *c = p->cancels;

        if (!c)
                return;
        if (c->ifd >= 0)
                close(c->ifd);
        free(c->v);
        free(c);
        p->cancels = NULL;
}
