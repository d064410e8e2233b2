/* outbox/ (handoffd(8), RELAY): a handoff for a [remote]
 * agent leaves handoff/ only after the same checks as a local one, waits
 * here as outbox/<handoff_id>.json (the daemon's copy of what it
 * verified: outbox_dir.c), is published with those bytes on
 * handoff.<host>.<agent> (Nats-Msg-Id = handoff_id), and leaves for
 * archive/ (outcome relayed, ids/ marked) only after the stream's PubAck.
 * A failed publish is retried after 1 s, 2 s, ... 60 s; an item whose own
 * expires_at passes first goes to rejected/ as expired_unrelayed.
 *
 * The in-memory index (r->outbox) is rebuilt from the directory at start;
 * the directory is the truth.  A crash between the PubAck and the archive
 * move publishes again at the next start: the stream's duplicate window
 * answers "duplicate", and the receiving host drops an id it knows. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "log.h"
#include "outbox.h"
#include "outbox_dir.h"
#include "receipt.h"
#include "relay_queue.h"
#include "spool.h"
#include "store.h"

static void on_timer(uv_timer_t *t);

/* *e for a verified handoff h that entered outbox/ at at: 0, or
 * -EINVAL when its names are over a name's length. */
static int entry_fill(struct outbox_entry *e, const struct handoff *h, int64_t at)
{
        if (xsnprintf(e->to, sizeof(e->to), "%s", h->to) < 0 ||
            xsnprintf(e->from, sizeof(e->from), "%s", h->from) < 0)
                return -EINVAL;
        e->at = at;
        e->exp = h->expires_usec;
        e->next = e->tries = 0;
        e->busy = e->queued = false;
        e->host[0] = '\0';
        e->data = NULL;
        e->len = 0;
        e->src_dev = 0;
        e->src_ino = 0;
        return 0;
}

void outbox_entry_drop(void *p)
{
        struct outbox_entry *e = p;

        free(e->data);
        e->data = NULL;
}

/* e leaves the index: what it holds freed and counted out. */
static void entry_remove(struct relay *r, struct outbox_entry *e)
{
        if (e->data)
                r->held -= e->len;
        dict_remove(&r->outbox, e);
}

/* Item id (its entry e) to publish now: at the queue's end, e marked
 * queued.  No room (no memory): left unqueued, so that a scan queues it
 * once its next try is due. */
static void queue_push(struct relay *r, const char *id, struct outbox_entry *e)
{
        struct relay_ids *q = &r->queue;

        if (strlen(id) > RELAY_ID_MAX)
                return;         /* never an outbox/ item's (scan_one(), outbox_take()) */
        if (q->n == q->cap) {
                size_t cap = q->cap ? q->cap * 2 : 64;
                void *id2 = reallocarray(q->id, cap, sizeof(*q->id));
                if (!id2)
                        return;
                q->id = id2;
                q->cap = cap;
        }
        memcpy(q->id[q->n++], id, strlen(id) + 1);
        e->queued = true;
}

int outbox_take(struct relay *r, const char *name, const struct stat *was,
                const struct handoff *h, int64_t now)
{
        struct spool *sp = r->sp;
        const char *id = h->id;
        char dst[NAME_MAX + 1];
        struct outbox_entry tmp, *e;
        bool added;
        int q;

        if (entry_fill(&tmp, h, now) < 0)
                return -EINVAL;         /* hd_verify passed: cannot happen */
        if (xsnprintf(dst, sizeof(dst), "%s.json", id) < 0)
                return -ENAMETOOLONG;
        /* Its place in the index before the move, so that a move never
         * leaves an item unindexed for want of memory; an entry already
         * there (its file removed by hand) is replaced once the move is
         * done, and stays as it is if the move fails. */
        e = dict_put(&r->outbox, id, &added);
        if (!e)
                return -ENOMEM;
        /* A file of ours (outbox_dir.c): never an open relay, never
         * bytes a producer wrote after the check. */
        q = outbox_dir_take(sp, name, was, h, dst);
        if (q < 0) {
                if (added)
                        entry_remove(r, e);
                return q;
        }
        if (!added && e->data) {
                r->held -= e->len;
                free(e->data);
        }
        *e = tmp;
        /* What the take wrote, for the publish: no read of the file back.
         * Within RELAY_HELD_MAX; past it (the relay down, a long queue)
         * the file is read when its turn comes. */
        e->data = NULL;
        if (h->canon && r->held + h->canon_len <= RELAY_HELD_MAX &&
            (e->data = malloc(h->canon_len))) {
                memcpy(e->data, h->canon, h->canon_len);
                e->len = h->canon_len;
                r->held += e->len;
        }
        e->src_dev = was->st_dev;
        e->src_ino = was->st_ino;
        /* Its expiry is a deadline of the next scan. */
        if (e->exp + 1 < r->scan_at)
                r->scan_at = e->exp + 1;
        queue_push(r, id, e);
        /* Said once it is durable: after the flush that syncs outbox/ */
        char *to = dict_put(&r->unsaid, id, NULL);
        if (to)
                snprintf(to, SPOOL_AGENT_SIZE, "%s", e->to);
        outbox_kick(r);
        return 0;
}

