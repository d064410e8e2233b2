/* The receipts' state: the tables of what this host owes, has to publish
 * and awaits (receipt_int.h), kept on disk as the records of
 * SPOOL/receipts/journal (receipt_journal.c) and read back from it at the
 * start; the journal's rewrite and its sync with the spool's flush; the
 * outcomes a receipt names; the receipts' start, status and stop.  Both
 * sides (receipt.c sends, receipt_in.c takes in) stand on this file and
 * never call each other.
 *
 * What each record means, applied in order:
 *   owe ID ORIGIN         ID came in from ORIGIN: owed a receipt per outcome
 *   out ID OUTCOME ORIGIN RECEIPT
 *                         signed, to publish until its PubAck; a final
 *                         OUTCOME ends what owe began
 *   pub ID OUTCOME        published: its PubAck came
 *   sent ID NAME          relayed from here, archived as NAME; awaited
 *   done ID               its final receipt applied here
 *   res ID ORIGIN         consumed here: its result still owed to ORIGIN
 *                         (an out record of consumed begins it too, one of
 *                         completed, failed or input_required ends it)
 * The files of the layout before the journal (receipts/owed/ID,
 * out/ID.OUTCOME, sent/ID) are read into it once at the start. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "lock.h"
#include "log.h"
#include "receipt.h"
#include "receipt_int.h"
#include "relay_queue.h"
#include "spool.h"
#include "store.h"

_Static_assert(RECEIPT_MAX >= 3 * HD_RESULT_MAX_SIZE, "a result's receipt fits");

static const char *const finals[] = { "consumed", "expired", "rejected", "canceled" };
/* An agent's result (handoffd(8), RESULTS): it ends what the item owes
 * its origin.  A question (input_required) ends the item too: the answer
 * comes back as a handoff of its own, the next turn of the task. */
static const char *const results[] = { "completed", "failed", "input_required" };

bool receipt_is_final(const char *o)
{
        for (size_t i = 0; i < ELEMENTSOF(finals); i++)
                if (!strcmp(o, finals[i]))
                        return true;
        return false;
}

bool receipt_is_result(const char *o)
{
        for (size_t i = 0; i < ELEMENTSOF(results); i++)
                if (!strcmp(o, results[i]))
                        return true;
        return false;
}

bool receipt_is_outcome(const char *o)
{
        return o && (receipt_is_final(o) || receipt_is_result(o) || !strcmp(o, "delivered"));
}

/* Before the spool's directories: the journal (a receipt's .outcome is
 * synced before its rename, receipt_in.c). */
int receipt_flush_hook(void *ctx)
{
        struct relay *r = ctx;
        int q = receipt_journal_sync(r);

        if (q < 0)
                spool_error(r->sp, q, "Cannot sync receipts/journal");
        return q;
}

void receipt_host_keys_drop(struct rhostkeys *k)
{
        for (size_t i = 0; i < k->n; i++)
                hd_key_free(k->keys[i]);
        k->n = 0;
        k->host[0] = '\0';
}

/* A rewrite once this many records are dead, and more than thrice the
 * live ones. */
#define RJ_DEAD_MIN 4096

static void queued_drop(void *e)
{
        free(((struct receipt_queued *)e)->receipt);
}

static void sent_drop(void *e)
{
        free(((struct receipt_sent *)e)->archive);
}

static void fwd_drop(void *e)
{
        free(((struct receipt_fwd *)e)->req);
}

static void batch_drop(void *e)
{
        free(((struct receipt_batch *)e)->keys);
}

/* The entry of key in d (dict_put()), and in *c a copy of val for it to
 * own; NULL: out of memory, d as it was. */
static void *put_copy(struct dict *d, const char *key, const char *val, char **c)
{
        void *e;

        if (!(*c = strdup(val)))
                return NULL;
        if (!(e = dict_put(d, key, NULL)))
                free(*c);
        return e;
}

static int owed_put(struct dict *d, const char *id, const char *origin)
{
        struct receipt_owed *o;

        if (strlen(origin) >= sizeof(o->origin))
                return -EINVAL;
        if (!(o = dict_put(d, id, NULL)))
                return -ENOMEM;
        snprintf(o->origin, sizeof(o->origin), "%s", origin);
        return 0;
}

int receipt_owed_put(struct receipts *rc, const char *id, const char *origin)
{
        return owed_put(&rc->owed, id, origin);
}

/* id consumed here, its result owed to origin; the oldest forgotten past
 * RECEIPT_RESULTS_MAX (an agent that never reports keeps none). */
