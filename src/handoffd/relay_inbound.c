/* Inbound relay messages (DESIGN.md "Scale beyond one host"): each one is
 * written as a producer would, into tmp/ and renamed into
 * handoff/<handoff_id>.json, and acked only once file and directory are
 * synced (per [spool] fsync).  From there the ordinary pipeline verifies it
 * with this host's keys, claims and delivers it, or rejects it.
 *
 * A message whose handoff_id is known here (pending in handoff/, claimed,
 * archived or rejected after authentication: ids/) is a redelivery or a
 * second publish: acked and dropped, counted as a duplicate, never
 * rejected and never delivered twice.  The id is the document's own
 * handoff_id when it parses, else its Nats-Msg-Id. */
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
#include "log.h"
#include "receipt.h"
#include "relay_inbound.h"
#include "relay_queue.h"
#include "spool.h"

#define TMP_PREFIX ".relay."

static bool known(struct spool *sp, const char *id)
{
        char name[NAME_MAX + 1];
        struct stat st;

        snprintf(name, sizeof(name), "%s.json", id);
        return fstatat(sp->fd[SD_HANDOFF], name, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
               spool_id_seen(sp, id);
}

/* The handoff_id the message itself names, else its Nats-Msg-Id. */
static void message_id(struct spool *sp, const struct relay_in *in, char *id, size_t n)
{
        hd_limits lim = { .max_size = sp->cfg->max_file_size, .max_depth = HD_DEFAULT_MAX_DEPTH };
        json_t *doc = NULL;
        hd_verdict v;
        const char *s = NULL;

        if (in->data && hd_parse(in->data, in->len, &lim, &doc, &v) == 0)
                s = json_string_value(json_object_get(doc, "handoff_id"));
        if (s && strlen(s) <= RELAY_ID_MAX && hd_id_valid(s))
                snprintf(id, n, "%s", s);
        else
                snprintf(id, n, "%s", in->msg_id);
        json_decref(doc);
}

/* tmp/.relay.NAME.RAND, written and synced, then renamed to handoff/NAME.
 * 1: written; 0: NAME is there already; <0: error. */
static int write_one(struct spool *sp, const char *name, const struct relay_in *in)
{
        char tmp[NAME_MAX + 1], rnd[17];
        size_t off = 0;
        int fd, q;

        q = random_hex(rnd, 8);
        if (q < 0)
                return q;
        if (xsnprintf(tmp, sizeof(tmp), TMP_PREFIX "%s.%s", name, rnd) < 0)
                return -ENAMETOOLONG;
        fd = openat(sp->fd[SD_TMP], tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
        if (fd < 0)
                return -errno;
        while (off < in->len) {
                ssize_t w = write(fd, in->data + off, in->len - off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0) {
                        q = -errno;
                        goto fail;
                }
                off += (size_t)w;
        }
        if (sp->cfg->fsync && fsync(fd) < 0) {
                q = -errno;
                goto fail;
        }
        close(fd);
        fd = -1;
        q = move_noreplace(sp->fd[SD_TMP], tmp, sp->fd[SD_HANDOFF], name);
        if (q == -EEXIST) {
                unlinkat(sp->fd[SD_TMP], tmp, 0);
                return 0;
        }
        if (q < 0)
                goto fail;
        sp->dirty[SD_HANDOFF] = sp->dirty[SD_TMP] = true;
        return 1;
fail:
        if (fd >= 0)
                close(fd);
        unlinkat(sp->fd[SD_TMP], tmp, 0);
        return q;
}

void relay_inbound_batch(struct relay *r, struct relay_batch *b, int64_t now)
{
        struct spool *sp = r->sp;
        size_t written = 0;
        int q;

        for (size_t i = 0; i < b->n; i++) {
                struct relay_in *in = &b->in[i];
                char id[RELAY_ID_MAX + 1], name[NAME_MAX + 1];
                in->ack = false;
                if (!in->data)
                        continue;       /* out of memory: redelivered */
                if (in->receipt) {
                        in->ack = receipt_in(r, in, now);
                        continue;
                }
                message_id(sp, in, id, sizeof(id));
                if (id[0] && known(sp, id)) {
                        in->ack = true;
                        r->st.duplicates++;
                        log_decision(LOG_INFO, id, NULL, "duplicate", NULL,
                                     "Relay: dropped %s, known here already", id);
                        continue;
                }
                if (id[0]) {
                        snprintf(name, sizeof(name), "%s.json", id);
                } else {
                        /* No usable id: the pipeline rejects it with its
                         * reason (parse_error, bad_id, ...). */
                        char rnd[17];
                        if (random_hex(rnd, 8) < 0)
                                continue;
                        snprintf(name, sizeof(name), "relay-%s.json", rnd);
                }
                if (id[0])
                        receipt_owe(r, id, in->origin);
                q = write_one(sp, name, in);
                if (q < 0) {
                        spool_error(sp, q, "Cannot write relayed %s into handoff/", name);
                        relay_error(r, "cannot write %s: %s", name, strerror(-q));
                        continue;
                }
                if (q == 0) {
                        in->ack = true;
                        r->st.duplicates++;
                        log_decision(LOG_INFO, id, NULL, "duplicate", NULL,
                                     "Relay: dropped %s, pending here already", id);
                        continue;
                }
                in->ack = true;
                written++;
                r->st.received++;
                log_decision(LOG_DEBUG, id[0] ? id : NULL, NULL, "received", NULL,
                             "Relay: received %s", name);
        }
        /* Durable before acked: the renames, then the verdicts. */
        q = receipt_sync(r);
        if (q == 0)
                q = spool_flush(sp);
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
                        unlinkat(r->sp->fd[SD_TMP], de->d_name, 0);
        closedir(d);
}
