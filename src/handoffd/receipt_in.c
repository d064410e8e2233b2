/* Receipts at the origin (receipt.c is the sending host): a receipt from
 * the host where a relayed item ended, verified with that host's key and
 * recorded beside the archived item.
 *
 * A receipt is applied only when it verifies with a key of
 * host_pubkey_dir/<HOST>.pub, names this host as origin, its Nats-Msg-Id
 * is its own id and outcome, the id was relayed from here to that very
 * host (the journal's sent record names the archived item, else a look
 * through archive/) and the outcome is not recorded yet; else it is
 * dropped and counted.  The record is the archived item's .outcome: its
 * outcome stays "relayed", remote_outcome, remote_host, remote_at,
 * remote_reason and remote_detail beside it (and remote_outcomes, each
 * applied once), so it lives as long as the archived item.
 *
 * A result (completed, failed, input_required: the agent's word, after
 * consumed) is written as the archived item's .result, the document the
 * other host recorded, before its outcome joins remote_outcomes: a crash
 * between leaves the .result, which the receipt, come again, finds there.  An
 * item whose consumed receipt says its agent reports results stays
 * awaited until its result comes.
 *
 * A batch (type handoff-receipts) is verified once, with the key of the
 * host it names; each receipt in it is then checked as a single one but
 * for its Nats-Msg-Id (the batch's signature binds it), and those of one
 * item are applied together: its .outcome read and written once. */
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
#include "store.h"
#include "store_doc.h"

void receipt_sent(struct relay *r, const char *id, const char *name)
{
        if (!r->rc || r->rc->pub_fd < 0)
                return;
        /* Not synced: a lost one is found by a look through archive/. */
        int q = receipt_record(r, &(struct rj_rec){ RJ_SENT, { id, name } });
        if (q < 0)
                log_warning_errno(q, "Cannot record in receipts/journal that %s was relayed: %m", id);
}

/* The archive name of the item relayed as id in *ret_found (false: none):
 * as its sent record names it (archive names stay until retention prunes
 * the item), else by a look through archive/.  0 or -errno: a disk that
 * cannot be read says nothing of the item. */
static int find_archived(struct relay *r, const char *id, char *name, size_t n, bool *ret_found)
{
        struct receipt_sent *e = dict_get(&r->rc->sent, id);
        struct dirent *de;
        DIR *d;

        *ret_found = false;
        if (e && hd_name_safe(e->archive)) {
                *ret_found = xsnprintf(name, n, "%s", e->archive) >= 0;
                return 0;
        }
        d = opendir_at(r->sp->fd[SD_ARCHIVE]);
        if (!d)
                return -errno;
        errno = 0;
        while (!*ret_found && (de = readdir(d)))
                *ret_found = de->d_name[0] != '.' && layout_archive_is(de->d_name, id) &&
                        xsnprintf(name, n, "%s", de->d_name) >= 0;
        int q = !*ret_found && errno ? -errno : 0;
        closedir(d);
        return q;
}

static void drop(struct relay *r, const char *id, const char *why)
{
        char q[200];

        r->st.receipts_bad++;
        relay_error(r, "receipt dropped: %s", why);
        log_decision(LOG_WARNING, id && hd_id_valid(id) ? id : NULL, NULL, "receipt_dropped", NULL,
                     "Relay: dropped a receipt%s%s: %s", id ? " for " : "",
                     id ? log_quote(id, q, sizeof(q)) : "", why);
}

/* host's keys, from host_pubkey_dir/HOST.pub: loaded again only when the
 * file is another or changed (inode, size, times, mode, owner), so that a
 * change is seen at the next receipt as the load would see it. */