static int results_put(struct receipts *rc, const char *id, const char *origin)
{
        struct receipt_owed *old;

        if (dict_count(&rc->results) >= RECEIPT_RESULTS_MAX && !dict_get(&rc->results, id) &&
            (old = dict_first(&rc->results)))
                dict_remove(&rc->results, old);
        return owed_put(&rc->results, id, origin);
}

/* key -> the signed receipt for origin, not published yet. */
static int queued_put(struct receipts *rc, const char *key, const char *origin, const char *receipt)
{
        char *c;
        struct receipt_queued *e = put_copy(&rc->queued, key, receipt, &c);

        if (!e)
                return -ENOMEM;
        free(e->receipt);
        e->receipt = c;
        e->len = strlen(c);
        snprintf(e->origin, sizeof(e->origin), "%s", origin);
        e->busy = false;
        return 0;
}

static int sent_put(struct receipts *rc, const char *id, const char *archive)
{
        char *c;
        struct receipt_sent *e = put_copy(&rc->sent, id, archive, &c);

        if (!e)
                return -ENOMEM;
        free(e->archive);
        e->archive = c;
        e->gone = false;
        return 0;
}

static int apply(struct receipts *rc, const struct rj_rec *rec)
{
        char key[RELAY_MSGID_MAX + 1];
        int q = 0;

        switch (rec->kind) {
        case RJ_OWE:
                q = receipt_owed_put(rc, rec->f[0], rec->f[1]);
                if (q == -EINVAL)
                        q = 0;  /* not a host: no receipt can go to it */
                break;
        case RJ_OUT:
                if (xsnprintf(key, sizeof(key), "%s:%s", rec->f[0], rec->f[1]) < 0 ||
                    strlen(rec->f[2]) >= RECEIPT_HOST_MAX)
                        return 0;       /* not one of ours: nothing to publish */
                q = queued_put(rc, key, rec->f[2], rec->f[3]);
                if (receipt_is_final(rec->f[1]))
                        dict_del(&rc->owed, rec->f[0]);
                if (q == 0 && !strcmp(rec->f[1], "consumed"))
                        q = results_put(rc, rec->f[0], rec->f[2]);
                else if (receipt_is_result(rec->f[1]))
                        dict_del(&rc->results, rec->f[0]);
                break;
        case RJ_PUB:
                if (xsnprintf(key, sizeof(key), "%s:%s", rec->f[0], rec->f[1]) >= 0)
                        dict_del(&rc->queued, key);
                break;
        case RJ_SENT:
                q = sent_put(rc, rec->f[0], rec->f[1]);
                break;
        case RJ_DONE:
                dict_del(&rc->sent, rec->f[0]);
                break;
        case RJ_RES:
                q = results_put(rc, rec->f[0], rec->f[1]);
                if (q == -EINVAL)
                        q = 0;
                break;
        default:
                break;
        }
        return q;
}

static int apply_read(void *ctx, const struct rj_rec *rec)
{
        return apply(ctx, rec);
}

int receipt_record(struct relay *r, const struct rj_rec *rec)
{
        int q = rj_append(&r->rc->j, rec);

        return q < 0 ? q : apply(r->rc, rec);
}

/* The live records; sent ones only while their archived item is there
 * (retention prunes it, and the receipt then has nothing to go to). */
static int emit(void *ctx, struct rjournal *nj)
{
        struct relay *r = ctx;
        struct receipts *rc = r->rc;
        struct receipt_owed *o;
        struct receipt_queued *e;
        struct receipt_sent *t;
        int q;

        if (rc->key)
                for (o = dict_first(&rc->owed); o; o = dict_next(o))
                        if ((q = rj_append(nj, &(struct rj_rec){ RJ_OWE,
                                                                 { dict_key(o), o->origin } })) < 0)
                                return q;
        for (o = dict_first(&rc->results); o; o = dict_next(o))
                if ((q = rj_append(nj, &(struct rj_rec){ RJ_RES,
                                                         { dict_key(o), o->origin } })) < 0)
                        return q;
        for (e = dict_first(&rc->queued); e; e = dict_next(e)) {
                char id[RELAY_MSGID_MAX + 1];
                const char *key = dict_key(e), *colon = strrchr(key, ':');
                if (!colon || xsnprintf(id, sizeof(id), "%.*s", (int)(colon - key), key) < 0)
                        continue;
                q = rj_append(nj, &(struct rj_rec){ RJ_OUT, { id, colon + 1, e->origin, e->receipt } });
                if (q < 0)
                        return q;
        }
        for (t = dict_first(&rc->sent); t; t = dict_next(t)) {
                t->gone = !spool_exists_at(r->sp->fd[SD_ARCHIVE], t->archive);
                if (!t->gone &&
                    (q = rj_append(nj, &(struct rj_rec){ RJ_SENT, { dict_key(t), t->archive } })) < 0)
                        return q;
        }
        return 0;
}

