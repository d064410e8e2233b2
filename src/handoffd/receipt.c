/* Receipts (DESIGN.md "Receipts: the outcome goes back").
 *
 * The receiving host: a handoff that came in through the relay with a
 * Handoff-Origin header leaves receipts/owed/<id> (the origin's name),
 * written and synced before the message is acked, so before any outcome.
 * Each outcome of that id (delivered, consumed, expired, canceled, rejected
 * with its reason) is decided before it is final on disk; then (spool hook) the
 * receipt is built, signed with [relay] host_key (Ed25519 over the
 * canonical bytes, hd_sign()), written and synced as
 * receipts/out/<id>.<outcome>, and a final outcome removes owed/<id>.
 * Every file in out/ is published on handoff.<origin>.receipt.<host> with
 * Nats-Msg-Id "<id>:<outcome>" until its PubAck, which removes it: a
 * SIGKILL anywhere publishes it again after the restart, and the stream's
 * dedup and the origin's record drop a second copy.
 *
 * The origin: a message on handoff.<host>.receipt.> is a receipt.  It is
 * applied only when it verifies with a key of host_pubkey_dir/<HOST>.pub,
 * names this host as origin, its Nats-Msg-Id is its own id and outcome, the
 * id was relayed from here to that very host (receipts/sent/<id> names the
 * archived item) and the outcome is not recorded yet; else it is dropped
 * and counted.  The record is the archived item's .outcome: its outcome
 * stays "relayed", remote_outcome, remote_host, remote_at, remote_reason
 * and remote_detail beside it (and remote_outcomes, each applied once), so
 * it lives as long as the archived item. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "layout.h"
#include "log.h"
#include "receipt.h"
#include "receipt_int.h"
#include "relay_queue.h"
#include "spool.h"

static const char *const finals[] = { "consumed", "expired", "rejected", "canceled" };

bool receipt_is_final(const char *o)
{
        for (size_t i = 0; i < ELEMENTSOF(finals); i++)
                if (!strcmp(o, finals[i]))
                        return true;
        return false;
}

bool receipt_is_outcome(const char *o)
{
        return o && (receipt_is_final(o) || !strcmp(o, "delivered"));
}

static int open_sub(int dirfd, const char *name)
{
        if (mkdirat(dirfd, name, 0750) < 0 && errno != EEXIST)
                return -errno;
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* A small file of ours, NUL-terminated, or NULL. */
char *receipt_read_small(int dirfd, const char *name, size_t max, size_t *ret_len)
{
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        char *buf = NULL;
        size_t len = 0;

        if (fd < 0 || read_all(fd, max, 0, &buf, &len) < 0)
                return NULL;
        if (ret_len)
                *ret_len = len;
        return buf;
}

/* dirfd/name, just written: synced at the next spool_flush(), before the
 * outcome it precedes.  Without room, synced now. */
int receipt_note_unsynced(struct relay *r, int dirfd, const char *name)
{
        struct receipts *rc = r->rc;

        if (!r->sp->cfg->fsync)
                return 0;
        if (rc->n_unsynced == rc->cap_unsynced) {
                size_t cap = rc->cap_unsynced ? 2 * rc->cap_unsynced : 64;
                void *p = cap <= 65536 ? realloc(rc->unsynced, cap * sizeof(*rc->unsynced)) : NULL;
                if (!p) {
                        int rets[1];
                        return fsync_many_at(&dirfd, &name, 1, rets);
                }
                rc->unsynced = p;
                rc->cap_unsynced = cap;
        }
        if (xsnprintf(rc->unsynced[rc->n_unsynced].name, sizeof(rc->unsynced[0].name), "%s", name) < 0)
                return -ENAMETOOLONG;
        rc->unsynced[rc->n_unsynced].fd = dirfd;
        rc->n_unsynced++;
        return 0;
}

