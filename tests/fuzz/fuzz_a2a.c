/* libFuzzer target: one A2A JSON-RPC request to handoff-hubd as
 * hub_a2a_rpc() decides it (src/hubd/hub_a2a.c: the request, its params,
 * a SendMessage's message and parts into payload a2a/1, then
 * hub_accept.c's judgement), without libmicrohttpd.  The first byte picks
 * the token's agent (bob, alice) and the endpoint (/a2a/alice, /a2a/bob,
 * /a2a/ghost), the second the A2A-Version header (1.0, none, 0.3, 1.0.7);
 * the rest is the body.
 *
 * The hub is set up by hub_setup() as handoff-hubd does, on a temp spool
 * made once per process: agents alice and bob served, a default key,
 * max_file_size 4K, documents judged at the vectors' "now".  After each
 * input handoff/, the records and state_dir/a2a/ are emptied.
 *
 * Properties: the answer is HTTP 200 with a JSON-RPC 2.0 response: "id"
 * and exactly one of "result" or "error" (an integer code A2A or
 * JSON-RPC names, a string message); a result of SendMessage is a task
 * whose id names a file in handoff/ exactly when its state is SUBMITTED
 * (nothing is written for a REJECTED one or an error), and whose payload
 * validates as a2a/1; nothing is ever left in tmp/. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "config.h"
#include "files.h"
#include "fuzz.h"
#include "hub.h"

static const char key[] = "TEST-ONLY handoffd vector key, not a secret, 0001";
static char root[PATH_MAX - 128];
static struct hub h = { .tmp_fd = -1, .handoff_fd = -1, .state_fd = -1, .ids_fd = -1,
                        .claimed_fd = -1, .cancel_fd = -1 };
static int64_t now;
static bool verbose;

static int64_t fuzz_clock(void)
{
        return now;
}

static void make_dir(const char *sub)
{
        char path[PATH_MAX];

        snprintf(path, sizeof(path), "%s/%s", root, sub);
        if (mkdir(path, 0750) < 0) {
                perror(path);
                abort();
        }
}

static void at_exit(void)
{
        fuzz_remove_tree(root, "fuzz_a2a");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        static const char *const dirs[] = { "spool", "spool/tmp", "spool/handoff",
                                            "spool/claimed", "spool/archive", "spool/rejected",
                                            "spool/ids", "alice", "bob", "tokens" };
        char conf[2048], path[PATH_MAX], *cerr = NULL;

        (void)argc;
        (void)argv;
        verbose = getenv("HD_FUZZ_VERBOSE") != NULL;
        if (sodium_init() < 0)
                abort();
        now = fuzz_now();
        fuzz_temp_root(root, sizeof(root), "a2a");
        atexit(at_exit);
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                make_dir(dirs[i]);
        fuzz_write_file(root, ".", "vector.key", key, strlen(key), 0600);
        snprintf(conf, sizeof(conf),
                 "[spool]\ndir = %1$s/spool\nfsync = no\nmax_file_size = 4K\n"
                 "[keys]\ndefault = %1$s/vector.key\n"
                 "[agent alice]\nstate_dir = %1$s/alice\ndescription = fuzz\n"
                 "skill = s1: a skill\n"
                 "[agent bob]\nstate_dir = %1$s/bob\n"
                 "[hub]\nlisten = 127.0.0.1:1\ntoken_dir = %1$s/tokens\n"
                 "state_dir = %1$s/hubstate\n", root);
        fuzz_write_file(root, ".", "handoffd.conf", conf, strlen(conf), 0600);
        snprintf(path, sizeof(path), "%s/handoffd.conf", root);
        if (config_load(path, true, &h.cfg, &cerr) < 0) {
                fprintf(stderr, "fuzz_a2a: config: %s\n", cerr ? cerr : "?");
                abort();
        }
        pthread_rwlock_init(&h.tokens_lock, NULL);
        if (hub_setup(&h) != 0)
                abort();
        h.now_usec = fuzz_clock;
        return 0;
}

/* Empty dirfd (and, with deep, the directories in it, one level down). */
static size_t empty_dir(int dirfd, bool deep)
{
        struct dirent *de;
        DIR *d = opendir_at(dirfd);
        size_t n = 0;

        if (!d)
                abort();
        while ((de = readdir(d))) {
                struct stat st;
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (deep && fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISDIR(st.st_mode)) {
                        int fd = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        if (fd >= 0) {
                                n += empty_dir(fd, true);
                                close(fd);
                        }
                        unlinkat(dirfd, de->d_name, AT_REMOVEDIR);
                        continue;
                }
                unlinkat(dirfd, de->d_name, 0);
                n++;
        }
        closedir(d);
        return n;
}

