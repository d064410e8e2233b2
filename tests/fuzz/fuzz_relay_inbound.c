/* libFuzzer target: one relayed message as the inbound path receives it,
 * without NATS.  The input is the message as a NATS header block:
 *
 *     SUBJECT\n
 *     Name: value\n          (any number; the first of a name counts)
 *     \n
 *     BODY
 *
 * relay_in_fill() turns subject, Nats-Msg-Id, Handoff-Origin and body into
 * the loop's struct relay_in as the fetch thread does, and
 * relay_inbound_batch() decides it for real: a handoff (written into
 * handoff/, dropped as known, a squatter rejected, owed in receipts/journal to its
 * origin) or a receipt on handoff.b.receipt.a (receipt_in(): its signature
 * against host_pubkey_dir/a.pub, the archived item it names).  The spool is
 * a temp dir made once per process: this host is "b" with the test-vector
 * HMAC key and an Ed25519 host key; host "a" has a public key and two
 * items archived as relayed to it.  Every CLEAN_EVERY inputs the spool's
 * handoff/, tmp/, rejected/, ids/ and receipts/ are reset.
 *
 * Properties: the batch is decided (nothing left in tmp/), a message
 * counted as received is in handoff/ with its bytes, an applied receipt
 * verifies with a's key.
 *
 * HD_FUZZ_VERBOSE=1 logs each decision; HD_FUZZ_RELAY_SEEDS=DIR writes the seed inputs (signed with the keys
 * below, at the vectors' "now") into DIR and exits. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "agents.h"
#include "config.h"
#include "files.h"
#include "fuzz.h"
#include "log.h"
#include "outbox.h"
#include "parts.h"
#include "receipt.h"
#include "relay_inbound.h"
#include "relay_queue.h"
#include "spool.h"
#include "store.h"

#define CLEAN_EVERY 256

/* tests/vectors/TEST-ONLY.key without its newline: public, test only. */
static const char vector_key[] = "TEST-ONLY handoffd vector key, not a secret, 0001";
/* Ed25519 seeds 0x40..0x5f and 0x60..0x7f: public, test only. */
static const char host_b_line[] = "ed25519-secret QEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1xdXl8= host-b\n";
static const char host_a_line[] = "ed25519-secret YGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn8= host-a\n";

/* Items relayed from here (b) to a, each with its archive name; the first
 * has a sent record in receipts/journal, the second is found by a look at archive/. */
static const char *const relayed[][2] = {
        { "relayed-0001", "1776766500-relayed-0001.json" },
        { "relayed-0002", "1776766510-alice-bob-relayed-0002.json" },
};

static char root[PATH_MAX - 128];
static uv_loop_t loop;
static struct config *cfg;
static struct spool *sp;
static struct dict unserved;     /* spool_open() says why an agent is not served */
static struct relay relay;
static struct parts parts;      /* the storage only: no cancel waits here */
static hd_key *key_a;
static int64_t now;
static unsigned runs;

static void empty_dir(int dirfd)
{
        struct dirent *de;
        DIR *d = opendir_at(dirfd);

        if (!d)
                abort();
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        unlinkat(dirfd, de->d_name, 0);
        closedir(d);
}


/* The spool as at start: nothing pending, a squatter under the id of
 * vectors/basic.json, vectors/minimal.json's id known, a's two items in
 * archive/ as relayed, receipts (re)started. */
