/* A POST judged and dropped: the document is parsed and verified exactly
 * as the daemon will (limits, key, MAC or signature, fields, payload,
 * freshness; to_agent served here or reachable through a [remote]), then
 * written into the spool as any producer writes it (tmp/, rename without
 * replace into handoff/, synced when fsync = yes), and only then
 * answered.  What is accepted is recorded per handoff_id (hub_records.c:
 * SHA-256 of the bytes and the two agents) before it is dropped, so a
 * retry gets the same answer (and drops the file again only when the
 * spool does not know the id: a crash in between), and a different
 * document under a known id is duplicate_id. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "canon_src.h"
#include "files.h"
#include "handoff.h"
#include "hub.h"
#include "hub_records.h"
#include "items.h"
#include "util.h"

#define HASH_HEX HUB_HASH_HEX
#define ID_LOCKS 64

/* Two requests for one id are judged one after the other. */
static pthread_mutex_t id_locks[ID_LOCKS] = {
        [0 ... ID_LOCKS - 1] = PTHREAD_MUTEX_INITIALIZER
};

static pthread_mutex_t *id_lock(const char *id)
{
        return &id_locks[fnv1a(id, strlen(id), FNV_BASIS) % ID_LOCKS];
}

static int answer_json(struct hub_answer *a, unsigned status, json_t *o)
{
        a->status = status;
        a->body = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        return a->body ? 0 : -ENOMEM;
}

int hub_answer_reject(struct hub_answer *a, unsigned status,
                      const char *reason, const char *detail)
{
        return answer_json(a, status, json_pack("{s:s, s:s, s:s}", "status",
                                                "rejected", "reason", reason,
                                                "detail", detail ? detail : ""));
}

static int answer_accepted(struct hub_answer *a, const char *id)
{
        return answer_json(a, 200, json_pack("{s:s, s:s}", "status", "accepted",
                                             "handoff_id", id));
}

/* The HTTP status of a document's verdict. */
static unsigned verdict_status(hd_reason r)
{
        switch (r) {
        case HD_R_TOO_LARGE:
                return 413;
        case HD_R_PARSE_ERROR:
        case HD_R_DUPLICATE_KEY:
        case HD_R_TOO_DEEP:
        case HD_R_TOO_MANY_VALUES:
                return 400;
        case HD_R_DUPLICATE_ID:
                return 409;
        default:
                return 422;
        }
}

static int answer_verdict(struct hub_answer *a, const hd_verdict *v)
{
        return hub_answer_reject(a, verdict_status(v->reason),
                                 hd_reason_name(v->reason), v->detail);
}

/* dirfd/NAME holds exactly these bytes? */
static bool spool_same(int dirfd, const char *name, const char *body, size_t len)
{
        _cleanup_free_ char *buf = NULL;
        size_t blen;
        hd_verdict v;

        if (dirfd < 0 || hd_read_at(dirfd, name, len + 1, &buf, &blen, &v) < 0)
                return false;
        return blen == len && memcmp(buf, body, len) == 0;
}

static bool exists_at(int dirfd, const char *name)
{
        struct stat st;

        return dirfd >= 0 && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Does the spool know id, as the daemon's replay check does (ids/,
 * claimed/), or is it pending in handoff/?  Looked at in the order an item
 * moves, claimed/ twice, so a move between two looks is not missed. */
static bool spool_known(struct hub *h, const char *id, const char *name)
{
        return exists_at(h->handoff_fd, name) || exists_at(h->claimed_fd, name) ||
               exists_at(h->ids_fd, id) || exists_at(h->claimed_fd, name);
}

/* Into handoff/ as a producer does, for the token of agent.  0, or
 * -EEXIST when the name is taken. */
static int spool_publish(struct hub *h, const char *agent, const char *name, const char *body,
                         size_t len)
{
        char tmp[NAME_MAX + 1], path[64 + NAME_MAX];
        bool sync = h->cfg->fsync;
        int r;

        r = xsnprintf(tmp, sizeof(tmp), "hub.%s", name);
        if (r < 0)
                return r;
        /* Written under its own name in tmp/: nobody looks at it there, and
         * it is whole before the move makes it seen.  A name left by a
         * crash is replaced. */
        r = write_direct(h->tmp_fd, tmp, body, len, 0640, sync ? WRITE_SYNC_FILE : 0);
        if (r < 0)
                return r;
        /* Every file of ours is our user's: the daemon gives each token a
         * turn of its own by this name (src/handoffd/pending.c).  Without
         * it (no user xattrs here) the tokens share the hub's one turn. */
        if (xsnprintf(path, sizeof(path), "/proc/self/fd/%d/%s", h->tmp_fd, tmp) >= 0)
                (void)lsetxattr(path, "user.handoff.sender", agent, strlen(agent), 0);
        r = move_noreplace(h->tmp_fd, tmp, h->handoff_fd, name);
        if (r < 0) {
                unlinkat(h->tmp_fd, tmp, 0);
                return r;
        }
        if (sync) {
                r = fsync_dir(h->handoff_fd);
                if (r == 0)
                        r = fsync_dir(h->tmp_fd);
        }
        return r;
}