static int rewrite(struct relay *r)
{
        struct receipt_sent *t, *nx;
        int q = rj_rewrite(&r->rc->j, emit, r);

        /* what emit left out is gone from the table too */
        if (q == 0) {
                DICT_FOREACH_SAFE(t, nx, &r->rc->sent)
                        if (t->gone)
                                dict_remove(&r->rc->sent, t);
                r->rc->sent_kept = dict_count(&r->rc->sent);
        }
        return q;
}

int receipt_journal_sync(struct relay *r)
{
        struct receipts *rc = r->rc;
        size_t n_sent = dict_count(&rc->sent);
        size_t live = (rc->key ? dict_count(&rc->owed) : 0) + dict_count(&rc->results) +
                      dict_count(&rc->queued) + n_sent;
        size_t dead = rc->j.n_rec > live ? rc->j.n_rec - live : 0;

        /* Also when the awaited items doubled since the last rewrite:
         * those of a host that sends no receipts would stay in memory
         * beyond their archived items otherwise. */
        if ((dead >= RJ_DEAD_MIN && dead > 3 * live) ||
            (n_sent >= RJ_DEAD_MIN && n_sent >= 2 * rc->sent_kept))
                return rewrite(r);
        return rj_sync(&rc->j);
}

/* ---- the layout before the journal ---------------------------------- */

static char *read_small(int dirfd, const char *name, size_t max)
{
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        char *buf = NULL;
        size_t len = 0;

        if (fd < 0 || read_all(fd, max, 0, &buf, &len) < 0)
                return NULL;
        return buf;
}

/* One file of owed/, out/ or sent/ as its record, or 0 when it is none. */
static int import_one(struct relay *r, const char *sub, int fd, const char *name)
{
        _cleanup_free_ char *s = read_small(fd, name, RECEIPT_MAX);
        _cleanup_json_ json_t *doc = NULL;
        char id[NAME_MAX + 1];

        if (!s || name[0] == '.')
                return 0;
        if (!strcmp(sub, "owed"))
                return hd_id_valid(name) && hd_agent_valid(s)
                       ? receipt_record(r, &(struct rj_rec){ RJ_OWE, { name, s } }) : 0;
        if (!strcmp(sub, "sent"))
                return hd_id_valid(name) && hd_name_safe(s)
                       ? receipt_record(r, &(struct rj_rec){ RJ_SENT, { name, s } }) : 0;
        const char *dot = strrchr(name, '.');
        doc = json_loads(s, 0, NULL);
        const char *origin = json_string_value(json_object_get(doc, "origin"));
        if (!dot || xsnprintf(id, sizeof(id), "%.*s", (int)(dot - name), name) < 0 ||
            !hd_id_valid(id) || !receipt_is_outcome(dot + 1) || !origin || !hd_agent_valid(origin) ||
            strchr(s, '\n'))
                return 0;
        return receipt_record(r, &(struct rj_rec){ RJ_OUT, { id, dot + 1, origin, s } });
}

static int import_old(struct relay *r)
{
        static const char *const subs[] = { "owed", "out", "sent" };
        struct receipts *rc = r->rc;
        struct dirent *de;
        int q = 0;

        for (size_t k = 0; k < ELEMENTSOF(subs); k++) {
                int fd = openat(rc->dir_fd, subs[k], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 && errno == ENOENT)
                        continue;
                if (fd < 0)
                        return -errno;
                DIR *d = opendir_at(fd);
                while (q == 0 && d && (de = readdir(d)))
                        q = import_one(r, subs[k], fd, de->d_name);
                if (d)
                        closedir(d);
                /* recorded and synced before the files go */
                if (q == 0)
                        q = rj_sync(&rc->j);
                if (q == 0 && (d = opendir_at(fd))) {
                        while ((de = readdir(d)))
                                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                                        (void) store_journal_remove(fd, de->d_name, false);
                        closedir(d);
                }
                close(fd);
                if (q < 0)
                        return q;
                if (store_journal_remove(rc->dir_fd, subs[k], true) == 0)
                        log_info("Relay: receipts/%s/ read into receipts/journal", subs[k]);
        }
        return 0;
}

/* ---- start and stop ----------------------------------------------------- */

/* dirfd/name, made if missing: its entry synced in dirfd then, or a power
 * cut takes it, and the journal in it, away. */