static bool code_known(json_int_t c)
{
        static const int codes[] = { -32700, -32600, -32601, -32602, -32603, -32001, -32002,
                                     -32003, -32004, -32005, -32007, -32009 };

        for (size_t i = 0; i < ELEMENTSOF(codes); i++)
                if (c == codes[i])
                        return true;
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const char *const agents[] = { "bob", "alice" };
        static const char *const names[] = { "alice", "bob", "ghost" };
        static const char *const versions[] = { "1.0", NULL, "0.3", "1.0.7" };
        _cleanup_json_ json_t *ans = NULL, *req = NULL;
        struct hub_answer a = { 0 };
        const json_t *res, *err;
        const char *agent, *name, *version, *method;
        char fname[NAME_MAX + 1];
        size_t written;
        int r;

        if (size < 2)
                return 0;
        agent = agents[data[0] % 2];
        name = names[(data[0] / 2) % 3];
        version = versions[data[1] % 4];
        r = hub_a2a_rpc(&h, agent, name, version, NULL, (const char *)data + 2, size - 2, &a);
        FUZZ_ASSERT(r == 0 || r == -ENOMEM, "hub_a2a_rpc: %d", r);
        if (r < 0)
                return 0;
        /* a wait or a stream, without a watcher: answered as it stands
         * (hub_http.c does so when there is no room) */
        if (a.wait) {
                struct hub_wait *w = a.wait;
                a.wait = NULL;
                r = w->ops->finish(&h, w, &a);
                w->ops->free(w);
                FUZZ_ASSERT(r == 0 || r == -ENOMEM, "a wait's finish: %d", r);
                if (r < 0)
                        return 0;
        }
        if (verbose)
                fprintf(stderr, "fuzz_a2a: %s -> /a2a/%s: %u %s\n", agent, name, a.status,
                        a.body ? a.body : "(null)");
        FUZZ_ASSERT(a.status == 200 && a.body && !a.ctype, "an answer %u %s", a.status,
                    a.body ? a.body : "(null)");
        ans = json_loads(a.body, JSON_REJECT_DUPLICATES, NULL);
        FUZZ_ASSERT(json_is_object(ans), "not a JSON object: %s", a.body);
        FUZZ_ASSERT(!strcmp(json_string_value(json_object_get(ans, "jsonrpc")) ?: "", "2.0") &&
                    json_object_get(ans, "id"), "not JSON-RPC 2.0: %s", a.body);
        res = json_object_get(ans, "result");
        err = json_object_get(ans, "error");
        FUZZ_ASSERT(!res != !err, "not exactly one of result and error: %s", a.body);
        if (err)
                FUZZ_ASSERT(json_is_integer(json_object_get(err, "code")) &&
                            code_known(json_integer_value(json_object_get(err, "code"))) &&
                            json_is_string(json_object_get(err, "message")),
                            "an error A2A does not name: %s", a.body);
        req = json_loadb((const char *)data + 2, size - 2, 0, NULL);
        method = json_string_value(json_object_get(req, "method"));
        written = 0;
        if (res && method && !strcmp(method, "SendMessage")) {
                const json_t *task = json_object_get(res, "task");
                const char *id = json_string_value(json_object_get(task, "id"));
                const char *st = json_string_value(json_object_get(json_object_get(task, "status"),
                                                                   "state"));
                bool submitted = st && !strcmp(st, "TASK_STATE_SUBMITTED");
                FUZZ_ASSERT(id && st, "a SendMessage result without a task: %s", a.body);
                snprintf(fname, sizeof(fname), "%s.json", id);
                if (submitted) {
                        _cleanup_json_ json_t *doc = NULL;
                        hd_verdict v;
                        FUZZ_ASSERT(hd_load_at(h.handoff_fd, fname, NULL, &doc, &v) == 0,
                                    "task %s submitted, not in handoff/", id);
                        FUZZ_ASSERT(hd_payload_validate(doc, NULL, &v) == 0 &&
                                    !strcmp(json_string_value(json_object_get(doc, "from_agent")),
                                            agent),
                                    "submitted %s: %s", id, v.detail);
                        written = 1;
                }
        }
        /* A stream refused for want of room was sent all the same: its
         * refusal names the task ("task ID stands"), which is in handoff/. */
        if (err && method && !strcmp(method, "SendStreamingMessage")) {
                const char *m = json_string_value(json_object_get(err, "message")) ?: "";
                const char *t = strstr(m, "task a2a-");
                char id[96];
                if (t && sscanf(t + 5, "%95[^ ]", id) == 1 &&
                    snprintf(fname, sizeof(fname), "%s.json", id) < (int)sizeof(fname) &&
                    faccessat(h.handoff_fd, fname, F_OK, 0) == 0)
                        written = 1;
        }
        FUZZ_ASSERT(empty_dir(h.handoff_fd, false) == written,
                    "handoff/ holds what no SUBMITTED task says: %s", a.body);
        empty_dir(h.state_fd, true);
        FUZZ_ASSERT(empty_dir(h.tmp_fd, false) == 0, "a file left in tmp/");
        free(a.body);
        return 0;
}
