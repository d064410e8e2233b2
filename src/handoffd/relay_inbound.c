/* Inbound relay messages (handoffd(8), RELAY): each one is
 * written as a producer would, into tmp/ and renamed into
 * handoff/<handoff_id>.json, and acked only once file and directory are
 * synced (per [spool] fsync).  From there the ordinary pipeline verifies it
 * with this host's keys, claims and delivers it, or rejects it.
 *
 * A message whose handoff_id is known here (claimed, archived or rejected
 * after authentication: ids/; or pending in handoff/ with the same bytes
 * or as a document that verifies here) is a redelivery or a second
 * publish: acked and dropped, counted as a duplicate, never rejected and
 * never delivered twice.  The id is the document's own handoff_id when it
 * parses, else its Nats-Msg-Id.
 *
 * A file that does not verify reserves no id (issue 24.2): anyone in the
 * spool's group can drop one under the name a relayed message will take.
 * When handoff/<id>.json holds other bytes that do not verify here and
 * the message does, that file is rejected for what it is (its own reason)
 * and the message takes the name; a message that does not verify either
 * goes in under a name of its own, and the pipeline decides about both.
 *
 * A message over [spool] max_file_size is never copied (relay_nats.c): it
 * is acked and counted as rejected (too_large) here.  Nor is one written
 * for an agent this daemon neither serves nor relays on ([remote]), by its
 * subject or its to_agent: acked and counted as rejected (not_served).  In
 * handoff/ it could only wait max_window for a daemon that never comes,
 * and anyone who may publish on the stream could fill the disk so.
 *
 * The origin a message names (Handoff-Origin) is the publisher's word: a
 * publisher without any key could name fifty hosts that do not exist and
 * make this one sign a "rejected" receipt for each junk message.  So a
 * receipt is owed only to an origin with a key in host_pubkey_dir (a
 * host this one takes receipts from), and for a message that does not
 * verify here RELAY_UNVERIFIED_BURST at once and then one a second per
 * origin (a host whose senders' keys this one lacks still hears of its
 * rejections). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "canon_src.h"
#include "files.h"
#include "lock.h"
#include "log.h"
#include "parts.h"
#include "receipt.h"
#include "relay_inbound.h"
#include "relay_queue.h"
#include "spool.h"
#include "store.h"

#define TMP_PREFIX ".relay."

/* A relayed or pending document, parsed (or NULL) from the bytes src
 * tells (canon_src.h; NULL: none): does it verify here, now, as the
 * intake would find?  With src, the MAC or signature covers those bytes
 * as they are when they are canonical, as the intake's does: the
 * document is not written again for it. */
static bool verifies(struct spool *sp, const json_t *doc, const struct canon_src *src,
                     int64_t now, hd_verdict *v)
{
        const struct config *c = sp->cfg;
        hd_policy pol = { .max_clock_skew_s = c->max_clock_skew, .max_window_s = c->max_window };
        hd_payload_opts po = { .roles = (const char *const *)c->roles };

        if (!doc)
                return false;
        return canon_src_verify(doc, src, config_key_lookup, (void *)c, &pol, &po, now, v) == 0;
}

enum id_state {
        ID_FREE,        /* nothing holds it here */
        ID_KNOWN,       /* a verified document holds it, or these very bytes */
        ID_SQUATTED,    /* handoff/NAME: other bytes that do not verify here */
};

/* Who holds id here?  For ID_SQUATTED, *sv says why handoff/NAME fails
 * and *lock is the inode lock (lock.h) taken on it (0: none); <0: error,
 * -EAGAIN when another daemon is deciding about that file right now. */
static int id_state(struct spool *sp, const char *id, const char *name,
                    const struct relay_in *in, int64_t now, hd_verdict *sv, uint64_t *lock)
{
        hd_limits lim = { .max_size = sp->cfg->max_file_size, .max_depth = HD_DEFAULT_MAX_DEPTH };
        _cleanup_free_ char *buf = NULL;
        struct canon_src src;
        json_t *doc = NULL;
        struct stat st;
        size_t len;
        int fd = -1, r;

        *lock = 0;
        if (spool_id_seen(sp, id))
                return ID_KNOWN;
        r = hd_open_at(sp->fd[SD_HANDOFF], name, &fd, sv);
        if (r == -ENOENT)
                return ID_FREE;
        if (r == -EBADMSG)
                return ID_SQUATTED;     /* not a plain file: nothing reads it */
        if (r < 0)
                return r;
        if (fstat(fd, &st) < 0) {
                r = -errno;
                goto out;
        }
        r = lock_try(sp->lock_fd, lock_off_inode(st.st_dev, st.st_ino), true);
        if (r < 0)
                goto out;
        *lock = lock_off_inode(st.st_dev, st.st_ino);
        r = read_fd_stat(fd, &st, name, sp->cfg->max_file_size, &buf, &len, sv);
        if (r == -EBADMSG)
                r = ID_SQUATTED;
        else if (r < 0)
                ;
        else if (len == in->len && !memcmp(buf, in->data, len))
                r = ID_KNOWN;
        else if (canon_src_parse(buf, len, &lim, &doc, &src, sv) < 0)
                r = ID_SQUATTED;
        else
                r = verifies(sp, doc, &src, now, sv) ? ID_KNOWN : ID_SQUATTED;
out:
        json_decref(doc);
        close(fd);
        if (r != ID_SQUATTED && *lock) {
                lock_release(sp->lock_fd, *lock);
                *lock = 0;
        }
        return r;
}