static int record_write(struct hub *h, const char *id, const char *hex,
                        const char *from, const char *to)
{
        struct hub_record rec = { 0 };

        if (xsnprintf(rec.hex, sizeof(rec.hex), "%s", hex) < 0 ||
            xsnprintf(rec.from, sizeof(rec.from), "%s", from) < 0 ||
            xsnprintf(rec.to, sizeof(rec.to), "%s", to) < 0)
                return -EINVAL;
        return hub_record_put(h, id, &rec, time(NULL));
}

/* The document as the daemon will judge it.  0 with *ret, or a refusal
 * already in a (returns 1). */
static int post_judge(struct hub *h, const char *agent, const char *body,
                      size_t len, json_t **ret, struct hub_answer *a)
{
        const struct config *c = h->cfg;
        const hd_limits lim = { .max_size = c->max_file_size };
        const hd_policy pol = { .max_clock_skew_s = c->max_clock_skew,
                                .max_window_s = c->max_window };
        const hd_payload_opts popts = { .roles = (const char *const *)c->roles };
        _cleanup_json_ json_t *doc = NULL;
        struct canon_src src;
        const char *from, *to;
        char detail[HD_DETAIL_MAX];
        hd_verdict v;
        int r;

        verdict_clear(&v);
        /* Where the body is canonical already (as every producer writes
         * it), the MAC or signature covers it as it is: the document is
         * not written again for it (canon_src.h), as in the daemon. */
        r = canon_src_parse(body, len, &lim, &doc, &src, &v);
        if (r == -EBADMSG)
                return answer_verdict(a, &v) < 0 ? -ENOMEM : 1;
        if (r < 0)
                return r;
        /* the token says who knocks: it speaks for from_agent or not at all */
        from = json_string_value(json_object_get(doc, "from_agent"));
        if (from && strcmp(from, agent)) {
                snprintf(detail, sizeof(detail),
                         "this token speaks for '%s', not for from_agent", agent);
                return hub_answer_reject(a, 403, "forbidden", detail) < 0 ? -ENOMEM : 1;
        }
        verdict_clear(&v);
        r = canon_src_verify(doc, &src, config_key_lookup, (void *)c, &pol, &popts,
                      h->now_usec ? h->now_usec() : hd_now_usec(), &v);
        if (r == -EBADMSG)
                return answer_verdict(a, &v) < 0 ? -ENOMEM : 1;
        if (r < 0)
                return r;
        to = json_string_value(json_object_get(doc, "to_agent"));
        if (!to || !config_reachable(c, to)) {
                snprintf(detail, sizeof(detail), "no agent '%s' is served here or "
                         "reachable through a [remote]", to ? to : "");
                return hub_answer_reject(a, 422, "unknown_agent", detail) < 0 ? -ENOMEM : 1;
        }
        *ret = TAKE_PTR(doc);
        return 0;
}

