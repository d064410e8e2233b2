/* libFuzzer target: one MCP request line as `handoffctl mcp` handles it
 * (src/handoffctl/cmd_mcp.c over src/lib/mcp/), without stdin and stdout:
 * mcp_message()'s answer written as the server writes it, one line.
 * The input is the line (up to its first newline, a CR before it dropped,
 * blank lines skipped, as the server's reader hands them over).
 *
 * The server is set up by mcp_open() as `handoffctl mcp --agent bob`
 * does, on a temp spool made once per process: agents alice and bob, the
 * TEST-ONLY vector key as the default key (so handoff_send signs and
 * handoff_take checks the proof of origin); in bob's handoffs/ a fresh
 * bootstrap (fuzz-inbox-0001, from alice) and a stale one
 * (fuzz-stale-0001); in the spool fuzz-inbox-0001 claimed, vec-basic-0001
 * archived as consumed, vec-kid-0001 archived as relayed with a receipt,
 * vec-minimal rejected.  After each input what a handoff_send dropped is
 * removed and a taken bootstrap put back (a fresh one every minute, so a
 * long run stays inside the resume window).
 *
 * Properties: at most one answer per line, each one line of JSON-RPC 2.0
 * (valid UTF-8 JSON, "jsonrpc":"2.0", exactly one of result and error, an
 * error with a known code and a message); a result answers the request's
 * own id; a notification or a response is not answered; only a
 * handoff_send that succeeded put something into the spool (one file, its
 * handoff_id's); only a handoff_take that succeeded took a bootstrap.
 *
 * HD_FUZZ_VERBOSE=1 prints each answer. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "files.h"
#include "fuzz.h"
#include "handoffctl.h"
#include "mcp.h"
#include "submit.h"

#define INBOX_ID "fuzz-inbox-0001"
#define STALE_ID "fuzz-stale-0001"
#define REPLANT_USEC (60 * 1000000LL)

/* tests/vectors/TEST-ONLY.key without its newline: public, test only. */
static const char vector_key[] = "TEST-ONLY handoffd vector key, not a secret, 0001";

static char root[PATH_MAX - 128];
static struct mcp m = { .agent = "bob" };
static hd_key *key;
static int handoff_fd = -1, tmp_fd = -1, inbox_fd = -1;
static int64_t planted_at;
static bool verbose;

static int open_dir(const char *sub, mode_t mode)
{
        char path[PATH_MAX];
        int fd;

        snprintf(path, sizeof(path), "%s/%s", root, sub);
        if (mkdir(path, mode) < 0 && errno != EEXIST) {
                perror(path);
                abort();
        }
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                abort();
        return fd;
}

/* A handoff alice -> bob as handoff_send makes one (signed with the vector
 * key), initiated at_usec: its bytes into *ret_buf. */
static void make_handoff(const char *id, int64_t ttl, char **ret_buf, size_t *ret_len)
{
        char got[SUBMIT_ID_MAX];
        struct submit_err e;
        struct submit_req rq = {
                .from = "alice", .to = "bob", .id = id,
                .reason = "the tests are half green",
                .context = "Token refresh fails against staging; resume from the failing test.",
                .ttl = ttl,
        };

        if (submit_build(&rq, key, ret_buf, ret_len, got, &e) != 0) {
                fprintf(stderr, "fuzz_mcp: submit_build: %s\n", e.msg);
                abort();
        }
}

/* Its bootstrap, accepted at at_usec, into bob's handoffs/ as the daemon
 * writes one. */
static void plant(const char *id, int64_t at_usec)
{
        _cleanup_free_ char *hbuf = NULL, *bbuf = NULL;
        _cleanup_json_ json_t *doc = NULL, *b = NULL;
        char name[NAME_MAX + 1];
        size_t hlen, blen;

        make_handoff(id, 600, &hbuf, &hlen);
        doc = json_loadb(hbuf, hlen, 0, NULL);
        if (!doc || hd_bootstrap_build(doc, at_usec, &b) < 0 ||
            hd_canon_dump(b, NULL, &bbuf, &blen) < 0 ||
            hd_bootstrap_name(id, name, sizeof(name)) < 0 ||
            hd_write_atomic(inbox_fd, name, bbuf, blen, 0640, false) < 0)
                abort();
}