/* The handoff_id the message itself names, else its Nats-Msg-Id; its
 * document in *ret_doc (NULL when it does not parse) and where its
 * canonical bytes are in in->data (*src). */
static void message_id(struct spool *sp, const struct relay_in *in, char *id, size_t n,
                       json_t **ret_doc, struct canon_src *src)
{
        hd_limits lim = { .max_size = sp->cfg->max_file_size, .max_depth = HD_DEFAULT_MAX_DEPTH };
        json_t *doc = NULL;
        hd_verdict v;
        const char *s = NULL;

        *src = (struct canon_src){ 0 };
        if (in->data && canon_src_parse(in->data, in->len, &lim, &doc, src, &v) == 0)
                s = handoff_unverified_id(doc);
        if (!(s && hd_id_valid(s) && xsnprintf(id, n, "%s", s) >= 0) &&
            xsnprintf(id, n, "%s", in->msg_id) < 0)
                id[0] = '\0';          /* no usable id: the pipeline decides */
        *ret_doc = doc;
}
/* tmp/.relay.NAME.RAND, written and synced, then renamed to handoff/NAME
 * (store_put_handoff()).  1: written; 0: NAME is there already; <0: error. */
static int write_one(struct spool *sp, const char *name, const struct relay_in *in)
{
        return store_put_handoff(sp, TMP_PREFIX, name, in->data, in->len);
}

/* The squatter at handoff/name loses to a relayed message that verifies:
 * rejected with its own reason, its id not remembered (it is not
 * authenticated).  0 (rejected, or gone meanwhile) or -errno. */
static int reject_squatter(struct spool *sp, const char *name, const char *id,
                           hd_verdict *sv, int64_t now)
{
        char detail[sizeof(sv->detail)];

        if (!sv->reason)
                sv->reason = HD_R_PARSE_ERROR;
        /* truncation only shortens the quoted detail */
        if (snprintf(detail, sizeof(detail),
                     "%.200s; handoff_id '%s' belongs to a relayed handoff that verified here",
                     sv->detail, id) < 0)
                detail[0] = '\0';
        return store_reject(sp, name, NULL, sv->reason, detail, NULL, now, NULL);
}

/* Does origin have a key here, host_pubkey_dir/ORIGIN.pub?  origin is
 * a valid name (relay_queue.c), so no path of its own.  Looked at once
 * a batch for the batch's origin (its messages mostly come from one
 * host): a key added or removed is seen from the next batch on. */
static bool origin_keyed(struct relay *r, const char *origin)
{
        const char *dir = r->sp->cfg->relay.host_pubkey_dir;
        char p[PATH_MAX];
        struct stat st;

        if (!dir || !origin[0])
                return false;
        if (r->keyed_origin[0] && !strcmp(r->keyed_origin, origin))
                return r->keyed;
        if (xsnprintf(p, sizeof(p), "%s/%s.pub", dir, origin) < 0)
                return false;
        r->keyed = stat(p, &st) == 0 && S_ISREG(st.st_mode);
        if (xsnprintf(r->keyed_origin, sizeof(r->keyed_origin), "%s", origin) < 0)
                r->keyed_origin[0] = '\0';
        return r->keyed;
}

/* May a receipt for id be owed to in's origin (doc: the message's
 * document, verified: whether it verifies here)?  With receipts not sent
 * (no host_key), always: the origin is only kept for a rejection's
 * detail, nothing is signed. */