int hub_accept_post(struct hub *h, const char *agent, const char *body,
                    size_t len, struct hub_answer *a)
{
        _cleanup_json_ json_t *doc = NULL;
        unsigned char hash[crypto_hash_sha256_BYTES];
        char hex[HASH_HEX], name[NAME_MAX + 1];
        struct hub_record old;
        const char *id, *from, *to;
        pthread_mutex_t *lk;
        int r;

        r = post_judge(h, agent, body, len, &doc, a);
        if (r != 0)
                return r < 0 ? r : 0;
        id = json_string_value(json_object_get(doc, "handoff_id"));
        from = json_string_value(json_object_get(doc, "from_agent"));
        to = json_string_value(json_object_get(doc, "to_agent"));
        if (xsnprintf(name, sizeof(name), "%s.json", id) < 0 || !hd_name_safe(name))
                return hub_answer_reject(a, 422, "bad_id", "the handoff_id makes no file name");
        crypto_hash_sha256(hash, (const unsigned char *)body, len);
        sodium_bin2hex(hex, sizeof(hex), hash, sizeof(hash));

        lk = id_lock(id);
        pthread_mutex_lock(lk);
        r = hub_record_get(h, id, &old);
        if (r > 0 && strcmp(old.hex, hex)) {
                pthread_mutex_unlock(lk);
                return hub_answer_reject(a, 409, "duplicate_id",
                                         "another document was accepted under this handoff_id");
        }
        if (spool_known(h, id, name)) {
                /* ours (recorded), or the same bytes still there to compare */
                bool ours = r > 0 || spool_same(h->handoff_fd, name, body, len) ||
                            spool_same(h->claimed_fd, name, body, len);
                /* Its bytes are in the spool: accepted, true now, record
                 * or not.  Without one, a retry once it has left
                 * handoff/ finds nothing of ours to compare: said. */
                if (ours && r == 0 && (r = record_write(h, id, hex, from, to)) < 0)
                        hub_log("Failed to record '%s', accepted again (its bytes are in the "
                                "spool): %s; a retry once it is claimed may be answered "
                                "duplicate_id", id, strerror(-r));
                pthread_mutex_unlock(lk);
                if (!ours)
                        return hub_answer_reject(a, 409, "duplicate_id",
                                                 "this handoff_id is already known to the spool");
                hub_stats_accepted(true);
                return answer_accepted(a, id);
        }
        /* The record first: a retry after a crash between the two finds it
         * and, the file not being in the spool, drops it again. */
        if (r == 0) {
                r = record_write(h, id, hex, from, to);
                if (r < 0)
                        goto fail;
        }
        r = spool_publish(h, agent, name, body, len);
        if (r == -EEXIST) {
                /* another producer's file appeared meanwhile */
                bool same = spool_same(h->handoff_fd, name, body, len);
                if (!same)
                        (void)hub_record_drop(h, id);
                pthread_mutex_unlock(lk);
                if (!same)
                        return hub_answer_reject(a, 409, "duplicate_id",
                                                 "another document is pending under this handoff_id");
                return answer_accepted(a, id);
        }
        if (r < 0)
                goto fail;
        pthread_mutex_unlock(lk);
        hub_stats_accepted(false);
        return answer_accepted(a, id);
fail:
        pthread_mutex_unlock(lk);
        hub_log("Failed to drop '%s' into the spool: %s", id, strerror(-r));
        return hub_answer_reject(a, 503, "internal", "the spool could not take it; retry");
}

/* claimed/NAME is there and closed to us: the daemon's record, the
 * agent's bootstrap (its private group's) linked there when the delivery
 * was committed.  An earlier version's claimed file, the producer's,
 * is ours for a POST: we may read it (and its .delivered marker says). */
static bool claimed_closed(struct hub *h, const char *name)
{
        int fd;

        if (h->claimed_fd < 0)
                return false;
        fd = openat(h->claimed_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
                close(fd);
                return false;
        }
        return errno == EACCES;
}

/* ?wait=claimed: the connection suspended (hub_wait.c) until the file
 * leaves handoff/ (inotify says so) and the spool's word on where it
 * went is final; outbox/ is still pending, claimed/ until the bootstrap
 * is delivered, and those are looked at each HUB_WAIT_TICK_USEC, since
 * their end comes in other directories. */
struct claimed_wait {
        struct hub_wait w;
        char id[NAME_MAX + 1];
};

/* One look: the outcome into out (n bytes), "pending" while it is none. */
static bool claimed_look_once(struct hub *h, struct claimed_wait *cw, char *out, size_t n)
{
        _cleanup_json_ json_t *item = NULL;
        const char *st;
        bool done;

        snprintf(out, n, "pending");
        if (exists_at(h->handoff_fd, cw->w.name))
                return false;
        /* gone from handoff/: where it went may take other moves to say */
        cw->w.tick = HUB_WAIT_TICK_USEC;
        if (items_find(h->cfg->spool_dir, cw->id, &item) < 0 || !item)
                return false;
        st = items_status(item);
        /* claimed counts once the delivery is committed: the record (its
         * accepted_at; an earlier version's .delivered marker) precedes
         * only the bootstrap's rename into sight; a record we may not
         * read is the daemon's all the same */
        done = st && strcmp(st, "pending") &&
               (strcmp(st, "claimed") || json_object_get(item, "accepted_at") ||
                claimed_closed(h, cw->w.name));
        if (done)
                snprintf(out, n, "%s", st);
        return done;
}

static bool claimed_look(struct hub *h, struct hub_wait *w)
{
        char out[64];

        return claimed_look_once(h, (struct claimed_wait *)w, out, sizeof(out));
}

