/* libFuzzer target: one request to handoff-hubd as its request handling
 * decides it (src/hubd/hub_http.c hub_request_head/body/end, then
 * hub_accept.c), without libmicrohttpd, whose HTTP parsing is not ours.
 * The input is the request as libmicrohttpd hands its parts over:
 *
 *     METHOD TARGET\n           (TARGET: the path, then ?query; wait= of
 *                                the query is the one argument read)
 *     Name: value\n             (any number; names in any case, the first
 *                                of a name counts, leading blanks dropped)
 *     \n
 *     BODY                      (handed over in pieces of at most 1 KiB)
 *
 * The hub is set up by hub_setup() as handoff-hubd does, on a temp spool
 * made once per process: agents alice and bob served, the TEST-ONLY vector
 * key (default and kid test-2026), max_file_size 4K, tokens for alice, bob
 * and carol; documents are judged at the vectors' "now"; ?wait=claimed
 * does not wait (wait_ms 0).  The spool holds vec-kid claimed with the
 * bytes of tests/vectors/valid/kid.json (a retry of it is accepted again)
 * and vec-unicode's id in ids/ (duplicate_id).  After an accepted POST
 * handoff/ and the hub's records are emptied.
 *
 * Properties: every answer is a known status with a JSON body
 * {"status":"accepted","handoff_id"} (200 only) or {"status":"rejected",
 * "reason","detail"} (strings; /healthz and /metrics: text); a POST to
 * /api/v1/handoffs/start or a GET of an item is 401 exactly when the
 * Authorization header holds no token of ours; an accepted POST came with
 * the token of its from_agent, a body within max_file_size, and its bytes
 * are in handoff/ (or claimed/) under its id; anything else leaves
 * handoff/, tmp/ and the records as they were.
 *
 * A request to /a2a/ is only held to a JSON answer: fuzz_a2a judges it.
 * One to /mcp (the headers Origin, Accept, Mcp-Session-Id,
 * MCP-Protocol-Version and Last-Event-ID read too; an Mcp-Session-Id of
 * "SESSION" is replaced by a session of bob's, made again when an input
 * ended it; [hub] mcp_origins https://ok.example) is held to the rules of
 * the transport: 202 with no body, or a JSON-RPC 2.0 answer; 403 exactly
 * when an Origin is there and not that one; 401 when it is allowed and no
 * token of ours is there; a stream's first bytes an SSE event with an id.
 *
 * Seeds (tests/fuzz/corpus/fuzz_hub/): the documents of tests/vectors and
 * the requests of tests/e2e/test_hub.py, those built with
 * tests/py/hdproto.py at the vectors' time.  HD_FUZZ_VERBOSE=1 prints each
 * answer. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "config.h"
#include "files.h"
#include "fuzz.h"
#include "hub.h"
#include "hub_mcp.h"

#define CHUNK 1024
#define PATH_START "/api/v1/handoffs/start"
#define PATH_ITEM "/api/v1/handoffs/"

/* tests/vectors/TEST-ONLY.key without its newline: public, test only. */
static const char vector_key[] = "TEST-ONLY handoffd vector key, not a secret, 0001";
/* tests/vectors/valid/kid.json, byte for byte: claimed here already */
static const char kid_json[] =
        "{\"caller_hash\":\"602cd7fbbe41688e\",\"expires_at\":\"2026-04-21T10:20:00Z\","
        "\"from_agent\":\"alice\",\"handoff_id\":\"vec-kid\","
        "\"hmac\":\"X3u6yOXCOQs2AnwS6wF3WsiLOH97ibKcMt+/U2H+Jnw=\","
        "\"initiated_at\":\"2026-04-21T10:15:00Z\",\"kid\":\"test-2026\","
        "\"protocol_version\":1,\"reason\":\"transfer\",\"to_agent\":\"bob\","
        "\"transcript\":[{\"role\":\"user\",\"text\":\"hello\"},"
        "{\"role\":\"assistant\",\"text\":\"let me transfer you\"}]}";