static void reset_spool(void)
{
        static const enum spool_dir dirs[] = { SD_TMP, SD_HANDOFF, SD_REJECTED, SD_IDS };
        char side[NAME_MAX + 1], text[256];

        if (relay.rc) {
                receipt_stop(&relay, NULL);
                uv_run(&loop, UV_RUN_DEFAULT);  /* the timer's close */
                receipt_free(&relay);
                relay.rc = NULL;
        }
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                empty_dir(sp->fd[dirs[i]]);
        relayed_clear(&parts.relayed);  /* its names are gone */
        /* made by the first receipt_start() */
        int fd = openat(sp->root_fd, "receipts", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
                empty_dir(fd);
                close(fd);
        }
        if (receipt_start(&relay) < 0)
                abort();
        for (size_t i = 0; i < ELEMENTSOF(relayed); i++) {
                snprintf(side, sizeof(side), "%s.outcome", relayed[i][1]);
                snprintf(text, sizeof(text),
                         "{\"handoff_id\":\"%s\",\"outcome\":\"relayed\",\"relayed_to\":\"a\"}",
                         relayed[i][0]);
                fuzz_write_text(root, "spool/archive", relayed[i][1], "{}", 0640);
                fuzz_write_text(root, "spool/archive", side, text, 0640);
        }
        receipt_sent(&relay, relayed[0][0], relayed[0][1]);
        fuzz_write_text(root, "spool/handoff", "vec-basic-0001.json", "squatted", 0640);
        if (store_id_mark(sp, "vec-minimal") < 0)
                abort();
}

static void make_spool(void)
{
        char path[PATH_MAX], conf[2048], line[HD_KEY_LINE_MAX], err[200];
        char *cerr = NULL;
        hd_key *kb = NULL;

        fuzz_temp_root(root, sizeof(root), "relay");
        snprintf(path, sizeof(path), "%s/pub", root);
        if (mkdir(path, 0700) < 0)
                abort();
        fuzz_write_text(root, ".", "vector.key", vector_key, 0600);
        fuzz_write_text(root, ".", "host.key", host_b_line, 0600);
        if (hd_key_parse(host_a_line, strlen(host_a_line), &key_a, err, sizeof(err)) < 0 ||
            hd_key_format(key_a, false, line, sizeof(line)) < 0) {
                fprintf(stderr, "fuzz_relay_inbound: host a key: %s\n", err);
                abort();
        }
        fuzz_write_text(root, "pub", "a.pub", line, 0644);
        /* b's own public key: a receipt "from b" signed by b is refused too */
        if (hd_key_parse(host_b_line, strlen(host_b_line), &kb, err, sizeof(err)) < 0 ||
            hd_key_format(kb, false, line, sizeof(line)) < 0)
                abort();
        hd_key_free(kb);
        fuzz_write_text(root, "pub", "b.pub", line, 0644);
        snprintf(conf, sizeof(conf),
                 "[spool]\ndir = %1$s/spool\nfsync = no\n"
                 "[keys]\ndefault = %1$s/vector.key\ntest-2026 = %1$s/vector.key\n"
                 "[agent bob]\nstate_dir = %1$s/bob\n"
                 "[remote carol]\nhost = a\n"
                 "[relay]\nservers = nats://127.0.0.1:1\nhost = b\n"
                 "host_key = %1$s/host.key\nhost_pubkey_dir = %1$s/pub\n", root);
        fuzz_write_text(root, ".", "handoffd.conf", conf, 0600);
        snprintf(path, sizeof(path), "%s/handoffd.conf", root);
        if (config_load(path, true, &cfg, &cerr) < 0) {
                fprintf(stderr, "fuzz_relay_inbound: config: %s\n", cerr ? cerr : "?");
                abort();
        }
        dict_init(&unserved, sizeof(struct unserved_entry));
        if (spool_open(cfg, &unserved, &sp) < 0)
                abort();
        /* As relay_start() makes it, without NATS (no threads, no
         * options, no libnats): what the inbound path reads. */
        uv_loop_init(&loop);
        relay.loop = &loop;
        parts.sp = sp;
        relayed_init(&parts.relayed);
        relay.p = &parts;
        relay.sp = sp;
        relay.max_msg = cfg->max_file_size;
        relay.host = strdup(cfg->relay.host);
        dict_init(&relay.outbox, sizeof(struct outbox_entry));
        dict_init(&relay.unverified, sizeof(struct relay_owed_rate));
        pthread_mutex_init(&relay.m, NULL);
        pthread_cond_init(&relay.wake_worker, NULL);
        pthread_cond_init(&relay.wake_fetcher, NULL);
        if (!relay.host)
                abort();
        sp->relay = (struct spool_relay) { .ctx = &relay };
        reset_spool();
}