static bool receipt_due(struct relay *r, const struct relay_in *in, const char *id,
                        bool verified, int64_t now)
{
        struct relay_owed_rate *e;
        bool added;

        if (!in->origin[0] || !receipt_sending(r))
                return true;
        if (!origin_keyed(r, in->origin)) {
                r->st.receipts_withheld++;
                log_debug("Relay: no receipt for %s to host %s: no key of that host in "
                          "host_pubkey_dir", id, in->origin);
                return false;
        }
        if (verified)
                return true;
        e = dict_put(&r->unverified, in->origin, &added);
        if (!e)
                return false;   /* out of memory: none, as over the rate */
        if (added)
                *e = (struct relay_owed_rate){ .credit_usec = RELAY_UNVERIFIED_BURST * 1000000LL,
                                               .at = now };
        if (now > e->at) {
                e->credit_usec += now - e->at;
                if (e->credit_usec > RELAY_UNVERIFIED_BURST * 1000000LL)
                        e->credit_usec = RELAY_UNVERIFIED_BURST * 1000000LL;
        }
        e->at = now;
        if (e->credit_usec >= 1000000) {
                e->credit_usec -= 1000000;
                e->said = false;
                return true;
        }
        r->st.receipts_withheld++;
        if (!e->said)
                log_notice("Relay: messages from host %s that do not verify here come faster than "
                           "%d at once and then 1 a second: rejected without a receipt until they "
                           "slow down", in->origin, RELAY_UNVERIFIED_BURST);
        e->said = true;
        return false;
}

/* Where a relayed message may go: an agent this daemon serves, or one it
 * relays on. */
static bool takes(const struct config *c, const char *agent)
{
        return agent && agent[0] && (config_agent(c, agent) || config_remote(c, agent));
}

/* Refused unwritten: for an agent this daemon does not take.  Its origin
 * hears it (a receipt, when this host sends them) only when it verifies
 * here: what nobody authenticated says nothing of anyone's handoff. */
static void refuse(struct relay *r, const struct relay_in *in, const char *id, const json_t *doc,
                   const struct canon_src *src, const char *to, int64_t now)
{
        struct spool *sp = r->sp;
        const char *agent = to && !takes(sp->cfg, to) ? to : in->agent;
        char qa[200], detail[400];
        hd_verdict v;

        sp->st.rejected[HD_R_NOT_SERVED]++;
        log_quote(agent[0] ? agent : "(none)", qa, sizeof(qa));
        snprintf(detail, sizeof(detail), "came through the relay from host %s for agent %s, "
                 "not served by this host", in->origin[0] ? in->origin : "(unknown)", qa);
        log_decision(LOG_NOTICE, id[0] ? id : NULL, hd_agent_valid(agent) ? agent : NULL, "rejected",
                     hd_reason_name(HD_R_NOT_SERVED), "Relay: refused message %s: not_served: %s",
                     id[0] ? id : "(no id)", detail);
        if (id[0] && in->origin[0] && receipt_sending(r) && verifies(sp, doc, src, now, &v) &&
            receipt_due(r, in, id, true, now)) {
                receipt_caps(r, in->origin, in->batch_ok);
                receipt_refused(r, id, in->origin, hd_reason_name(HD_R_NOT_SERVED), detail, now);
        }
}

/* One message: written into handoff/ (1), dropped as known or refused
 * (0), or left unacked for a redelivery (<0, reported here when it is an
 * error). */