static const char *const tokens[][2] = {
        { "alice", "fuzz-token-alice-0123456789abcdef" },
        { "bob", "fuzz-token-bob-0123456789abcdef" },
        { "carol", "fuzz-token-carol-0123456789abcdef" },
};

static char root[PATH_MAX - 128];
static struct hub h = { .tmp_fd = -1, .handoff_fd = -1, .state_fd = -1, .ids_fd = -1,
                        .claimed_fd = -1, .cancel_fd = -1 };
static int64_t now;
static bool verbose;
static char session[40];        /* bob's /mcp session, for "SESSION" */

static int64_t fuzz_clock(void)
{
        return now;
}

static void make_dir(const char *sub, mode_t mode)
{
        char path[PATH_MAX];

        snprintf(path, sizeof(path), "%s/%s", root, sub);
        if (mkdir(path, mode) < 0) {
                perror(path);
                abort();
        }
}

/* The names of dirfd's files (not . and ..): how many; with unlink, removed. */
static size_t count_dir(int dirfd, bool unlink)
{
        struct dirent *de;
        DIR *d = opendir_at(dirfd);
        size_t n = 0;

        if (!d)
                abort();
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (unlink)
                        unlinkat(dirfd, de->d_name, 0);
                n++;
        }
        closedir(d);
        return n;
}

/* dirfd/name holds exactly these bytes. */
static bool holds(int dirfd, const char *name, const char *data, size_t len)
{
        _cleanup_free_ char *buf = NULL;
        size_t blen;
        hd_verdict v;

        return hd_read_at(dirfd, name, len + 1, &buf, &blen, &v) == 0 && blen == len &&
               !memcmp(buf, data, len);
}

static void make_spool(void)
{
        static const char *const dirs[] = { "spool", "spool/tmp", "spool/handoff",
                                            "spool/claimed", "spool/archive", "spool/rejected",
                                            "spool/ids", "alice", "bob", "tokens" };
        char conf[2048], path[PATH_MAX], name[64], *cerr = NULL;

        fuzz_temp_root(root, sizeof(root), "hub");
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                make_dir(dirs[i], 0750);
        fuzz_write_file(root, ".", "vector.key", vector_key, strlen(vector_key), 0600);
        for (size_t i = 0; i < ELEMENTSOF(tokens); i++) {
                snprintf(name, sizeof(name), "%s.token", tokens[i][0]);
                snprintf(path, sizeof(path), "%s\n", tokens[i][1]);
                fuzz_write_file(root, "tokens", name, path, strlen(path), 0600);
        }
        snprintf(conf, sizeof(conf),
                 "[spool]\ndir = %1$s/spool\nfsync = no\nmax_file_size = 4K\n"
                 "[keys]\ndefault = %1$s/vector.key\ntest-2026 = %1$s/vector.key\n"
                 "[agent alice]\nstate_dir = %1$s/alice\n"
                 "[agent bob]\nstate_dir = %1$s/bob\n"
                 "[hub]\nlisten = 127.0.0.1:1\ntoken_dir = %1$s/tokens\n"
                 "state_dir = %1$s/hubstate\nmcp_origins = https://ok.example\n", root);
        fuzz_write_file(root, ".", "handoffd.conf", conf, strlen(conf), 0600);
        snprintf(path, sizeof(path), "%s/handoffd.conf", root);
        if (config_load(path, true, &h.cfg, &cerr) < 0) {
                fprintf(stderr, "fuzz_hub: config: %s\n", cerr ? cerr : "?");
                abort();
        }
        /* vec-kid claimed with the vector's bytes; vec-unicode known */
        fuzz_write_file(root, "spool/claimed", "vec-kid.json", kid_json, strlen(kid_json), 0640);
        fuzz_write_file(root, "spool/ids", "vec-unicode", "", 0, 0640);
}

static void at_exit(void)
{
        fuzz_remove_tree(root, "fuzz_hub");
}