static int claimed_finish(struct hub *h, struct hub_wait *w, struct hub_answer *a)
{
        struct claimed_wait *cw = (struct claimed_wait *)w;
        char outcome[64];
        json_t *o;

        /* ready or not, the spool's word now (it may have come at the end) */
        claimed_look_once(h, cw, outcome, sizeof(outcome));
        o = json_pack("{s:s, s:s, s:s}", "status", "accepted", "handoff_id", cw->id,
                      "outcome", outcome);
        if (!o)
                return -ENOMEM;
        free(a->body);
        return answer_json(a, 200, o);
}

static void claimed_free(struct hub_wait *w)
{
        free(w);
}

static const struct hub_wait_ops claimed_ops = {
        .look = claimed_look, .finish = claimed_finish, .free = claimed_free,
};

int hub_accept_wait(struct hub *h, const char *agent, const char *id, int64_t timeout_ms,
                    struct hub_wait **ret)
{
        struct claimed_wait *cw = calloc(1, sizeof(*cw));

        (void)h;
        if (!cw)
                return -ENOMEM;
        if (xsnprintf(cw->w.name, sizeof(cw->w.name), "%s.json", id) < 0 ||
            xsnprintf(cw->id, sizeof(cw->id), "%s", id) < 0) {
                free(cw);
                return -ENAMETOOLONG;
        }
        cw->w.ops = &claimed_ops;
        snprintf(cw->w.agent, sizeof(cw->w.agent), "%s", agent);
        cw->w.dirs = HUB_WAIT_DIR(HUB_WAIT_ON_HANDOFF);
        cw->w.deadline = mono_usec() + timeout_ms * 1000;
        *ret = &cw->w;
        return 0;
}

int hub_item_find(struct hub *h, const char *id, json_t **ret)
{
        _cleanup_json_ json_t *item = NULL;
        struct hub_record rec;
        int r;

        if (!hd_id_valid(id))
                return -ENOENT;
        r = items_find(h->cfg->spool_dir, id, &item);
        if (r < 0)
                return r;
        /* Who sent it and whom it is for: the spool's word where the hub
         * may read it (a file of its own, an archive's outcome); a record
         * in claimed/ is the agent's bootstrap, closed to the hub, and
         * there what the hub recorded when it accepted the POST says. */
        if (!json_object_get(item, "from_agent") || !json_object_get(item, "to_agent")) {
                r = hub_record_get(h, id, &rec);
                if (r > 0 && rec.from[0]) {
                        json_object_set_new(item, "from_agent", json_string(rec.from));
                        json_object_set_new(item, "to_agent", json_string(rec.to));
                }
        }
        *ret = TAKE_PTR(item);
        return 0;
}

int hub_accept_show(struct hub *h, const char *agent, const char *id,
                    struct hub_answer *a)
{
        _cleanup_json_ json_t *item = NULL;
        const char *from, *to, *status, *state;
        int r;

        r = hub_item_find(h, id, &item);
        if (r == -ENOENT)
                return hub_answer_reject(a, 404, "not_found", "no such handoff_id");
        if (r < 0)
                return hub_answer_reject(a, 503, "internal", strerror(-r));
        from = json_string_value(json_object_get(item, "from_agent"));
        to = json_string_value(json_object_get(item, "to_agent"));
        state = json_string_value(json_object_get(item, "state"));
        /* A claimed or archived item was authenticated, its ends are in
         * its record: not knowing them is a failure to read, not a no. */
        if ((!from || !to) && state && (!strcmp(state, "claimed") || !strcmp(state, "archive")))
                return hub_answer_reject(a, 503, "internal",
                                         "no file this hub may read says who sent it");
        if (!(from && !strcmp(from, agent)) && !(to && !strcmp(to, agent)))
                return hub_answer_reject(a, 403, "forbidden",
                                         "only the sender's or the target's token may see it");
        status = items_status(item);
        /* this host's paths are not the client's business */
        json_object_del(item, "path");
        if (!json_object_get(item, "handoff_id"))
                json_object_set_new(item, "handoff_id", json_string(id));
        if (status)
                json_object_set_new(item, "status", json_string(status));
        return answer_json(a, 200, json_incref(item));
}

int hub_spool_clean_tmp(struct hub *h)
{
        DIR *d = opendir_at(h->tmp_fd);
        struct dirent *de;
        int n = 0;

        if (!d)
                return -errno;
        /* only our own names: other producers share tmp/ */
        while ((de = readdir(d)))
                if (!strncmp(de->d_name, "hub.", 4) || !strncmp(de->d_name, ".hub.", 5))
                        if (unlinkat(h->tmp_fd, de->d_name, 0) == 0)
                                n++;
        closedir(d);
        return n;
}