static int flush_hook(void *ctx)
{
        struct relay *r = ctx;
        struct receipts *rc = r->rc;
        size_t n = rc->n_unsynced, k = 0;
        int q = 0;

        if (!n && !rc->owed_dirty && !rc->out_dirty)
                return 0;
        int *fds = calloc(n + 2, sizeof(int)), *rets = calloc(n + 2, sizeof(int));
        const char **names = calloc(n + 2, sizeof(char *));
        if (!fds || !rets || !names) {
                q = -ENOMEM;
                goto out;
        }
        for (; k < n; k++) {
                fds[k] = rc->unsynced[k].fd;
                names[k] = rc->unsynced[k].name;
        }
        if (rc->owed_dirty)
                fds[k++] = rc->owed_fd;
        if (rc->out_dirty)
                fds[k++] = rc->out_fd;
        if (r->sp->cfg->fsync)
                q = fsync_many_at(fds, names, k, rets);
        /* one gone since (published, or its outcome final): nothing to sync */
        for (size_t i = 0; q < 0 && i < k; i++)
                if (rets[i] < 0 && rets[i] != -ENOENT)
                        goto out;
        q = 0;
        rc->n_unsynced = 0;
        rc->owed_dirty = rc->out_dirty = false;
out:
        free(fds);
        free(rets);
        free(names);
        if (q < 0)
                spool_error(r->sp, q, "Cannot fsync receipts/");
        return q;
}

/* ---- sending: the host where the item ended ---------------------------- */

static void kick(struct relay *r);

static void on_timer(uv_timer_t *t)
{
        kick(t->data);
}

static int publish_one(struct relay *r, const char *name)
{
        struct receipts *rc = r->rc;
        char subject[160], msgid[RELAY_MSGID_MAX + 1];
        size_t len = 0;
        char *buf = receipt_read_small(rc->out_fd, name, RECEIPT_MAX, &len);
        json_t *doc;
        int q;

        if (!buf)
                return -errno ? -errno : -EIO;
        doc = json_loadb(buf, len, 0, NULL);
        const char *origin = json_string_value(json_object_get(doc, "origin"));
        const char *id = json_string_value(json_object_get(doc, "handoff_id"));
        const char *outcome = json_string_value(json_object_get(doc, "outcome"));
        if (!origin || !id || !outcome || !hd_agent_valid(origin) ||
            xsnprintf(subject, sizeof(subject), "handoff.%s.receipt.%s", origin, r->host) < 0 ||
            xsnprintf(msgid, sizeof(msgid), "%s:%s", id, outcome) < 0) {
                json_decref(doc);
                free(buf);
                return -EINVAL;
        }
        json_decref(doc);
        q = relay_publish(r, msgid, subject, buf, len);
        if (q < 0)
                return q;
        json_object_set_new(rc->pending, name, json_true());
        return 0;
}

static void kick(struct relay *r)
{
        struct receipts *rc = r->rc;
        const char *k;
        json_t *v;
        void *tmp;

        if (!rc || !r->st.ready)
                return;
        json_object_foreach_safe(rc->pending, tmp, k, v) {
                if (json_is_true(v))
                        continue;
                int q = publish_one(r, k);
                if (q == -ENOENT) {
                        json_object_del(rc->pending, k);
                } else if (q == -EINVAL) {
                        log_warning("Relay: receipts/out/%s does not read as a receipt; removed", k);
                        unlinkat(rc->out_fd, k, 0);
                        json_object_del(rc->pending, k);
                } else if (q < 0) {
                        relay_error(r, "cannot publish receipt %s: %s", k, strerror(-q));
                }
        }
}

void receipt_resend(struct relay *r)
{
        const char *k;
        json_t *v;

        if (!r->rc)
                return;
        json_object_foreach(r->rc->pending, k, v)
                json_object_set_new(r->rc->pending, k, json_false());
        kick(r);
}