static int open_sub(int dirfd, const char *name, bool sync)
{
        int q;

        if (mkdirat(dirfd, name, 0750) == 0) {
                if (sync && (q = fsync_dir(dirfd)) < 0)
                        return q;
        } else if (errno != EEXIST) {
                return -errno;
        }
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int receipt_start(struct relay *r)
{
        struct spool *sp = r->sp;
        struct receipts *rc;
        char *err = NULL;
        int q;

        rc = calloc(1, sizeof(*rc));
        if (!rc)
                return -ENOMEM;
        rc->dir_fd = rc->pub_fd = rc->j.fd = -1;
        dict_init(&rc->owed, sizeof(struct receipt_owed));
        dict_init(&rc->results, sizeof(struct receipt_owed));
        dict_init_drop(&rc->fwd, sizeof(struct receipt_fwd), fwd_drop);
        dict_init_drop(&rc->queued, sizeof(struct receipt_queued), queued_drop);
        dict_init_drop(&rc->sent, sizeof(struct receipt_sent), sent_drop);
        dict_init_drop(&rc->batches, sizeof(struct receipt_batch), batch_drop);
        dict_init(&rc->batching, sizeof(struct receipt_caps));
        r->rc = rc;
        /* A second daemon with [relay] on this spool would rewrite the
         * journal at its start under the first one's O_APPEND descriptor,
         * whose records from then on went to the replaced file. */
        q = lock_try(sp->lock_fd, LOCK_OFF_RELAY, true);
        if (q == -EAGAIN) {
                log_error("Cannot start the relay: another handoffd on this spool runs it "
                          "(one daemon per spool may have [relay] servers)");
                return -EBUSY;
        }
        if (q < 0)
                return log_error_errno(q, "Cannot take the relay's lock in the spool");
        rc->relay_locked = true;
        if ((q = rc->dir_fd = open_sub(sp->root_fd, "receipts", sp->cfg->fsync)) < 0)
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
        r->takes_batches = rc->pub_fd >= 0;
        q = rj_open(&rc->j, rc->dir_fd, sp->cfg->fsync, apply_read, rc);
        if (q == 0)
                q = import_old(r);
        /* Stale sent entries go, and the file starts with the live ones. */
        if (q == 0)
                q = rewrite(r);
        if (q < 0)
                return log_error_errno(q, "Cannot read receipts/journal in the spool");
        /* Last: nothing fails after it (relay.c, "handles"). */
        uv_timer_init(r->loop, &rc->timer);
        rc->timer.data = r;
        rc->timer_open = true;
        r->n_handles++;
        log_info("Relay: receipts: %s, %s; %zu waiting to be published",
                 rc->key ? "signed and sent for relayed items" : "not sent ([relay] host_key not set)",
                 rc->pub_fd >= 0 ? "accepted from the hosts of host_pubkey_dir"
                                 : "not accepted ([relay] host_pubkey_dir not set)",
                 dict_count(&rc->queued));
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

        return json_pack("{s:b, s:b, s:s?, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
                         "s:I, s:I}",
                         "sending", sending, "accepting", accepting, "problem", problem,
                         "owed", (json_int_t)(sending ? dict_count(&rc->owed) : 0),
                         "queued", (json_int_t)(rc ? dict_count(&rc->queued) : 0),
                         "awaited", (json_int_t)(accepting ? dict_count(&rc->sent) : 0),
                         "sent", (json_int_t)r->st.receipts_sent,
                         "applied", (json_int_t)r->st.receipts_applied,
                         "duplicate", (json_int_t)r->st.receipts_duplicate,
                         "dropped", (json_int_t)r->st.receipts_bad,
                         "messages_sent", (json_int_t)r->st.receipt_msgs_sent,
                         "batches_sent", (json_int_t)r->st.receipt_batches_sent,
                         "signed", (json_int_t)r->st.receipts_signed,
                         "verified", (json_int_t)r->st.receipts_verified,
                         "batches_in", (json_int_t)r->st.receipt_batches_in);
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
        rj_close(&rc->j);
        if (rc->dir_fd >= 0)
                close(rc->dir_fd);
        if (rc->pub_fd >= 0)
                close(rc->pub_fd);
        hd_key_free(rc->key);
        for (size_t i = 0; i < ELEMENTSOF(rc->hk); i++)
                receipt_host_keys_drop(&rc->hk[i]);
        free(rc->pub_dir);
        dict_clear(&rc->owed);
        dict_clear(&rc->results);
        dict_clear(&rc->fwd);
        dict_clear(&rc->queued);
        dict_clear(&rc->sent);
        dict_clear(&rc->batches);
        dict_clear(&rc->batching);
        if (rc->relay_locked)
                lock_release(r->sp->lock_fd, LOCK_OFF_RELAY);
        free(rc);
        r->rc = NULL;
}
