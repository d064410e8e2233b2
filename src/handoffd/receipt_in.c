/* Receipts at the origin (see receipt.c for the whole): a receipt from
 * the host where a relayed item ended, verified with that host's key and
 * recorded beside the archived item. */
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

void receipt_sent(struct relay *r, const char *id, const char *name)
{
        if (!r->rc || r->rc->pub_fd < 0)
                return;
        /* Without a sync: a lost one is found by a look through archive/. */
        bool known = faccessat(r->rc->sent_fd, id, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
        int q = write_atomic(r->rc->sent_fd, id, name, strlen(name), 0640, 0);
        if (q == 0 && !known)
                r->rc->n_awaited++;
        if (q < 0)
                log_warning_errno(q, "Cannot write receipts/sent/%s", id);
}

/* The archive name of the item relayed as id, or false. */
static bool find_archived(struct relay *r, const char *id, char *name, size_t n)
{
        struct spool *sp = r->sp;
        _cleanup_free_ char *s = receipt_read_small(r->rc->sent_fd, id, NAME_MAX, NULL);
        struct dirent *de;
        DIR *d;

        if (s && hd_name_safe(s) && spool_exists_at(sp->fd[SD_ARCHIVE], s))
                return xsnprintf(name, n, "%s", s) >= 0;
        d = opendir_at(sp->fd[SD_ARCHIVE]);
        if (!d)
                return false;
        bool found = false;
        while (!found && (de = readdir(d)))
                found = de->d_name[0] != '.' && layout_archive_is(de->d_name, id) &&
                        xsnprintf(name, n, "%s", de->d_name) >= 0;
        closedir(d);
        return found;
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

/* A key of host's file that verifies doc. */
static bool verify(struct relay *r, const char *host, const json_t *doc, char *why, size_t n)
{
        hd_key *keys[HD_PUBKEYS_MAX];
        char name[NAME_MAX + 1], err[200] = "";
        size_t nk = 0;
        bool ok = false;
        hd_verdict v = { 0 };
        char *e = NULL;

        /* As the start checks it: a directory others may write holds
         * nothing to go by. */
        if (config_pubdir_check("[relay] host_pubkey_dir", r->rc->pub_dir, r->rc->pub_fd, &e) < 0) {
                snprintf(why, n, "no usable key for host %s (%s)", host, e ? e : "host_pubkey_dir");
                free(e);
                return false;
        }
        snprintf(name, sizeof(name), "%s.pub", host);
        if (hd_pubkeys_load_at(r->rc->pub_fd, name, keys, HD_PUBKEYS_MAX, &nk, err, sizeof(err)) < 0) {
                snprintf(why, n, "no usable key for host %s (%s)", host, err[0] ? err : name);
                return false;
        }
        snprintf(why, n, "host %s: no key in %s", host, name);
        for (size_t i = 0; i < nk; i++) {
                if (!ok) {
                        int q = hd_sig_check(doc, keys[i], &v);
                        if (q == 0)
                                ok = true;
                        else if (q > 0 || v.reason)
                                snprintf(why, n, "host %s: %s", host, v.detail);
                }
                hd_key_free(keys[i]);
        }
        return ok;
}

bool receipt_in(struct relay *r, const struct relay_in *in, int64_t now)
{
        struct spool *sp = r->sp;
        struct receipts *rc = r->rc;
        hd_limits lim = { .max_size = RECEIPT_MAX, .max_depth = 4 };
        _cleanup_json_ json_t *doc = NULL, *side = NULL;
        _cleanup_free_ char *buf = NULL;
        char why[400], aname[NAME_MAX + 1], sname[NAME_MAX + 16], at[HD_TIME_MAX];
        hd_verdict v;
        size_t len;
        int q;

        if (!rc || rc->pub_fd < 0) {
                /* said once: the other host sends them, this one is not
                 * set up to take them */
                if (r->st.receipts_bad++ == 0)
                        log_warning("Relay: receipts come in, but are off here ([relay] "
                                    "host_pubkey_dir not set): dropped and counted");
                return true;
        }
        if (!in->data || hd_parse(in->data, in->len, &lim, &doc, &v) < 0 || !json_is_object(doc)) {
                drop(r, NULL, "not a JSON object");
                return true;
        }
        const char *id = json_string_value(json_object_get(doc, "handoff_id"));
        const char *outcome = json_string_value(json_object_get(doc, "outcome"));
        const char *host = json_string_value(json_object_get(doc, "host"));
        const char *origin = json_string_value(json_object_get(doc, "origin"));
        const char *rat = json_string_value(json_object_get(doc, "at"));
        const char *reason = json_string_value(json_object_get(doc, "reason"));
        const char *detail = json_string_value(json_object_get(doc, "detail"));
        if (strcmp(json_string_value(json_object_get(doc, "type")) ?: "", "handoff-receipt") ||
            !id || !hd_id_valid(id) || !receipt_is_outcome(outcome) || !host || !hd_agent_valid(host) ||
            !origin || !rat) {
                drop(r, id, "not a receipt (type, handoff_id, outcome, host, origin, at)");
                return true;
        }
        if (!verify(r, host, doc, why, sizeof(why))) {
                drop(r, id, why);
                return true;
        }
        if (strcmp(origin, r->host)) {
                drop(r, id, "a receipt for another origin host");
                return true;
        }
        /* Its own Nats-Msg-Id: a signed receipt of one id published again
         * as another's is a replay. */
        char want[RELAY_MSGID_MAX + 1];
        if (xsnprintf(want, sizeof(want), "%s:%s", id, outcome) < 0 || strcmp(in->rmsg_id, want)) {
                drop(r, id, "its Nats-Msg-Id is not its own id and outcome (a replay)");
                return true;
        }
        char oname[NAME_MAX + 1];
        if (xsnprintf(oname, sizeof(oname), "%s.json", id) >= 0 && spool_exists_at(sp->fd[SD_OUTBOX], oname))
                return false;   /* its PubAck is not in yet: redelivered */
        if (!find_archived(r, id, aname, sizeof(aname)) ||
            layout_suffixed(aname, LAYOUT_OUTCOME, sname, sizeof(sname)) < 0) {
                drop(r, id, "no item of that id was relayed from here");
                return true;
        }
        if (hd_load_at(sp->fd[SD_ARCHIVE], sname, NULL, &side, &v) < 0 ||
            strcmp(json_string_value(json_object_get(side, "outcome")) ?: "", "relayed") ||
            strcmp(json_string_value(json_object_get(side, "relayed_to")) ?: "", host)) {
                drop(r, id, "the item was not relayed to that host");
                return true;
        }
        json_t *seen = json_object_get(side, "remote_outcomes");
        size_t i;
        json_t *e;
        json_array_foreach(seen, i, e)
                if (!strcmp(json_string_value(e) ?: "", outcome)) {
                        r->st.receipts_duplicate++;
                        log_decision(LOG_DEBUG, id, NULL, "receipt_duplicate", outcome,
                                     "Relay: receipt for %s (%s) known already", id, outcome);
                        return true;
                }
        if (!json_is_array(seen)) {
                seen = json_array();
                json_object_set_new(side, "remote_outcomes", seen);
        }
        json_array_append_new(seen, json_string(outcome));
        const char *cur = json_string_value(json_object_get(side, "remote_outcome"));
        if (!cur || !receipt_is_final(cur)) {
                hd_time_format(now, at, sizeof(at));
                json_object_set_new(side, "remote_outcome", json_string(outcome));
                json_object_set_new(side, "remote_host", json_string(host));
                json_object_set_new(side, "remote_at", json_string(rat));
                json_object_set_new(side, "remote_reason", json_string(reason ?: ""));
                json_object_set_new(side, "remote_detail", json_string(detail ?: ""));
                json_object_set_new(side, "receipt_at", json_string(at));
        }
        /* Synced, with the directory, before the batch is acked. */
        q = hd_canon_dump(side, NULL, &buf, &len);
        if (q == 0)
                q = write_atomic(sp->fd[SD_ARCHIVE], sname, buf, len, 0640, 0);
        if (q == 0)
                q = receipt_note_unsynced(r, sp->fd[SD_ARCHIVE], sname);
        if (q < 0) {
                spool_error(sp, q, "Cannot record the receipt of %s", id);
                return false;
        }
        sp->dirty[SD_ARCHIVE] = true;
        r->st.receipts_applied++;
        log_decision(LOG_INFO, id, NULL, "receipt", outcome, "Receipt for %s from %s: %s%s%s", id,
                     host, outcome, reason && *reason ? ": " : "", reason ? reason : "");
        if (receipt_is_final(outcome) && unlinkat(rc->sent_fd, id, 0) == 0 && rc->n_awaited > 0)
                rc->n_awaited--;
        return true;
}