static int inbound_one(struct relay *r, struct relay_in *in, int64_t now)
{
        struct spool *sp = r->sp;
        char id[RELAY_ID_MAX + 1], name[NAME_MAX + 1];
        struct canon_src src;
        json_t *doc = NULL;
        hd_verdict sv = { 0 }, v;
        uint64_t lock = 0;
        bool own_name = false;
        int q, k = ID_FREE;

        message_id(sp, in, id, sizeof(id), &doc, &src);
        const char *to = handoff_unverified_to(doc);
        if (!takes(sp->cfg, in->agent) || (to && !takes(sp->cfg, to))) {
                refuse(r, in, id, doc, &src, to, now);
                q = 0;
                goto out;
        }
        if (id[0] && xsnprintf(name, sizeof(name), "%s.json", id) < 0)
                id[0] = '\0';
        if (id[0]) {
                k = id_state(sp, id, name, in, now, &sv, &lock);
                if (k == -EAGAIN) {
                        q = -EAGAIN;    /* another daemon decides about it: later */
                        goto out;
                }
                if (k < 0) {
                        q = k;
                        spool_error(sp, q, "Cannot look at handoff/%s", name);
                        goto out;
                }
        }
        if (k == ID_KNOWN) {
                r->st.duplicates++;
                log_decision(LOG_INFO, id, NULL, "duplicate", NULL,
                             "Relay: dropped %s, known here already", id);
                q = 0;
                goto out;
        }
        if (k == ID_SQUATTED) {
                if (verifies(sp, doc, &src, now, &v)) {
                        q = reject_squatter(sp, name, id, &sv, now);
                        if (q < 0) {
                                spool_error(sp, q, "Cannot reject handoff/%s", name);
                                goto out;
                        }
                } else {
                        /* Neither verifies: both go through the pipeline. */
                        own_name = true;
                }
        }
        if (!id[0] || own_name) {
                /* No usable id, or its name taken: the pipeline decides
                 * (parse_error, bad_id, bad_mac, ...). */
                char rnd[17];
                q = name_hex(rnd, 8);
                if (q < 0)
                        goto out;
                q = xsnprintf(name, sizeof(name), "relay-%s.json", rnd);
                if (q < 0)
                        goto out;
        }
        /* Verified here already when its name was taken by a squatter. */
        bool verified = (k == ID_SQUATTED && !own_name) ||
                        (receipt_sending(r) && verifies(sp, doc, &src, now, &v));
        /* How its origin takes receipts, as a message that verifies says
         * it (the header is not signed: junk under another's name must
         * not make this host send batches to an origin that drops them). */
        if (verified && in->origin[0])
                receipt_caps(r, in->origin, in->batch_ok);
        if (id[0] && receipt_due(r, in, id, verified, now))
                receipt_owe(r, id, in->origin);
        q = write_one(sp, name, in);
        if (q < 0) {
                spool_error(sp, q, "Cannot write relayed %s into handoff/", name);
                relay_error(r, "cannot write %s: %s", name, strerror(-q));
                goto out;
        }
        if (q == 0) {
                /* The name was taken since we looked: look again at the
                 * redelivery. */
                log_debug("Relay: handoff/%s appeared meanwhile; %s redelivered", name, id);
                q = -EAGAIN;
                goto out;
        }
        r->st.received++;
        log_decision(LOG_DEBUG, id[0] ? id : NULL, NULL, "received", NULL,
                     "Relay: received %s", name);
        /* The intake reads these bytes next: it takes the document
         * parsed of them, not parsing them again (relayed.c). */
        if (doc)
                relayed_put(&r->p->relayed, name, in->data, in->len, TAKE_PTR(doc), &src);
out:
        if (lock)
                lock_release(sp->lock_fd, lock);
        json_decref(doc);
        return q;
}

void relay_inbound_batch(struct relay *r, struct relay_batch *b, int64_t now)
{
        struct spool *sp = r->sp;
        int q;

        r->keyed_origin[0] = '\0';
        for (size_t i = 0; i < b->n; i++) {
                struct relay_in *in = &b->in[i];
                in->ack = false;
                if (in->too_large) {
                        /* Never copied, never written: refused by its
                         * length, acked so that it does not come again. */
                        in->ack = true;
                        sp->st.rejected[HD_R_TOO_LARGE]++;
                        log_decision(LOG_NOTICE, in->msg_id[0] ? in->msg_id : NULL, NULL,
                                     "rejected", hd_reason_name(HD_R_TOO_LARGE),
                                     "Relay: refused message %s: too_large: %zu bytes, "
                                     "over %s (%zu)",
                                     in->msg_id[0] ? in->msg_id : "(no Nats-Msg-Id)", in->len,
                                     in->receipt ? "a receipt's bound" : "max_file_size",
                                     in->receipt ? (size_t)RELAY_RECEIPT_MAX : r->max_msg);
                        continue;
                }
                if (!in->data)
                        continue;       /* out of memory: redelivered */
                if (in->cancel) {
                        in->ack = receipt_cancel_in(r, in) == 0;
                        continue;
                }
                if (in->receipt) {
                        enum receipt_verdict rv;
                        in->ack = receipt_in(r, in, now, &rv) == 0 && rv != RV_LATER;
                        continue;
                }
                in->ack = inbound_one(r, in, now) >= 0;
        }
        /* Durable before acked: the renames, then the verdicts. */
        q = receipt_sync(r);
        if (q == 0)
                q = store_flush(sp);
        if (q < 0) {
                spool_error(sp, q, "Cannot fsync handoff/; relayed messages not acked");
                for (size_t i = 0; i < b->n; i++)
                        b->in[i].ack = false;
        }
        relay_batch_done(r, b);
}

void relay_inbound_clean(struct relay *r)
{
        struct dirent *de;
        DIR *d;

        d = opendir_at(r->sp->fd[SD_TMP]);
        if (!d)
                return;
        while ((de = readdir(d)))
                if (!strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)))
                        (void) store_prune(r->sp, SD_TMP, de->d_name);
        closedir(d);
}