/* outbox/name is one inode with a name in handoff/, archive/ or
 * rejected/: a move into or out of outbox/ whose two directories were not
 * both synced before a power cut (store_flush() syncs the destination
 * first), or with a producer's tmp/ name.  The move stands: a take's
 * handoff/ or tmp/ name goes (store_drop_id_leftover(),
 * store_drop_tmp_twin()), and so does the outbox/ name of an item
 * archived as relayed or rejected; left there, it would be rejected as a
 * hardlink, or published and archived a second time.  True when
 * outbox/name is gone. */
static bool drop_leftover(struct spool *sp, const char *name, const char *id)
{
        static const enum spool_dir out[] = { SD_ARCHIVE, SD_REJECTED };
        char other[NAME_MAX + 1];
        struct stat a;

        if (fstatat(sp->fd[SD_OUTBOX], name, &a, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(a.st_mode) || a.st_nlink < 2)
                return false;
        /* Once at start, for an item with a second link: the producer's
         * name in handoff/ is known nowhere, so handoff/ is listed. */
        if (store_find_link(sp->fd[SD_HANDOFF], NULL, &a, other, sizeof(other)))
                store_drop_id_leftover(sp, other, id);
        /* the producer's temp name, kept by a sync of tmp/ (its rename
         * into handoff/ was not) */
        store_drop_tmp_twin(sp, SD_OUTBOX, name);
        for (size_t i = 0; i < ELEMENTSOF(out); i++) {
                if (!store_find_link(sp->fd[out[i]], NULL, &a, other, sizeof(other)))
                        continue;
                if (store_sync_dir(sp, out[i]) < 0)
                        return false;
                if (store_remove(sp, SD_OUTBOX, name) < 0)
                        return false;
                log_info("Removed outbox/%s, left beside %s/%s by a power cut", name,
                         spool_dir_names[out[i]], other);
                return true;
        }
        return false;
}

/* One item of outbox/ at start (outbox_dir_each()). */
static int scan_one(void *ctx, const char *k, const char *id, int64_t now)
{
        struct relay *r = ctx;
        struct spool *sp = r->sp;
        _cleanup_json_ json_t *doc = NULL;
        _cleanup_handoff_ struct handoff h = { 0 };
        hd_verdict vd;
        int64_t at;

        if (strlen(id) > RELAY_ID_MAX || !hd_id_valid(id) || drop_leftover(sp, k, id))
                return 0;
        /* Only this daemon writes here, after a full check; a file that
         * no longer reads (a power loss with fsync off) is rejected, never
         * published. */
        if (outbox_dir_load(sp, k, now, &doc, &vd, &at) < 0) {
                store_reject_from(sp, SD_OUTBOX, k, NULL, vd.reason ? vd.reason : HD_R_PARSE_ERROR,
                                  vd.detail, NULL, now, NULL);
                return 0;
        }
        /* Ours, written from a handoff that verified. */
        struct outbox_entry tmp, *e;
        bool whole = handoff_parse(doc, &h) == 0;
        /* an A2A remote's: a2a_out.c's */
        if (whole && config_remote_a2a(sp->cfg, h.to))
                return 0;
        if (!whole || entry_fill(&tmp, &h, at) < 0 || strcmp(h.id, id)) {
                store_reject_from(sp, SD_OUTBOX, k, NULL, HD_R_MISSING_FIELD,
                                  "outbox item without its fields", NULL, now, NULL);
                return 0;
        }
        /* Without memory for it, it stays in outbox/ for the next start. */
        e = dict_put(&r->outbox, id, NULL);
        if (e)
                *e = tmp;
        return 0;
}

int outbox_scan(struct relay *r, int64_t now)
{
        int q = outbox_dir_each(r->sp, now, scan_one, r);

        store_flush(r->sp);
        outbox_kick(r);
        return q;
}

void outbox_kick(struct relay *r)
{
        if (!uv_is_closing((uv_handle_t *)&r->timer))
                uv_timer_start(&r->timer, on_timer, 0, 0);
}

void outbox_ready(struct relay *r)
{
        struct outbox_entry *e, *nx;

        DICT_FOREACH_SAFE(e, nx, &r->outbox)
                e->next = 0;
        r->scan_at = 0;
        outbox_kick(r);
}

void outbox_resend(struct relay *r)
{
        struct outbox_entry *e, *nx;

        if (r->inflight == 0)
                return;
        DICT_FOREACH_SAFE(e, nx, &r->outbox)
                if (e->busy) {
                        e->busy = false;
                        queue_push(r, dict_key(e), e);
                }
        r->inflight = 0;
        outbox_kick(r);
}

/* Published: archive/ as relayed, its .outcome naming the host; the
 * archive name's time is when it entered outbox/ (outbox_dir_archive()). */
static int archive_relayed(struct relay *r, const char *id, const struct outbox_entry *e,
                           bool duplicate, int64_t now)
{
        struct spool *sp = r->sp;
        struct store_outcome o = { .outcome = "relayed", .archived_usec = now,
                                   .duplicate = duplicate, .completes = -1 };
        char name[NAME_MAX + 1];
        int q;

        if (xsnprintf(o.id, sizeof(o.id), "%s", id) < 0 ||
            xsnprintf(o.from, sizeof(o.from), "%s", e->from) < 0 ||
            xsnprintf(o.to, sizeof(o.to), "%s", e->to) < 0 ||
            xsnprintf(o.relayed_to, sizeof(o.relayed_to), "%s", e->host) < 0)
                return -EINVAL;
        struct spool_ino src = { .dev = e->src_dev, .ino = e->src_ino };
        q = outbox_dir_archive(sp, &o, e->at / 1000000, e->src_dev ? &src : NULL, name,
                               sizeof(name));
        if (q < 0)
                return q;
        receipt_sent(r, id, name);
        return 0;
}

void outbox_puback(struct relay *r, const char *id, bool ok, bool duplicate,
                   const char *err, int64_t now)
{
        struct outbox_entry *e = dict_get(&r->outbox, id);
        int q;

        if (!e || !e->busy)
                return;         /* not ours, or already handled */
        e->busy = false;
        if (r->inflight > 0)
                r->inflight--;
        if (ok) {
                q = archive_relayed(r, id, e, duplicate, now);
                if (q < 0) {
                        /* Relayed, not archived: published again later,
                         * which the stream or the receiver drops. */
                        spool_error(r->sp, q, "Cannot archive relayed %s", id);
                        e->next = now + RELAY_BACKOFF_MIN_USEC;
                        if (now + RELAY_BACKOFF_MIN_USEC < r->scan_at)
                                r->scan_at = now + RELAY_BACKOFF_MIN_USEC;
                        return;
                }
                r->st.relayed++;
                log_decision(LOG_INFO, id, e->to, "relayed", NULL, "Relayed %s to %s on %s%s", id,
                             e->to, e->host, duplicate ? " (the stream had it already)" : "");
                entry_remove(r, e);
                return;
        }
        /* 1 s, 2 s, 4 s ... 60 s per item. */
        int64_t tries = e->tries + 1, wait = RELAY_BACKOFF_MIN_USEC;
        for (int64_t i = 1; i < tries && wait < RELAY_BACKOFF_MAX_USEC; i++)
                wait *= 2;
        if (wait > RELAY_BACKOFF_MAX_USEC)
                wait = RELAY_BACKOFF_MAX_USEC;
        e->tries = tries;
        e->next = now + wait;
        if (now + wait < r->scan_at)
                r->scan_at = now + wait;
        r->st.publish_errors++;
        if (strcmp(r->st.last_error, err))
                log_warning("Relay: publish of %s failed: %s; retrying in %llds", id, err,
                            (long long)(wait / 1000000));
        relay_error(r, "publish: %s", err);
}

static int expire(struct relay *r, const char *id, int64_t now)
{
        char name[NAME_MAX + 1], detail[400];

        if (xsnprintf(name, sizeof(name), "%s.json", id) < 0)
                return -ENAMETOOLONG;
        snprintf(detail, sizeof(detail), "expired in outbox/ before the relay could publish it%s%s",
                 r->st.last_error[0] ? "; last relay error: " : "", r->st.last_error);
        /* gone meanwhile (IO_GONE): it left outbox/ all the same */
        return store_reject_from(r->sp, SD_OUTBOX, name, NULL, HD_R_EXPIRED_UNRELAYED, detail, id,
                                 now, NULL);
}

/* Read outbox/<id>.json and hand it to the worker. */
static int submit(struct relay *r, const char *id, struct outbox_entry *e)
{
        struct spool *sp = r->sp;
        const char *to = e->to;
        const char *host = config_remote(sp->cfg, to);
        char name[NAME_MAX + 1], subject[160];
        _cleanup_close_ int fd = -1;
        char *buf = NULL;
        size_t len;
        int q;

        if (!host)
                return -ENXIO;  /* [remote] gone in a reload: it waits, then expires */
        if (xsnprintf(name, sizeof(name), "%s.json", id) < 0)
                return -ENAMETOOLONG;
        if (e->data) {
                /* the take's bytes, its file's; a retry reads the file */
                buf = TAKE_PTR(e->data);
                len = e->len;
                r->held -= len;
        } else {
                fd = openat(sp->fd[SD_OUTBOX], name,
                            O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
                if (fd < 0)
                        return -errno;
                q = read_all(fd, OUTBOX_DIR_MAX(sp), 0, &buf, &len);
                if (q < 0)
                        return q;
        }
        if (xsnprintf(subject, sizeof(subject), "handoff.%s.%s", host, to) < 0 ||
            xsnprintf(e->host, sizeof(e->host), "%s", host) < 0) {
                free(buf);
                return -ENAMETOOLONG;
        }
        q = relay_publish(r, id, subject, buf, len);
        if (q < 0)
                return q;
        e->busy = true;
        r->inflight++;
        return 0;
}

/* Every item: expire what is late, queue what is due for a retry; the
 * time of the next look.  At most once a second, or at a deadline. */
static void scan(struct relay *r, int64_t now)
{
        struct outbox_entry *e, *nx;
        int64_t due = now + RELAY_BACKOFF_MAX_USEC;
        bool flush = false;

        DICT_FOREACH_SAFE(e, nx, &r->outbox) {
                const char *k = dict_key(e);
                int64_t next = e->next, exp = e->exp;
                /* Valid while now <= expires_at; one in flight waits for
                 * its answer (a PubAck after a reject would be a lie). */
                if (e->busy)
                        continue;
                if (now > exp) {
                        int q = expire(r, k, now);
                        if (q < 0) {
                                spool_error(r->sp, q, "Cannot reject %s from outbox/", k);
                                e->exp = now + RELAY_BACKOFF_MAX_USEC;
                        } else {
                                /* rejected: left outbox/ (the walk allows
                                 * removing the entry it is at) */
                                entry_remove(r, e);
                        }
                        flush = true;
                        continue;
                }
                if (exp + 1 < due)
                        due = exp + 1;
                if (e->queued)
                        continue;
                if (next <= now) {
                        queue_push(r, k, e);
                } else if (next < due) {
                        due = next;
                }
        }
        if (flush)
                store_flush(r->sp);
        r->scan_at = due < now + 1000000 ? now + 1000000 : due;
}

/* Publish from the head of the queue while the relay is up and there is
 * room in flight. */
static void submit_queued(struct relay *r, int64_t now)
{
        struct relay_ids *qu = &r->queue;

        while (qu->head < qu->n && r->st.ready && r->inflight < RELAY_INFLIGHT_MAX) {
                const char *k = qu->id[qu->head++];
                struct outbox_entry *e = dict_get(&r->outbox, k);
                if (!e || e->busy)
                        continue;
                e->queued = false;
                int q = submit(r, k, e);
                if (q == -ENOENT) {     /* removed by hand */
                        entry_remove(r, e);
                } else if (q < 0) {
                        relay_error(r, "cannot publish %s: %s", k, strerror(-q));
                        e->next = now + RELAY_BACKOFF_MAX_USEC;
                }
        }
        if (qu->head == qu->n) {
                qu->n = qu->head = 0;
        } else if (qu->head > 4096 && qu->head > qu->n / 2) {
                /* Drop the consumed head now and then, not at every pop. */
                memmove(qu->id, qu->id + qu->head, (qu->n - qu->head) * sizeof(*qu->id));
                qu->n -= qu->head;
                qu->head = 0;
        }
}

static void on_timer(uv_timer_t *t)
{
        struct relay *r = t->data;
        int64_t now = hd_now_usec();

        if (now >= r->scan_at)
                scan(r, now);
        submit_queued(r, now);
        int64_t ms = (r->scan_at - now + 999) / 1000;
        uv_timer_start(&r->timer, on_timer, ms < 0 ? 0 : (uint64_t)ms, 0);
}

void outbox_synced(void *ctx)
{
        struct relay *r = ctx;
        char *to, *nx;

        DICT_FOREACH_SAFE(to, nx, &r->unsaid) {
                const char *id = dict_key(to);

                log_decision(LOG_INFO, id, to, "outbox", NULL, "Queued %s for agent %s on host %s",
                             id, to, config_remote(r->sp->cfg, to));
                dict_remove(&r->unsaid, to);
        }
}