void receipt_puback(struct relay *r, const char *msg_id, bool ok, const char *err, int64_t now)
{
        struct receipts *rc = r->rc;
        char name[NAME_MAX + 1];
        const char *colon = strrchr(msg_id, ':');

        (void)now;
        if (!rc || !colon || xsnprintf(name, sizeof(name), "%.*s.%s", (int)(colon - msg_id),
                                       msg_id, colon + 1) < 0)
                return;
        if (!json_is_true(json_object_get(rc->pending, name)))
                return;
        if (ok) {
                if (unlinkat(rc->out_fd, name, 0) < 0 && errno != ENOENT)
                        spool_error(r->sp, -errno, "Cannot remove receipts/out/%s", name);
                json_object_del(rc->pending, name);
                r->st.receipts_sent++;
                log_debug("Relay: receipt %s published", msg_id);
                return;
        }
        json_object_set_new(rc->pending, name, json_false());
        r->st.publish_errors++;
        if (strcmp(r->st.last_error + (strncmp(r->st.last_error, "receipt: ", 9) ? 0 : 9), err))
                log_warning("Relay: publish of receipt %s failed: %s; retrying", msg_id, err);
        relay_error(r, "receipt: %s", err);
        if (rc->timer_open && !uv_is_active((uv_handle_t *)&rc->timer))
                uv_timer_start(&rc->timer, on_timer, RECEIPT_RETRY_MS, 0);
}

void receipt_owe(struct relay *r, const char *id, const char *origin)
{
        struct receipts *rc = r->rc;
        int q;

        if (!rc || !origin[0] || !hd_agent_valid(origin) || !strcmp(origin, r->host))
                return;
        if (!rc->key) {
                if (json_object_size(rc->origins) < 65536)
                        json_object_set_new(rc->origins, id, json_string(origin));
                return;
        }
        /* a message redelivered after a crash: owed once */
        bool known = faccessat(rc->owed_fd, id, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
        q = write_atomic(rc->owed_fd, id, origin, strlen(origin), 0640, 0);
        if (q == 0 && !known)
                rc->n_owed++;
        if (q == 0)
                q = receipt_note_unsynced(r, rc->owed_fd, id);
        if (q < 0) {
                spool_error(r->sp, q, "Cannot write receipts/owed/%s", id);
                return;
        }
        rc->owed_dirty = true;
}

bool receipt_sending(const struct relay *r)
{
        return r->rc && r->rc->key;
}

int receipt_sync(struct relay *r)
{
        return r->rc ? flush_hook(r) : 0;
}

/* The id of handoff/name (ID.json), or false. */
static bool name_id(const char *name, char *id, size_t n)
{
        if (!name || layout_strip(name, ".json", id, n) < 0)
                return false;
        return hd_id_valid(id);
}

static bool owed_origin(struct receipts *rc, const char *id, char *buf, size_t n)
{
        size_t len = 0;

        if (!rc->key) {
                const char *o = json_string_value(json_object_get(rc->origins, id));
                if (o)
                        snprintf(buf, n, "%s", o);
                return o != NULL;
        }
        _cleanup_free_ char *s = receipt_read_small(rc->owed_fd, id, 64, &len);

        if (!s || !hd_agent_valid(s))
                return false;
        snprintf(buf, n, "%s", s);
        return true;
}

static bool origin_hook(void *ctx, const char *name, char *buf, size_t n)
{
        struct relay *r = ctx;
        char id[NAME_MAX + 1];

        return r->rc && name_id(name, id, sizeof(id)) && owed_origin(r->rc, id, buf, n);
}

static int receipt_write(struct relay *r, const char *id, const char *origin, const char *outcome,
                         const char *reason, const char *detail, int64_t now)
{
        struct receipts *rc = r->rc;
        char at[HD_TIME_MAX], name[NAME_MAX + 1];
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_t *doc = NULL;
        size_t len;
        int q;

        hd_time_format(now, at, sizeof(at));
        doc = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "type", "handoff-receipt",
                        "version", 1, "handoff_id", id, "outcome", outcome, "reason",
                        reason ? reason : "", "detail", detail ? detail : "", "host", r->host,
                        "origin", origin, "at", at);
        if (!doc)       /* a detail that is no UTF-8 */
                doc = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "type",
                                "handoff-receipt", "version", 1, "handoff_id", id, "outcome",
                                outcome, "reason", reason ? reason : "", "detail", "",
                                "host", r->host, "origin", origin, "at", at);
        if (!doc)
                return -ENOMEM;
        q = hd_sign(doc, rc->key);
        if (q < 0)
                return q;
        q = hd_canon_dump(doc, NULL, &buf, &len);
        if (q < 0)
                return q;
        if (xsnprintf(name, sizeof(name), "%s.%s", id, outcome) < 0)
                return -ENAMETOOLONG;
        /* Synced with the outcome's own directories, before them. */
        q = write_atomic(rc->out_fd, name, buf, len, 0640, 0);
        if (q == 0)
                q = receipt_note_unsynced(r, rc->out_fd, name);
        if (q < 0)
                return q;
        rc->out_dirty = true;
        json_object_set_new(rc->pending, name, json_false());
        return 0;
}