static void at_exit(void)
{
        relayed_clear(&parts.relayed);
        fuzz_remove_tree(root, "fuzz_relay_inbound");
}

/* ---- seeds ------------------------------------------------------------- */

static void seed(const char *dir, const char *name, const char *head, const char *body,
                 size_t blen)
{
        char path[PATH_MAX];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "w");
        if (!f || fputs(head, f) < 0 || fwrite(body, 1, blen, f) != blen || fclose(f) != 0) {
                perror(path);
                exit(1);
        }
}

static void seed_receipt(const char *dir, const char *name, const hd_key *k, const char *id,
                         const char *outcome, const char *reason, const char *msgid)
{
        _cleanup_json_ json_t *doc = NULL;
        _cleanup_free_ char *buf = NULL;
        char head[256];
        size_t len;

        doc = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "type",
                        "handoff-receipt", "version", 1, "handoff_id", id, "outcome", outcome,
                        "reason", reason, "detail", reason[0] ? "as the vectors say" : "",
                        "host", "a", "origin", "b", "at", "2026-04-21T10:15:30Z");
        if (!doc || hd_sign(doc, k) < 0 || hd_canon_dump(doc, NULL, &buf, &len) < 0)
                exit(1);
        snprintf(head, sizeof(head), "handoff.b.receipt.a\nNats-Msg-Id: %s\n\n",
                 msgid ? msgid : "");
        if (!msgid)
                snprintf(head, sizeof(head), "handoff.b.receipt.a\nNats-Msg-Id: %s:%s\n\n", id,
                         outcome);
        seed(dir, name, head, buf, len);
}

static void write_seeds(const char *dir)
{
        static const char bad[] = "{\"handoff_id\":\"vec-x\",\"to_agent\":\"bob\"}";
        static const char head_sub[] = "handoff.b.bob\nNats-Msg-Id: ";
        char head[512];
        hd_key *kb = NULL;
        char err[200];

        if (hd_key_parse(host_b_line, strlen(host_b_line), &kb, err, sizeof(err)) < 0)
                exit(1);
        seed_receipt(dir, "receipt-consumed", key_a, "relayed-0001", "consumed", "", NULL);
        seed_receipt(dir, "receipt-delivered", key_a, "relayed-0001", "delivered", "", NULL);
        seed_receipt(dir, "receipt-rejected", key_a, "relayed-0002", "rejected", "bad_mac",
                     NULL);
        seed_receipt(dir, "receipt-replayed", key_a, "relayed-0001", "expired", "",
                     "relayed-0002:expired");
        seed_receipt(dir, "receipt-unknown-id", key_a, "vec-basic-0001", "consumed", "", NULL);
        seed_receipt(dir, "receipt-signed-by-b", kb, "relayed-0001", "consumed", "", NULL);
        hd_key_free(kb);
        snprintf(head, sizeof(head), "%svec-x.0123abcd\nHandoff-Origin: a\n\n", head_sub);
        seed(dir, "handoff-unsigned", head, bad, strlen(bad));
        snprintf(head, sizeof(head), "%sno-json.0123\nHandoff-Origin: a\n\n", head_sub);
        seed(dir, "handoff-not-json", head, "{\"handoff_id\":", 14);
        seed(dir, "handoff-no-headers", "handoff.b.bob\n\n", bad, strlen(bad));
        exit(0);
}

/* ---- the target -------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        const char *seeds = getenv("HD_FUZZ_RELAY_SEEDS");

        (void)argc;
        (void)argv;
        /* HD_FUZZ_VERBOSE=1: the decisions as handoffd logs them */
        log_set_max_priority(getenv("HD_FUZZ_VERBOSE") ? LOG_DEBUG : LOG_CRIT);
        now = fuzz_now();
        make_spool();
        atexit(at_exit);
        if (seeds)
                write_seeds(seeds);
        return 0;
}

/* The first "Name: value" line of the header block, as libnats gives it
 * (a C string: up to a NUL), or NULL. */