/* A file of dirfd, other than keep (or NULL): removed; how many. */
static size_t empty_dir(int dirfd, const char *keep1, const char *keep2)
{
        struct dirent *de;
        DIR *d = opendir_at(dirfd);
        size_t n = 0;

        if (!d)
                abort();
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
                    (keep1 && !strcmp(de->d_name, keep1)) ||
                    (keep2 && !strcmp(de->d_name, keep2)))
                        continue;
                unlinkat(dirfd, de->d_name, 0);
                n++;
        }
        closedir(d);
        return n;
}

/* The single file of dirfd, its name into name; false when none or more. */
static bool only_file(int dirfd, char *name, size_t n)
{
        struct dirent *de;
        DIR *d = opendir_at(dirfd);
        size_t count = 0;

        if (!d)
                abort();
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && count++ == 0)
                        snprintf(name, n, "%s", de->d_name);
        closedir(d);
        return count == 1;
}

static bool exists_at(int dirfd, const char *name)
{
        struct stat st;

        return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void make_spool(void)
{
        static const char *const states[] = { "spool/tmp", "spool/handoff", "spool/claimed",
                                               "spool/archive", "spool/rejected", "spool/ids",
                                               "spool/outbox" };
        _cleanup_free_ char *hbuf = NULL;
        char conf[2048];
        size_t hlen;

        fuzz_temp_root(root, sizeof(root), "mcp");
        fuzz_write_text(root, ".", "vector.key", vector_key, 0600);
        close(open_dir("spool", 0750));
        for (size_t i = 0; i < ELEMENTSOF(states); i++)
                close(open_dir(states[i], 0750));
        handoff_fd = open_dir("spool/handoff", 0750);
        tmp_fd = open_dir("spool/tmp", 0750);
        close(open_dir("alice", 0700));
        close(open_dir("bob", 0700));
        inbox_fd = open_dir("bob/handoffs", 0700);
        snprintf(conf, sizeof(conf),
                 "[spool]\ndir = %1$s/spool\nfsync = no\n"
                 "[keys]\ndefault = %1$s/vector.key\ntest-2026 = %1$s/vector.key\n"
                 "[agent alice]\nstate_dir = %1$s/alice\n"
                 "[agent bob]\nstate_dir = %1$s/bob\n", root);
        fuzz_write_text(root, ".", "handoffd.conf", conf, 0600);
        if (hd_key_from_bytes(vector_key, strlen(vector_key), &key) < 0)
                abort();

        /* what handoff_status finds: one item of each kind */
        make_handoff(INBOX_ID, 600, &hbuf, &hlen);
        fuzz_write_text(root, "spool/claimed", INBOX_ID ".json", hbuf, 0640);
        fuzz_write_text(root, "spool/archive", "1776766560-alice-bob-vec-basic-0001.json", "{}", 0640);
        fuzz_write_text(root, "spool/archive", "1776766560-alice-bob-vec-basic-0001.json.outcome",
                   "{\"handoff_id\":\"vec-basic-0001\",\"outcome\":\"consumed\","
                   "\"archived_at\":\"2026-04-21T10:17:00Z\"}", 0640);
        fuzz_write_text(root, "spool/archive", "1776766570-alice-carol-vec-kid-0001.json", "{}", 0640);
        fuzz_write_text(root, "spool/archive", "1776766570-alice-carol-vec-kid-0001.json.outcome",
                   "{\"handoff_id\":\"vec-kid-0001\",\"outcome\":\"relayed\",\"relayed_to\":\"b\","
                   "\"remote_outcome\":\"rejected\",\"remote_host\":\"b\","
                   "\"remote_at\":\"2026-04-21T10:18:00Z\",\"remote_reason\":\"bad_mac\","
                   "\"remote_detail\":\"\\u001b[31mred\\u001b[0m\"}", 0640);
        fuzz_write_text(root, "spool/rejected", "vec-minimal.json", "{\"handoff_id\":\"vec-minimal\"}", 0640);
        fuzz_write_text(root, "spool/rejected", "vec-minimal.json.reason",
                   "{\"handoff_id\":\"vec-minimal\",\"reason\":\"bad_mac\","
                   "\"detail\":\"the MAC does not match\"}", 0640);
}

static void at_exit(void)
{
        fuzz_remove_tree(root, "fuzz_mcp");
}

/* bob's handoffs/ as at start: the two bootstraps, nothing else; the
 * waiting one fresh.  The stale one was accepted two resume windows ago. */
static void reset_inbox(void)
{
        char name[NAME_MAX + 1], stale[NAME_MAX + 1];
        int64_t now = hd_now_usec();

        if (hd_bootstrap_name(INBOX_ID, name, sizeof(name)) < 0 ||
            hd_bootstrap_name(STALE_ID, stale, sizeof(stale)) < 0)
                abort();
        empty_dir(inbox_fd, name, stale);
        if (!exists_at(inbox_fd, name) || now - planted_at > REPLANT_USEC) {
                plant(INBOX_ID, now);
                plant(STALE_ID, now - 2 * m.ib.window * 1000000);
                planted_at = now;
        }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        char conf[PATH_MAX];
        int r;

        (void)argc;
        (void)argv;
        verbose = getenv("HD_FUZZ_VERBOSE") != NULL;
        make_spool();
        atexit(at_exit);
        snprintf(conf, sizeof(conf), "%s/handoffd.conf", root);
        r = mcp_open(&m, conf, NULL);
        if (r != 0) {
                fprintf(stderr, "fuzz_mcp: mcp_open: %d\n", r);
                abort();
        }
        FUZZ_ASSERT(m.key != NULL, "no signing key: %s", m.key_error);
        FUZZ_ASSERT(m.copts.lookup != NULL, "handoff_take does not check the proof of origin");
        reset_inbox();
        return 0;
}

/* ---- the properties ----------------------------------------------------- */

static const char *tool_of(const json_t *req)
{
        if (strcmp(json_string_value(json_object_get(req, "method")) ?: "", "tools/call"))
                return NULL;
        return json_string_value(json_object_get(json_object_get(req, "params"), "name"));
}

/* One line the server wrote: a JSON-RPC 2.0 response to req (or NULL when
 * the request did not parse).  Returns the result, or NULL for an error. */
static json_t *check_answer(const char *line, size_t len, const json_t *req)
{
        static const int codes[] = { RPC_PARSE_ERROR, RPC_INVALID_REQUEST,
                                     RPC_METHOD_NOT_FOUND, RPC_INVALID_PARAMS,
                                     RPC_INTERNAL_ERROR };
        json_error_t err;
        json_t *a = json_loadb(line, len, JSON_REJECT_DUPLICATES, &err);
        const json_t *result, *error, *id = json_object_get(a, "id");
        bool known = false;

        FUZZ_ASSERT(a != NULL, "an answer is not JSON (%s): %.*s", err.text, (int)len, line);
        FUZZ_ASSERT(json_is_object(a), "an answer is not an object: %.*s", (int)len, line);
        FUZZ_ASSERT(!strcmp(json_string_value(json_object_get(a, "jsonrpc")) ?: "", "2.0"),
                    "an answer without jsonrpc 2.0: %.*s", (int)len, line);
        result = json_object_get(a, "result");
        error = json_object_get(a, "error");
        FUZZ_ASSERT(!result != !error, "an answer with %s result and error: %.*s",
                    result ? "both" : "neither", (int)len, line);
        FUZZ_ASSERT(id && (json_is_null(id) || json_is_string(id) || json_is_integer(id)),
                    "an answer's id is not a string, an integer or null: %.*s", (int)len, line);
        if (error) {
                int code = (int)json_integer_value(json_object_get(error, "code"));
                for (size_t i = 0; i < ELEMENTSOF(codes); i++)
                        known |= code == codes[i];
                FUZZ_ASSERT(known && json_is_integer(json_object_get(error, "code")),
                            "an error with an unknown code: %.*s", (int)len, line);
                FUZZ_ASSERT(json_is_string(json_object_get(error, "message")),
                            "an error without a message: %.*s", (int)len, line);
        }
        if (!json_is_null(id) || result) {
                /* an answer names the request it answers */
                FUZZ_ASSERT(req && json_equal(id, json_object_get(req, "id")),
                            "an answer to another id: %.*s", (int)len, line);
        }
        if (result) {
                FUZZ_ASSERT(json_is_object(result), "a result is not an object: %.*s", (int)len,
                            line);
                json_incref((json_t *)result);
        }
        json_decref(a);
        return (json_t *)result;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        _cleanup_free_ char *out = NULL;
        _cleanup_json_ json_t *req = NULL, *result = NULL;
        char taken[NAME_MAX + 1], name[NAME_MAX + 1], want[NAME_MAX + 1];
        const char *line = (const char *)data, *nl, *tool;
        size_t len = size, outlen = 0, lines;
        bool blank = true, sent, took;
        FILE *f;
        int r;

        nl = memchr(line, '\n', len);
        if (nl)
                len = (size_t)(nl - line);
        if (len > 0 && line[len - 1] == '\r')
                len--;
        for (size_t i = 0; i < len && blank; i++)
                blank = strchr(" \t\r", line[i]) != NULL;
        if (blank)
                return 0;
        if (hd_bootstrap_name(INBOX_ID, taken, sizeof(taken)) < 0)
                abort();

        json_t *ans = NULL;
        r = mcp_message(&m, line, len, &ans);
        f = open_memstream(&out, &outlen);
        if (!f)
                abort();
        if (ans) {
                char *s = json_dumps(ans, JSON_COMPACT);
                if (!s)
                        abort();
                fprintf(f, "%s\n", s);
                free(s);
                json_decref(ans);
        }
        if (fclose(f) != 0)
                abort();
        FUZZ_ASSERT(r == 0, "mcp_message returned %d", r);
        if (verbose)
                fprintf(stderr, "fuzz_mcp: %s", out);

        /* what the request was, as an independent parser reads it */
        req = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(req))
                json_decref(TAKE_PTR(req));
        lines = 0;
        for (const char *p = out; p < out + outlen;) {
                const char *e = memchr(p, '\n', (size_t)(out + outlen - p));
                FUZZ_ASSERT(e != NULL, "an answer without its newline: %s", p);
                lines++;
                FUZZ_ASSERT(lines == 1, "more than one answer to one line: %s", out);
                result = check_answer(p, (size_t)(e - p), req);
                p = e + 1;
        }
        if (req && json_is_string(json_object_get(req, "method")) &&
            (!json_object_get(req, "id") || json_is_null(json_object_get(req, "id"))))
                FUZZ_ASSERT(lines == 0 || !result,
                            "a notification got a result: %s", out);

        /* the spool: only a handoff_send that succeeded dropped a file */
        tool = tool_of(req);
        sent = result && tool && !strcmp(tool, "handoff_send") &&
               json_is_false(json_object_get(result, "isError"));
        if (sent) {
                const char *id = json_string_value(json_object_get(
                        json_object_get(result, "structuredContent"), "handoff_id"));
                FUZZ_ASSERT(id && only_file(handoff_fd, name, sizeof(name)) &&
                            snprintf(want, sizeof(want), "%s.json", id) > 0 && !strcmp(name, want),
                            "handoff_send said sent (%s), handoff/ does not hold just it", out);
        } else {
                FUZZ_ASSERT(empty_dir(handoff_fd, NULL, NULL) == 0,
                            "something reached handoff/ without a handoff_send: %s", out);
        }
        empty_dir(handoff_fd, NULL, NULL);
        FUZZ_ASSERT(empty_dir(tmp_fd, NULL, NULL) == 0, "a file left in tmp/: %s", out);

        /* bob's inbox: only a handoff_take that succeeded took the bootstrap */
        took = result && tool && !strcmp(tool, "handoff_take") &&
               json_is_false(json_object_get(result, "isError"));
        if (took)
                FUZZ_ASSERT(!exists_at(inbox_fd, taken), "handoff_take took it, still there");
        else
                FUZZ_ASSERT(exists_at(inbox_fd, taken), "the bootstrap is gone without a take: %s",
                            out);
        reset_inbox();
        return 0;
}