static int host_keys(struct receipts *rc, const char *host, struct rhostkeys **ret, char *err,
                     size_t errlen)
{
        char name[NAME_MAX + 1];
        struct rhostkeys *k = NULL;
        struct stat st;
        int q;

        if (xsnprintf(name, sizeof(name), "%s.pub", host) < 0)
                return -ENAMETOOLONG;
        if (fstatat(rc->pub_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                memset(&st, 0, sizeof(st));     /* the load says why */
        for (size_t i = 0; i < ELEMENTSOF(rc->hk) && !k; i++)
                if (!strcmp(rc->hk[i].host, host))
                        k = &rc->hk[i];
        if (k && k->n && st.st_ino && st.st_ino == k->st.st_ino && st.st_dev == k->st.st_dev &&
            st.st_size == k->st.st_size && st.st_mode == k->st.st_mode && st.st_uid == k->st.st_uid &&
            !memcmp(&st.st_mtim, &k->st.st_mtim, sizeof(st.st_mtim)) &&
            !memcmp(&st.st_ctim, &k->st.st_ctim, sizeof(st.st_ctim))) {
                *ret = k;
                return 0;
        }
        if (!k)
                k = &rc->hk[rc->hk_next++ % ELEMENTSOF(rc->hk)];
        receipt_host_keys_drop(k);
        q = hd_pubkeys_load_at(rc->pub_fd, name, k->keys, HD_PUBKEYS_MAX, &k->n, err, errlen);
        if (q < 0) {
                k->n = 0;
                return q;
        }
        snprintf(k->host, sizeof(k->host), "%s", host);
        k->st = st;
        *ret = k;
        return 0;
}

/* An error that says nothing of host's key: the disk, the memory or the
 * descriptors ran out.  The receipt is not acked, so it comes again. */
static bool says_nothing(int e)
{
        return e == -EIO || e == -ENOMEM || e == -EMFILE || e == -ENFILE || e == -EINTR ||
               e == -ENOBUFS || e == -ENOTCONN || e == -ESTALE;
}

/* Whether a key of host's file verifies doc, in *ret_ok (why not in why);
 * -errno when the key could not be read for a reason of this host's
 * (says_nothing()). */
static int verify(struct relay *r, const char *host, const json_t *doc, char *why, size_t n,
                  bool *ret_ok)
{
        struct rhostkeys *k;
        char err[200] = "";
        hd_verdict v = { 0 };
        char *e = NULL;
        int q;

        *ret_ok = false;
        /* As the start checks it: a directory others may write holds
         * nothing to go by. */
        q = config_pubdir_check("[relay] host_pubkey_dir", r->rc->pub_dir, r->rc->pub_fd, &e);
        if (q < 0) {
                snprintf(why, n, "no usable key for host %s (%s)", host, e ? e : "host_pubkey_dir");
                free(e);
                return says_nothing(q) ? q : 0;
        }
        q = host_keys(r->rc, host, &k, err, sizeof(err));
        if (q < 0) {
                snprintf(why, n, "no usable key for host %s (%s)", host, err[0] ? err : host);
                return says_nothing(q) ? q : 0;
        }
        snprintf(why, n, "host %s: no key in %s.pub", host, host);
        for (size_t i = 0; i < k->n; i++) {
                q = hd_sig_check(doc, k->keys[i], &v);
                if (q == 0) {
                        *ret_ok = true;
                        return 0;
                }
                if (q > 0 || v.reason)
                        snprintf(why, n, "host %s: %s", host, v.detail);
                else if (says_nothing(q))
                        return q;
        }
        return 0;
}

/* d's fields are a receipt's (receipt_doc_read() done). */
static bool fields_ok(const struct rdoc *d)
{
        return !strcmp(d->type ?: "", "handoff-receipt") && d->id && hd_id_valid(d->id) &&
               receipt_is_outcome(d->outcome) && d->host && hd_agent_valid(d->host) && d->origin &&
               d->at;
}

/* Why the single receipt d->doc is dropped (*ret_drop), or NULL when it
 * is one for this host, from the host it names, signed by it, under its
 * own Nats-Msg-Id.  why is the buffer the verdict may be written into. */
static int receipt_check(struct relay *r, const struct relay_in *in, struct rdoc *d,
                         char *why, size_t n, const char **ret_drop)
{
        char want[RELAY_MSGID_MAX + 1];
        bool ok;
        int q;

        *ret_drop = NULL;
        receipt_doc_read(d);
        if (!fields_ok(d))
                *ret_drop = "not a receipt (type, handoff_id, outcome, host, origin, at)";
        else if ((q = verify(r, d->host, d->doc, why, n, &ok)) < 0)
                return q;
        else if (!ok)
                *ret_drop = why;
        else if ((r->st.receipts_verified++, strcmp(d->origin, r->host)))
                *ret_drop = "a receipt for another origin host";
        else if (receipt_is_result(d->outcome) &&
                 store_result_check(d->result, d->id, d->outcome) < 0)
                *ret_drop = "a result receipt without its result of that id and status";
        /* Its own Nats-Msg-Id: a signed receipt of one id published again
         * as another's is a replay. */
        else if (xsnprintf(want, sizeof(want), "%s:%s", d->id, d->outcome) < 0 ||
                 strcmp(in->rmsg_id, want))
                *ret_drop = "its Nats-Msg-Id is not its own id and outcome (a replay)";
        return 0;
}

/* The .outcome of the item relayed as d->id to d->host: the item's
 * archive name in aname (NAME_MAX + 1 bytes), the outcome's in sname, its
 * content in *ret_side; or why there is none in *ret_drop;
 * or -EAGAIN while the item still waits in outbox/ for its PubAck. */
static int receipt_find(struct relay *r, const struct rdoc *d, char *aname, char *sname, size_t n,
                        json_t **ret_side, const char **ret_drop)
{
        struct spool *sp = r->sp;
        char oname[NAME_MAX + 1];
        json_t *side = NULL;

        *ret_side = NULL;
        *ret_drop = NULL;
        /* A sent record is written once the item is archived. */
        if (!dict_get(&r->rc->sent, d->id) && xsnprintf(oname, sizeof(oname), "%s.json", d->id) >= 0 &&
            spool_exists_at(sp->fd[SD_OUTBOX], oname))
                return -EAGAIN;
        bool found;
        int q = find_archived(r, d->id, aname, NAME_MAX + 1, &found);
        if (q < 0)
                return q;
        if (!found || layout_suffixed(aname, LAYOUT_OUTCOME, sname, n) < 0) {
                *ret_drop = "no item of that id was relayed from here";
                return 0;
        }
        /* An I/O error is not the item's: the receipt comes again. */
        q = store_outcome_load_relayed(sp->fd[SD_ARCHIVE], sname, d->host, &side);
        if (q < 0 && q != -ENOENT && q != -EBADMSG && q != -ENOMSG)
                return q;
        if (q < 0) {
                *ret_drop = "the item was not relayed to that host";
                return 0;
        }
        *ret_side = side;
        return 0;
}

/* side written over archive/sname, the new file synced before archive/
 * (a power cut must not leave an empty file in place of the old
 * outcome): both by the batch's store_flush(), the files first, before
 * the batch is acked. */
static int receipt_store(struct relay *r, const char *sname, const json_t *side)
{
        struct spool *sp = r->sp;
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int q;

        q = hd_canon_dump(side, NULL, &buf, &len);
        if (q == 0)
                q = store_side_write_later(sp, SD_ARCHIVE, sname, buf, len);
        return q;
}

/* A result receipt's document as archive/aname's .result, unless one is
 * there (this receipt's, written before a crash): the first stands. */
static int result_store(struct relay *r, const char *aname, const struct rdoc *d)
{
        struct spool *sp = r->sp;
        char xname[NAME_MAX + 16];
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int q;

        q = layout_suffixed(aname, LAYOUT_RESULT, xname, sizeof(xname));
        if (q < 0)
                return q;
        if (spool_exists_at(sp->fd[SD_ARCHIVE], xname))
                return 0;
        q = hd_canon_dump(d->result, NULL, &buf, &len);
        if (q == 0)
                q = store_side_write_later(sp, SD_ARCHIVE, xname, buf, len);
        return q;
}

/* Nothing more is awaited for the item after this receipt: its result,
 * or a final outcome but for a consume whose agent reports results. */
static bool ends_wait(const struct rdoc *d)
{
        if (receipt_is_result(d->outcome))
                return true;
        return receipt_is_final(d->outcome) && !(!strcmp(d->outcome, "consumed") && d->completes == 1);
}

static void said_off(struct relay *r)
{
        /* said once: the other host sends them, this one is not set up to
         * take them */
        if (r->st.receipts_bad++ == 0)
                log_warning("Relay: receipts come in, but are off here ([relay] "
                            "host_pubkey_dir not set): dropped and counted");
}

/* n receipts of one id (ds, each checked and signed by the host they
 * name), in the order they came, applied to the item relayed as that id:
 * its .outcome loaded once and written once for them all.  0 with the
 * verdict in *ret, or -errno (not the receipts' fault: they come again). */
static int apply_item(struct relay *r, struct rdoc **ds, size_t n, int64_t now,
                      enum receipt_verdict *ret)
{
        struct spool *sp = r->sp;
        _cleanup_json_ json_t *side = NULL;
        char sname[NAME_MAX + 16], aname[NAME_MAX + 1];
        const char *drop_why = NULL;
        bool dup[RECEIPT_BATCH_MAX], applied = false;
        int q;

        *ret = RV_DROPPED;
        q = receipt_find(r, ds[0], aname, sname, sizeof(sname), &side, &drop_why);
        if (q == -EAGAIN) {
                *ret = RV_LATER;        /* its PubAck is not in yet: redelivered */
                return 0;
        }
        if (q < 0 && !drop_why) {
                /* Not the receipt's fault: not acked, it comes again. */
                relay_error(r, "receipt not taken in: %s", strerror(-q));
                log_warning_errno(q, "Relay: cannot take in the receipt for %s now: %m; "
                                  "it comes again", ds[0]->id);
                return q;
        }
        if (drop_why) {
                for (size_t i = 0; i < n; i++)
                        drop(r, ds[i]->id, drop_why);
                return 0;
        }
        for (size_t i = 0; i < n; i++) {
                const struct rdoc *d = ds[i];
                const struct store_remote_end end = {
                        .outcome = d->outcome, .host = d->host, .at = d->at, .reason = d->reason,
                        .detail = d->detail, .completes = d->completes,
                };
                dup[i] = false;
                q = store_outcome_add_end(side, &end, receipt_is_final, now, &dup[i]);
                if (q == 0 && !dup[i] && receipt_is_result(d->outcome))
                        q = result_store(r, aname, d);
                if (q < 0) {
                        spool_error(sp, q, "Cannot record the receipt of %s", d->id);
                        return q;
                }
                applied |= !dup[i];
        }
        if (applied && (q = receipt_store(r, sname, side)) < 0) {
                spool_error(sp, q, "Cannot record the receipt of %s", ds[0]->id);
                return q;
        }
        *ret = applied ? RV_APPLIED : RV_DUPLICATE;
        for (size_t i = 0; i < n; i++) {
                const struct rdoc *d = ds[i];
                if (dup[i]) {
                        r->st.receipts_duplicate++;
                        log_decision(LOG_DEBUG, d->id, NULL, "receipt_duplicate", d->outcome,
                                     "Relay: receipt for %s (%s) known already", d->id,
                                     d->outcome);
                } else {
                        r->st.receipts_applied++;
                        log_decision(LOG_INFO, d->id, NULL, "receipt", d->outcome,
                                     "Receipt for %s from %s: %s%s%s", d->id, d->host, d->outcome,
                                     d->reason && *d->reason ? ": " : "", d->reason ?: "");
                }
                /* A final outcome in the .outcome: nothing awaits the item
                 * any more, also when a crash came between the .outcome and
                 * its done record (the receipt, not acked then, comes again
                 * as a duplicate). */
                if (ends_wait(d) && dict_get(&r->rc->sent, d->id))
                        (void)receipt_record(r, &(struct rj_rec){ RJ_DONE, { d->id } });
                /* A cancel of it sent there is answered by how it ended. */
                if (receipt_is_final(d->outcome))
                        receipt_cancel_ended(r, d->id, sname, d->outcome);
        }
        return 0;
}

/* Why one receipt of a batch from host (its signature checked) is
 * dropped, or NULL. */
static const char *entry_check(struct relay *r, struct rdoc *d, const char *host)
{
        if (!json_is_object(d->doc))
                return "a batch's receipt that is not a JSON object";
        receipt_doc_read(d);
        if (!fields_ok(d))
                return "not a receipt (type, handoff_id, outcome, host, origin, at)";
        if (strcmp(d->host, host))
                return "a batch's receipt from another host than the batch's";
        if (strcmp(d->origin, r->host))
                return "a receipt for another origin host";
        if (receipt_is_result(d->outcome) && store_result_check(d->result, d->id, d->outcome) < 0)
                return "a result receipt without its result of that id and status";
        return NULL;
}

static int by_id(const void *a, const void *b)
{
        const struct rdoc *x = *(struct rdoc *const *)a, *y = *(struct rdoc *const *)b;
        int c = strcmp(x->id, y->id);

        /* in the order they came within an item */
        return c ? c : (x < y ? -1 : x > y);
}

/* A batch (type handoff-receipts): one signature, by the host it names,
 * over all its receipts; each then checked and applied as a single one,
 * those of one item together (apply_item()). */
static int batch_in(struct relay *r, json_t *doc, int64_t now, enum receipt_verdict *ret)
{
        const char *host = json_string_value(json_object_get(doc, "host"));
        const char *origin = json_string_value(json_object_get(doc, "origin"));
        json_t *list = json_object_get(doc, "receipts");
        size_t n = json_array_size(list), k = 0;
        _cleanup_free_ struct rdoc *ds = NULL;
        _cleanup_free_ struct rdoc **p = NULL;
        char why[400] = "";
        bool ok, later = false, applied = false, dups = false;
        int q, err = 0;

        *ret = RV_DROPPED;
        if (!host || !hd_agent_valid(host) || !origin || !json_is_array(list) || n == 0 ||
            n > RECEIPT_BATCH_MAX) {
                drop(r, NULL, "not a batch of receipts (host, origin, receipts)");
                return 0;
        }
        if ((q = verify(r, host, doc, why, sizeof(why), &ok)) < 0) {
                relay_error(r, "receipt not taken in: %s", strerror(-q));
                log_warning_errno(q, "Relay: cannot take in a batch of receipts from %s now "
                                  "(%s): %m; it comes again", host, why);
                return q;
        }
        if (!ok) {
                drop(r, NULL, why);
                return 0;
        }
        r->st.receipts_verified++;
        if (strcmp(origin, r->host)) {
                drop(r, NULL, "a batch of receipts for another origin host");
                return 0;
        }
        r->st.receipt_batches_in++;
        if (!(ds = calloc(n, sizeof(*ds))) || !(p = calloc(n, sizeof(*p))))
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                ds[i].doc = json_array_get(list, i);
                const char *bad = entry_check(r, &ds[i], host);
                if (bad)
                        drop(r, ds[i].id && hd_id_valid(ds[i].id) ? ds[i].id : NULL, bad);
                else
                        p[k++] = &ds[i];
        }
        qsort(p, k, sizeof(*p), by_id);
        for (size_t i = 0, j; i < k; i = j) {
                enum receipt_verdict v;
                for (j = i + 1; j < k && !strcmp(p[j]->id, p[i]->id); j++)
                        ;
                q = apply_item(r, p + i, j - i, now, &v);
                if (q < 0 && !err)
                        err = q;
                later |= q == 0 && v == RV_LATER;
                applied |= q == 0 && v == RV_APPLIED;
                dups |= q == 0 && v == RV_DUPLICATE;
        }
        /* Not acked while one of them waits: those applied come again as
         * duplicates. */
        *ret = later ? RV_LATER : applied ? RV_APPLIED : dups ? RV_DUPLICATE : RV_DROPPED;
        return err;
}

int receipt_in(struct relay *r, const struct relay_in *in, int64_t now, enum receipt_verdict *ret)
{
        hd_limits lim = { .max_size = RECEIPT_MAX, .max_depth = HD_DEFAULT_MAX_DEPTH + 6 };
        struct rdoc d = { 0 }, *dp = &d;
        char why[400] = "";
        const char *drop_why = NULL;
        hd_verdict v;
        int q;

        *ret = RV_DROPPED;
        if (!r->rc || r->rc->pub_fd < 0) {
                said_off(r);
                return 0;
        }
        if (!in->data || hd_parse(in->data, in->len, &lim, &d.doc, &v) < 0 ||
            !json_is_object(d.doc)) {
                drop(r, NULL, "not a JSON object");
                q = 0;
                goto out;
        }
        if (!strcmp(json_string_value(json_object_get(d.doc, "type")) ?: "", "handoff-receipts")) {
                q = batch_in(r, d.doc, now, ret);
                goto out;
        }
        q = receipt_check(r, in, &d, why, sizeof(why), &drop_why);
        if (q < 0) {
                relay_error(r, "receipt not taken in: %s", strerror(-q));
                log_warning_errno(q, "Relay: cannot take in the receipt for %s now (%s): %m; "
                                  "it comes again", d.id, why);
                goto out;
        }
        if (drop_why) {
                drop(r, d.id, drop_why);
                goto out;
        }
        q = apply_item(r, &dp, 1, now, ret);
out:
        json_decref(d.doc);
        return q;
}