static void mcp_session(void);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        int r;

        (void)argc;
        (void)argv;
        verbose = getenv("HD_FUZZ_VERBOSE") != NULL;
        if (sodium_init() < 0)
                abort();
        now = fuzz_now();
        make_spool();
        atexit(at_exit);
        pthread_rwlock_init(&h.tokens_lock, NULL);
        r = hub_setup(&h);
        if (r != 0) {
                fprintf(stderr, "fuzz_hub: hub_setup: %d\n", r);
                abort();
        }
        h.wait_ms = 0;
        h.now_usec = fuzz_clock;
        if (hub_mcp_new(&h, &h.mcp) < 0)
                abort();
        mcp_session();
        return 0;
}

/* bob's session at /mcp, made when there is none (a ping tells). */
static void mcp_session(void)
{
        static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
                                   "\"params\":{\"protocolVersion\":\"2025-11-25\"}}";
        static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}";
        const char *body = session[0] ? ping : init;
        char auth[128];
        struct hub_request q = { .method = "POST", .url = HUB_MCP_PATH,
                                 .content_type = "application/json", .authorization = auth,
                                 .mcp_session = session[0] ? session : NULL };
        struct hub_answer a = { 0 };

        snprintf(auth, sizeof(auth), "Bearer %s", tokens[1][1]);
        if (!hub_request_head(&h, &q, &a)) {
                if (hub_request_body(&h, &q, body, strlen(body)) < 0)
                        abort();
                hub_request_end(&h, &q, &a);
        }
        hub_request_done(&q);
        free(a.body);
        if (body == init) {
                FUZZ_ASSERT(a.status == 200 && a.session[0], "bob's initialize: %u", a.status);
                snprintf(session, sizeof(session), "%s", a.session);
        } else if (a.status == 404) {
                session[0] = '\0';
                mcp_session();
        }
}

/* ---- the request ---------------------------------------------------------- */

struct input {
        char *method, *target, *url, *wait;
        char *authorization, *content_type, *content_length;
        char *origin, *accept, *mcp_session, *mcp_version, *last_event_id;
        const char *body;
        size_t body_len;
};

static void input_free(struct input *in)
{
        free(in->method);
        free(in->target);
        free(in->url);
        free(in->wait);
        free(in->authorization);
        free(in->content_type);
        free(in->content_length);
        free(in->origin);
        free(in->accept);
        free(in->mcp_session);
        free(in->mcp_version);
        free(in->last_event_id);
}

/* A C string of [p, end), as libmicrohttpd's (up to a NUL). */
static char *cstr(const char *p, const char *end)
{
        char *s = strndup(p, (size_t)(end - p));

        if (!s)
                abort();
        return s;
}

static char *xstrdup(const char *s)
{
        char *d = strdup(s);

        if (!d)
                abort();
        return d;
}

static void header(struct input *in, const char *p, const char *eol)
{
        static const char *const names[] = { "Authorization", "Content-Type",
                                             "Content-Length", "Origin", "Accept",
                                             "Mcp-Session-Id", "MCP-Protocol-Version",
                                             "Last-Event-ID" };
        char **slots[] = { &in->authorization, &in->content_type, &in->content_length,
                           &in->origin, &in->accept, &in->mcp_session, &in->mcp_version,
                           &in->last_event_id };
        const char *colon = memchr(p, ':', (size_t)(eol - p));

        if (!colon)
                return;
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                if ((size_t)(colon - p) != strlen(names[i]) ||
                    strncasecmp(p, names[i], strlen(names[i])) || *slots[i])
                        continue;
                const char *v = colon + 1, *e = eol;
                while (v < e && (*v == ' ' || *v == '\t'))
                        v++;
                while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
                        e--;
                *slots[i] = cstr(v, e);
        }
}