static void outcome_hook(void *ctx, const char *id, const char *name, const char *outcome,
                         const char *reason, const char *detail, int64_t now)
{
        struct relay *r = ctx;
        struct receipts *rc = r->rc;
        char nid[NAME_MAX + 1], origin[80];
        int q;

        if (!rc)
                return;
        if (!id || !hd_id_valid(id)) {
                if (!name_id(name, nid, sizeof(nid)))
                        return;
                id = nid;
        }
        if (!owed_origin(rc, id, origin, sizeof(origin)))
                return;         /* not relayed here, or its final receipt is written */
        if (rc->key) {
                q = receipt_write(r, id, origin, outcome, reason, detail, now);
                if (q < 0) {
                        spool_error(r->sp, q, "Cannot write the receipt of %s (%s) for %s", id,
                                    outcome, origin);
                        return;
                }
                log_decision(LOG_INFO, id, NULL, "receipt", outcome, "Receipt for %s to %s: %s", id,
                             origin, outcome);
                kick(r);
        }
        if (!rc->key) {
                if (receipt_is_final(outcome))
                        json_object_del(rc->origins, id);
        } else if (receipt_is_final(outcome) && unlinkat(rc->owed_fd, id, 0) == 0) {
                if (rc->n_owed > 0)
                        rc->n_owed--;
                if (r->sp->cfg->fsync)
                        rc->owed_dirty = true;
        }
}

void receipt_refused(struct relay *r, const char *id, const char *origin, const char *reason,
                     const char *detail, int64_t now)
{
        int q;

        if (!receipt_sending(r) || !hd_id_valid(id) || !hd_agent_valid(origin) ||
            !strcmp(origin, r->host))
                return;
        /* synced by receipt_sync() before the message is acked */
        q = receipt_write(r, id, origin, "rejected", reason, detail, now);
        if (q < 0) {
                spool_error(r->sp, q, "Cannot write the receipt of %s (rejected) for %s", id, origin);
                return;
        }
        log_decision(LOG_INFO, id, NULL, "receipt", "rejected", "Receipt for %s to %s: rejected",
                     id, origin);
        kick(r);
}

/* ---- start and stop ----------------------------------------------------- */