static char *header(const char *head, size_t n, const char *name)
{
        size_t ln = strlen(name);
        const char *p = head, *end = head + n;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *eol = nl ? nl : end;
                if ((size_t)(eol - p) > ln && !memcmp(p, name, ln) && p[ln] == ':') {
                        const char *v = p + ln + 1;
                        while (v < eol && *v == ' ')
                                v++;
                        return strndup(v, (size_t)(eol - v));
                }
                p = eol + 1;
        }
        return NULL;
}

/* handoff/ holds a file of exactly these bytes. */
static bool in_handoff(const char *data, size_t len)
{
        struct dirent *de;
        DIR *d = opendir_at(sp->fd[SD_HANDOFF]);
        bool found = false;

        if (!d)
                abort();
        while (!found && (de = readdir(d))) {
                _cleanup_free_ char *buf = NULL;
                struct stat st;
                if (de->d_name[0] == '.' ||
                    fstatat(sp->fd[SD_HANDOFF], de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode) || (size_t)st.st_size != len)
                        continue;
                int fd = openat(sp->fd[SD_HANDOFF], de->d_name, O_RDONLY | O_CLOEXEC);
                buf = malloc(len + 1);
                found = fd >= 0 && buf && read(fd, buf, len + 1) == (ssize_t)len &&
                        !memcmp(buf, data, len);
                if (fd >= 0)
                        close(fd);
        }
        closedir(d);
        return found;
}

static bool tmp_clean(void)
{
        struct dirent *de;
        DIR *d = opendir_at(sp->fd[SD_TMP]);
        bool clean = true;

        if (!d)
                abort();
        while ((de = readdir(d)))
                if (!strncmp(de->d_name, ".relay.", 7))
                        clean = false;
        closedir(d);
        return clean;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *text = (const char *)data, *end = text + size;
        const char *nl = memchr(text, '\n', size);
        const char *head = nl ? nl + 1 : end, *body = end;
        struct relay_in in = { 0 };
        struct relay_batch b = { .n = 1, .in = &in };
        struct relay_stats before;
        _cleanup_free_ char *subject = NULL, *msg_id = NULL, *origin = NULL, *caps = NULL;

        if (++runs % CLEAN_EVERY == 0)
                reset_spool();
        /* the header block ends at the first empty line */
        for (const char *p = head; p < end;) {
                const char *e = memchr(p, '\n', (size_t)(end - p));
                if (e == p) {
                        body = p + 1;
                        break;
                }
                if (!e)
                        break;
                p = e + 1;
        }
        if (body > end)
                body = end;
        subject = strndup(text, (size_t)((nl ? nl : end) - text));
        msg_id = header(head, (size_t)(body - head), "Nats-Msg-Id");
        origin = header(head, (size_t)(body - head), "Handoff-Origin");
        caps = header(head, (size_t)(body - head), "Handoff-Receipts");
        if (!subject)
                abort();
        relay_in_fill(&relay, &in, subject, msg_id, origin, caps, body, (size_t)(end - body));
        before = relay.st;
        relay_inbound_batch(&relay, &b, now);

        FUZZ_ASSERT(b.done, "the batch was not handed back");
        FUZZ_ASSERT(tmp_clean(), "a .relay. temp file is left in tmp/");
        FUZZ_ASSERT(!in.receipt || relay.st.received == before.received,
                    "a receipt was written into handoff/");
        if (relay.st.received > before.received)
                FUZZ_ASSERT(in.ack && in_handoff(in.data, in.len),
                            "a message counted as received is not in handoff/ with its bytes");
        if (relay.st.receipts_applied > before.receipts_applied) {
                _cleanup_json_ json_t *doc = NULL;
                hd_verdict v;
                FUZZ_ASSERT(hd_parse(in.data, in.len, NULL, &doc, &v) == 0 &&
                            hd_sig_check(doc, key_a, &v) == 0,
                            "an applied receipt does not verify with a's key");
        }
        free(in.data);
        return 0;
}