static void parse_input(const char *data, size_t size, struct input *in)
{
        const char *end = data + size, *p = data, *nl, *eol, *sp, *q;

        nl = memchr(p, '\n', size);
        eol = nl ? nl : end;
        if (eol > p && eol[-1] == '\r')
                eol--;
        sp = memchr(p, ' ', (size_t)(eol - p));
        in->method = cstr(p, sp ? sp : eol);
        in->target = sp ? cstr(sp + 1, eol) : xstrdup("/");
        q = strchr(in->target, '?');
        in->url = q ? cstr(in->target, q) : xstrdup(in->target);
        for (const char *a = q ? q + 1 : NULL; a && *a;) {
                const char *amp = strchr(a, '&');
                const char *ae = amp ? amp : a + strlen(a);
                if (!in->wait && !strncmp(a, "wait", 4) && (a + 4 == ae || a[4] == '='))
                        in->wait = a + 4 == ae ? xstrdup("") : cstr(a + 5, ae);
                a = amp ? amp + 1 : NULL;
        }
        p = nl ? nl + 1 : end;
        while (p < end) {
                nl = memchr(p, '\n', (size_t)(end - p));
                eol = nl ? nl : end;
                if (eol > p && eol[-1] == '\r')
                        eol--;
                if (eol == p) {
                        p = nl ? nl + 1 : end;
                        break;
                }
                header(in, p, eol);
                p = nl ? nl + 1 : end;
        }
        in->body = p;
        in->body_len = (size_t)(end - p);
}

/* The agent whose token the Authorization value holds, by a plain reading
 * of "Bearer TOKEN" (the scheme in any case), or NULL. */
static const char *token_agent(const char *v)
{
        if (!v || strncasecmp(v, "Bearer ", 7))
                return NULL;
        v += 7;
        while (*v == ' ')
                v++;
        for (size_t i = 0; i < ELEMENTSOF(tokens); i++)
                if (!strcmp(v, tokens[i][1]))
                        return tokens[i][0];
        return NULL;
}

/* ---- the properties -------------------------------------------------------- */

/* An answer of /mcp, and its stream (w, or NULL) taken. */
static void check_mcp(const struct input *in, const struct hub_answer *a, struct hub_wait *w)
{
        _cleanup_json_ json_t *o = NULL;

        if (w) {
                char buf[512];
                long n = w->ops->stream(&h, w, buf, sizeof(buf) - 1);
                FUZZ_ASSERT(a->status == 200 && n > 0, "a stream's first read: %ld", n);
                buf[n] = '\0';
                FUZZ_ASSERT(!strncmp(buf, "id: ", 4) && strstr(buf, "\n\n"),
                            "a stream does not begin with an event with an id: %s", buf);
                w->ops->free(w);
                return;
        }
        if (in->origin && strcasecmp(in->origin, "https://ok.example"))
                FUZZ_ASSERT(a->status == 403, "Origin '%s' answered %u", in->origin, a->status);
        if (!in->origin || !strcasecmp(in->origin, "https://ok.example"))
                FUZZ_ASSERT((a->status == 401) == !token_agent(in->authorization),
                            "/mcp with %s token answered %u",
                            token_agent(in->authorization) ? "a valid" : "no valid", a->status);
        FUZZ_ASSERT(a->body != NULL, "/mcp: %u without a body", a->status);
        if (a->status == 202 || (a->status == 200 && !a->body[0])) {
                FUZZ_ASSERT(!a->body[0] && (a->status == 202 || !strcmp(in->method, "DELETE")),
                            "/mcp: %u with body '%s'", a->status, a->body);
                return;
        }
        o = json_loads(a->body, JSON_REJECT_DUPLICATES, NULL);
        FUZZ_ASSERT(json_is_object(o) &&
                    !strcmp(json_string_value(json_object_get(o, "jsonrpc")) ?: "", "2.0") &&
                    !json_object_get(o, "result") != !json_object_get(o, "error"),
                    "/mcp: %u is no JSON-RPC 2.0 answer: %s", a->status, a->body);
        FUZZ_ASSERT(a->status == 200 || json_object_get(o, "error"),
                    "/mcp: a result with %u", a->status);
        FUZZ_ASSERT(!a->session[0] || a->status == 200, "a session named in a %u", a->status);
}