int receipt_start(struct relay *r)
{
        struct spool *sp = r->sp;
        struct receipts *rc;
        char *err = NULL;
        int q;

        rc = calloc(1, sizeof(*rc));
        if (!rc)
                return -ENOMEM;
        rc->dir_fd = rc->owed_fd = rc->out_fd = rc->sent_fd = rc->pub_fd = -1;
        rc->pending = json_object();
        rc->origins = json_object();
        r->rc = rc;
        if (!rc->pending || !rc->origins)
                return -ENOMEM;
        if ((q = rc->dir_fd = open_sub(sp->root_fd, "receipts")) < 0 ||
            (q = rc->owed_fd = open_sub(rc->dir_fd, "owed")) < 0 ||
            (q = rc->out_fd = open_sub(rc->dir_fd, "out")) < 0 ||
            (q = rc->sent_fd = open_sub(rc->dir_fd, "sent")) < 0)
                return log_error_errno(q, "Cannot open receipts/ in the spool");
        /* What handoffd -n checked, and the start before the spool: the
         * same code, again now that they are kept. */
        q = config_relay_keys(sp->cfg, &rc->key, &rc->pub_fd, &err);
        if (q < 0) {
                log_error("%s", err ? err : strerror(-q));
                free(err);
                return q;
        }
        if (rc->pub_fd >= 0 && !(rc->pub_dir = strdup(sp->cfg->relay.host_pubkey_dir)))
                return -ENOMEM;
        /* What a crash left to publish; our temp names go. */
        DIR *d = opendir_at(rc->out_fd);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                if (de->d_name[0] == '.') {
                        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                                unlinkat(rc->out_fd, de->d_name, 0);
                        continue;
                }
                json_object_set_new(rc->pending, de->d_name, json_false());
        }
        if (d)
                closedir(d);
        /* receipts/sent/ entries whose archived item retention pruned (or
         * whose final receipt never came): gone with it. */
        d = opendir_at(rc->sent_fd);
        while (d && (de = readdir(d))) {
                if (de->d_name[0] == '.') {
                        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                                unlinkat(rc->sent_fd, de->d_name, 0);
                        continue;
                }
                _cleanup_free_ char *an = receipt_read_small(rc->sent_fd, de->d_name, NAME_MAX, NULL);
                if (!an || !hd_name_safe(an) || !spool_exists_at(sp->fd[SD_ARCHIVE], an))
                        unlinkat(rc->sent_fd, de->d_name, 0);
                else
                        rc->n_awaited++;
        }
        if (d)
                closedir(d);
        /* what a crash left owed (the files are read when an outcome comes) */
        d = opendir_at(rc->owed_fd);
        while (d && (de = readdir(d)))
                if (de->d_name[0] != '.')
                        rc->n_owed++;
        if (d)
                closedir(d);
        /* Last: nothing fails after it (relay.c, "handles"). */
        uv_timer_init(r->loop, &rc->timer);
        rc->timer.data = r;
        rc->timer_open = true;
        r->n_handles++;
        sp->relay.outcome = outcome_hook;
        sp->relay.origin = origin_hook;
        sp->relay.flush = flush_hook;
        log_info("Relay: receipts: %s, %s; %zu waiting to be published",
                 rc->key ? "signed and sent for relayed items" : "not sent ([relay] host_key not set)",
                 rc->pub_fd >= 0 ? "accepted from the hosts of host_pubkey_dir"
                                 : "not accepted ([relay] host_pubkey_dir not set)",
                 json_object_size(rc->pending));
        return 0;
}

/* Why receipts from a [remote] host would be dropped now, as the start
 * checks it (a directory or a HOST.pub others may write, a HOST.pub gone
 * or broken), looked at for each status: it can change while the daemon
 * runs, and a dropped receipt is not sent again.  NULL: none. */
static char *accept_problem(struct relay *r)
{
        struct receipts *rc = r->rc;
        char *err = NULL, *p = NULL;
        int q;

        if (!rc || rc->pub_fd < 0)
                return NULL;
        q = config_host_pubkeys_check(r->sp->cfg, rc->pub_dir, rc->pub_fd, &err);
        if (q < 0 && asprintf(&p, "receipts are dropped: %s", err ? err : strerror(-q)) < 0)
                p = NULL;
        free(err);
        return p;
}

json_t *receipt_status(struct relay *r)
{
        struct receipts *rc = r->rc;
        bool sending = rc && rc->key, accepting = rc && rc->pub_fd >= 0;
        _cleanup_free_ char *problem = accept_problem(r);

        return json_pack("{s:b, s:b, s:s?, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                         "sending", sending, "accepting", accepting, "problem", problem,
                         "owed", (json_int_t)(sending ? rc->n_owed : 0),
                         "queued", (json_int_t)(rc ? json_object_size(rc->pending) : 0),
                         "awaited", (json_int_t)(accepting ? rc->n_awaited : 0),
                         "sent", (json_int_t)r->st.receipts_sent,
                         "applied", (json_int_t)r->st.receipts_applied,
                         "duplicate", (json_int_t)r->st.receipts_duplicate,
                         "dropped", (json_int_t)r->st.receipts_bad);
}

void receipt_stop(struct relay *r, uv_close_cb closed)
{
        if (r->rc && r->rc->timer_open) {
                uv_close((uv_handle_t *)&r->rc->timer, closed);
                r->rc->timer_open = false;
        }
}

void receipt_free(struct relay *r)
{
        struct receipts *rc = r->rc;

        if (!rc)
                return;
        int fds[] = { rc->dir_fd, rc->owed_fd, rc->out_fd, rc->sent_fd, rc->pub_fd };
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        hd_key_free(rc->key);
        free(rc->pub_dir);
        free(rc->unsynced);
        json_decref(rc->pending);
        json_decref(rc->origins);
        free(rc);
        r->rc = NULL;
}