/* item: the request was a GET of an item, whose 200 answer is the item */
static json_t *check_answer(const struct hub_answer *a, bool item)
{
        static const unsigned known[] = { 200, 400, 401, 403, 404, 405, 409, 413, 415, 422,
                                          500, 503 };
        json_t *o;
        const char *st;
        bool ok = false;

        for (size_t i = 0; i < ELEMENTSOF(known); i++)
                ok |= a->status == known[i];
        FUZZ_ASSERT(ok, "an answer with status %u", a->status);
        FUZZ_ASSERT(a->body != NULL, "status %u without a body", a->status);
        if (a->ctype) {
                /* /healthz and /metrics */
                FUZZ_ASSERT(a->status == 200 && !strncmp(a->ctype, "text/plain", 10),
                            "a %u answer of type %s", a->status, a->ctype);
                return NULL;
        }
        o = json_loads(a->body, JSON_REJECT_DUPLICATES, NULL);
        FUZZ_ASSERT(json_is_object(o), "a %u answer is no JSON object: %s", a->status, a->body);
        st = json_string_value(json_object_get(o, "status"));
        if (a->status != 200) {
                FUZZ_ASSERT(st && !strcmp(st, "rejected") &&
                            json_is_string(json_object_get(o, "reason")) &&
                            json_is_string(json_object_get(o, "detail")),
                            "a %u answer is no refusal with reason and detail: %s", a->status,
                            a->body);
        } else if (item) {
                FUZZ_ASSERT(json_is_string(json_object_get(o, "handoff_id")) && st,
                            "an item without its handoff_id and status: %s", a->body);
                FUZZ_ASSERT(!json_object_get(o, "path"), "an item shows its path: %s", a->body);
        } else {
                FUZZ_ASSERT(st && !strcmp(st, "accepted") &&
                            json_is_string(json_object_get(o, "handoff_id")),
                            "a 200 answer to a POST is not accepted with a handoff_id: %s",
                            a->body);
        }
        return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct input in = { 0 };
        struct hub_request q = { 0 };
        struct hub_answer a = { 0 };
        _cleanup_json_ json_t *ans = NULL;
        const char *agent;
        size_t handoffs, records;
        bool post, item_get;

        parse_input((const char *)data, size, &in);
        q.method = in.method;
        q.url = in.url;
        q.authorization = in.authorization;
        q.content_type = in.content_type;
        q.content_length = in.content_length;
        q.wait = in.wait;
        q.origin = in.origin;
        q.accept = in.accept;
        q.mcp_version = in.mcp_version;
        q.last_event_id = in.last_event_id;
        if (in.mcp_session && !strcmp(in.mcp_session, "SESSION")) {
                free(in.mcp_session);
                in.mcp_session = xstrdup(session);
        }
        q.mcp_session = in.mcp_session;
        handoffs = count_dir(h.handoff_fd, false);
        records = count_dir(h.state_fd, false);

        if (!hub_request_head(&h, &q, &a)) {
                for (size_t off = 0; off < in.body_len; off += CHUNK) {
                        size_t n = in.body_len - off < CHUNK ? in.body_len - off : CHUNK;
                        FUZZ_ASSERT(hub_request_body(&h, &q, in.body + off, n) == 0,
                                    "hub_request_body failed");
                }
                hub_request_end(&h, &q, &a);
        }
        if (!strcmp(in.url, HUB_MCP_PATH)) {
                struct hub_wait *w = a.wait && a.wait->ops->stream ? a.wait : NULL;
                if (w)
                        a.wait = NULL;
                if (a.wait) {
                        /* handoff_complete: answered as it stands */
                        struct hub_wait *x = a.wait;
                        a.wait = NULL;
                        FUZZ_ASSERT(x->ops->finish(&h, x, &a) >= 0, "a wait's finish");
                        x->ops->free(x);
                }
                if (verbose)
                        fprintf(stderr, "fuzz_hub: %s %s -> %u %s\n", in.method, in.target,
                                a.status, a.body ? a.body : "(stream)");
                check_mcp(&in, &a, w);
                /* what a tool dropped, and the sessions an input made */
                count_dir(h.handoff_fd, true);
                count_dir(h.state_fd, true);
                if (a.session[0] && strcmp(a.session, session)) {
                        struct hub_request d = { .method = "DELETE", .url = HUB_MCP_PATH,
                                                 .authorization = in.authorization,
                                                 .mcp_session = a.session };
                        struct hub_answer da = { 0 };
                        if (hub_request_head(&h, &d, &da))
                                free(da.body);
                        hub_request_done(&d);
                }
                mcp_session();
                free(a.body);
                hub_request_done(&q);
                input_free(&in);
                return 0;
        }
        if (a.wait) {
                /* without a watcher: answered as it stands (hub_http.c
                 * does so when there is no room) */
                struct hub_wait *w = a.wait;
                a.wait = NULL;
                FUZZ_ASSERT(w->ops->finish(&h, w, &a) >= 0 || !a.body, "a wait's finish");
                w->ops->free(w);
        }
        if (verbose)
                fprintf(stderr, "fuzz_hub: %s %s -> %u %s\n", in.method, in.target, a.status,
                        a.body ? a.body : "(null)");
        if (!strncmp(in.url, "/a2a/", 5)) {
                /* A2A's answers are JSON-RPC (or a card): fuzz_a2a's to
                 * judge; here only that it is JSON, and the spool and
                 * the records as they were before it */
                _cleanup_json_ json_t *o = a.body ? json_loads(a.body, 0, NULL) : NULL;
                FUZZ_ASSERT(json_is_object(o), "an /a2a/ answer %u is no JSON object: %s",
                            a.status, a.body ? a.body : "(null)");
                if (count_dir(h.handoff_fd, false) != handoffs)
                        count_dir(h.handoff_fd, true);
                free(a.body);
                hub_request_done(&q);
                input_free(&in);
                return 0;
        }
        agent = token_agent(in.authorization);
        post = !strcmp(in.method, "POST") && !strcmp(in.url, PATH_START);
        item_get = (!strcmp(in.method, "GET") || !strcmp(in.method, "HEAD")) &&
                   !strncmp(in.url, PATH_ITEM, strlen(PATH_ITEM)) && strcmp(in.url, PATH_START);
        ans = check_answer(&a, item_get);

        /* the token */
        if (post || item_get)
                FUZZ_ASSERT((a.status == 401) == !agent,
                            "%s %s with %s token answered %u", in.method, in.url,
                            agent ? "a valid" : "no valid", a.status);

        /* the spool */
        if (post && a.status == 200) {
                _cleanup_json_ json_t *doc = json_loadb(in.body, in.body_len, 0, NULL);
                const char *id = json_string_value(json_object_get(ans, "handoff_id"));
                char name[NAME_MAX + 1];
                FUZZ_ASSERT(in.body_len <= h.cfg->max_file_size, "accepted %zu bytes over the cap",
                            in.body_len);
                FUZZ_ASSERT(!strcmp(json_string_value(json_object_get(doc, "from_agent")) ?: "",
                                    agent),
                            "accepted from %s with %s's token",
                            json_string_value(json_object_get(doc, "from_agent")), agent);
                FUZZ_ASSERT(!strcmp(json_string_value(json_object_get(doc, "handoff_id")) ?: "",
                                    id), "accepted under another id: %s", a.body);
                snprintf(name, sizeof(name), "%s.json", id);
                FUZZ_ASSERT(holds(h.handoff_fd, name, in.body, in.body_len) ||
                            holds(h.claimed_fd, name, in.body, in.body_len),
                            "accepted %s, its bytes are not in the spool", id);
                count_dir(h.handoff_fd, true);
                count_dir(h.state_fd, true);
        } else {
                FUZZ_ASSERT(count_dir(h.handoff_fd, false) == handoffs,
                            "handoff/ changed by a %u answer: %s", a.status, a.body);
                FUZZ_ASSERT(count_dir(h.state_fd, false) == records,
                            "a record written for a %u answer: %s", a.status, a.body);
        }
        FUZZ_ASSERT(count_dir(h.tmp_fd, false) == 0, "a file left in tmp/");

        free(a.body);
        hub_request_done(&q);
        input_free(&in);
        return 0;
}
