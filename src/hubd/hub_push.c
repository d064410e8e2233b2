/* A2A push notifications (A2A 1.0 sections 3.1.7-3.1.10, 4.3.3), never
 * lost: each task with configs has a record, state_dir/push.d/AGENT/
 * ID.json (0600, AGENT the token's), that holds its configs and the
 * events not yet delivered to all of them, each numbered by the task's
 * generation (1, 2, ...): the number a stream of the task gives the same
 * event (hub_a2a_task.c), so a receiver of both sees one numbering.  A
 * config's first event is the Task as it was when the config was made,
 * numbered as that generation.  An event is written there before the hub
 * shows the change it tells of (hub_push_observe(), from
 * a2a_task_lookup(), which every answer with a task state goes through,
 * and from SendMessage's answer), so a crash can repeat an event, never
 * skip one.  One thread sends them: for each config, in order, the
 * oldest it has not had, through handoff-push (src/push/), a process
 * with no descriptor of state_dir or the spool, until a 2xx; after a
 * failure the config waits 1, 2, 4 ... HUB_PUSH_RETRY_MAX_S seconds.  A
 * record goes once its task has ended and every event is delivered, or
 * when its task's retention (HUB_A2A_KEEP) ends.  The thread also looks
 * at each task with configs once a second, so a change nobody asked
 * about is queued and sent too. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "files.h"
#include "handoff.h"
#include "hub.h"
#include "hub_a2a.h"
#include "hub_jws.h"
#include "hub_push.h"
#include "push_wire.h"
#include "util.h"

#define RECORD_MAX (64ULL << 20)
#define TOKEN_MAX 1024
#define CFG_ID_MAX 128

struct push_entry {
        char agent[A2A_AGENT_MAX + 1];
        char id[A2A_ID_MAX + 1];
};

static struct {
        pthread_mutex_t lock;           /* the records and the index */
        pthread_cond_t wake;
        pthread_t thread;
        bool running, stop;
        struct push_entry *e;
        size_t n, cap;
        struct push_allow allow;
        char helper[4096];
        /* handoff-push, the sender thread's alone */
        pid_t pid;
        int in_fd, out_fd;
        char rbuf[4096];
        size_t rlen;
        uint64_t seq;
} P = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .pid = -1,
        .in_fd = -1, .out_fd = -1 };

bool hub_push_on(const struct hub *h)
{
        return h->signer && P.running;
}

/* ---- the records ------------------------------------------------------- */

static int push_dir(struct hub *h, const char *agent, bool create, int *ret)
{
        _cleanup_close_ int top = -1;
        int fd;

        if (create && mkdirat(h->state_fd, PUSH_DIR, 0700) < 0 && errno != EEXIST)
                return -errno;
        top = openat(h->state_fd, PUSH_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (top < 0)
                return -errno;
        if (create && mkdirat(top, agent, 0700) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(top, agent, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        *ret = fd;
        return 0;
}

static int rec_read(struct hub *h, const char *agent, const char *id, json_t **ret)
{
        _cleanup_close_ int dfd = -1, fd = -1;
        char name[A2A_ID_MAX + 8];
        struct stat st;
        json_t *j;
        int r;

        snprintf(name, sizeof(name), "%s.json", id);
        r = push_dir(h, agent, false, &dfd);
        if (r < 0)
                return r;
        fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > RECORD_MAX)
                return -EBADMSG;
        j = json_loadfd(fd, 0, NULL);
        if (!json_is_object(j)) {
                json_decref(j);
                return -EBADMSG;
        }
        *ret = j;
        return 0;
}

static int rec_write(struct hub *h, const char *agent, const char *id, const json_t *rec)
{
        _cleanup_close_ int dfd = -1;
        _cleanup_free_ char *body = json_dumps(rec, JSON_COMPACT);
        char name[A2A_ID_MAX + 8];
        int r;

        if (!body)
                return -ENOMEM;
        snprintf(name, sizeof(name), "%s.json", id);
        r = push_dir(h, agent, true, &dfd);
        if (r < 0)
                return r;
        /* always synced: an event is promised once it is here */
        return hd_write_atomic(dfd, name, body, strlen(body), 0600, true);
}

static void rec_remove(struct hub *h, const char *agent, const char *id)
{
        _cleanup_close_ int dfd = -1;
        char name[A2A_ID_MAX + 8];

        snprintf(name, sizeof(name), "%s.json", id);
        if (push_dir(h, agent, false, &dfd) == 0)
                unlinkat(dfd, name, 0);
}

/* The index, under P.lock. */
static ssize_t index_find(const char *agent, const char *id)
{
        for (size_t i = 0; i < P.n; i++)
                if (!strcmp(P.e[i].id, id) && !strcmp(P.e[i].agent, agent))
                        return (ssize_t)i;
        return -1;
}

static size_t index_count(const char *agent)
{
        size_t k = 0;

        for (size_t i = 0; i < P.n; i++)
                k += !strcmp(P.e[i].agent, agent);
        return k;
}

static int index_add(const char *agent, const char *id)
{
        if (index_find(agent, id) >= 0)
                return 0;
        if (P.n == P.cap) {
                size_t nc = P.cap ? P.cap * 2 : 64;
                struct push_entry *ne = realloc(P.e, nc * sizeof(*ne));
                if (!ne)
                        return -ENOMEM;
                P.e = ne;
                P.cap = nc;
        }
        snprintf(P.e[P.n].agent, sizeof(P.e[P.n].agent), "%s", agent);
        snprintf(P.e[P.n].id, sizeof(P.e[P.n].id), "%s", id);
        P.n++;
        return 0;
}

static void index_del(const char *agent, const char *id)
{
        ssize_t i = index_find(agent, id);

        if (i >= 0)
                P.e[i] = P.e[--P.n];
}

/* ---- events ------------------------------------------------------------- */

static bool state_final(const char *s)
{
        return s && (!strcmp(s, "TASK_STATE_COMPLETED") || !strcmp(s, "TASK_STATE_FAILED") ||
                     !strcmp(s, "TASK_STATE_CANCELED") || !strcmp(s, "TASK_STATE_REJECTED"));
}

static int64_t rec_int(const json_t *rec, const char *k)
{
        return json_integer_value(json_object_get(rec, k));
}

/* The Task of a config's first event: task as it is, without its history. */
static json_t *first_event(const json_t *task)
{
        json_t *t = json_deep_copy(task);

        if (!t)
                return NULL;
        json_object_del(t, "history");
        return json_pack("{s:I, s:{s:o}}", "gen", (json_int_t)json_integer_value(json_object_get(
                                 json_object_get(task, "metadata"), A2A_GENERATION)),
                         "event", "task", t);
}

/* The events of task's history (hist, a2a_task_lookup_full()) past what
 * rec has queued, each under its own generation, the one a stream of the
 * task gives it (its SSE id).  *ret_changed. */
static int rec_observe(json_t *rec, const json_t *task, const json_t *hist, bool *ret_changed)
{
        const char *state = a2a_str(json_object_get(task, "status"), "state");
        size_t from = (size_t)rec_int(rec, "gen"), n = json_array_size(hist);
        json_t *evs = json_object_get(rec, "events");

        *ret_changed = false;
        if (!state || from >= n)
                return 0;
        for (size_t g = from; g < n; g++)
                if (json_array_append_new(evs, json_pack("{s:I, s:O}", "gen", (json_int_t)g + 1,
                                                         "event", json_array_get(hist, g))) < 0)
                        return -ENOMEM;
        if (json_object_set_new(rec, "gen", json_integer((json_int_t)n)) < 0 ||
            json_object_set_new(rec, "seen", json_string(state)) < 0)
                return -ENOMEM;
        *ret_changed = true;
        return 0;
}

int hub_push_observe(struct hub *h, const char *agent, const json_t *task, const json_t *hist)
{
        _cleanup_json_ json_t *rec = NULL;
        const char *id = a2a_str(task, "id");
        bool changed = false;
        int r;

        if (!id)
                return 0;
        pthread_mutex_lock(&P.lock);
        if (index_find(agent, id) < 0) {
                pthread_mutex_unlock(&P.lock);
                return 0;
        }
        r = rec_read(h, agent, id, &rec);
        if (r == 0)
                r = rec_observe(rec, task, hist, &changed);
        if (r == 0 && changed)
                r = rec_write(h, agent, id, rec);
        if (r == 0 && changed)
                pthread_cond_signal(&P.wake);
        pthread_mutex_unlock(&P.lock);
        if (r == -ENOENT)
                return 0;       /* delivered and gone meanwhile */
        if (r < 0)
                hub_log("push: task %s of %s: cannot queue its event: %s", id, agent,
                        strerror(-r));
        return r;
}

/* ---- configs ------------------------------------------------------------ */

static bool cfg_id_ok(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n > CFG_ID_MAX)
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                      (*s >= '0' && *s <= '9') || strchr("._-", *s)))
                        return false;
        return true;
}

/* A TaskPushNotificationConfig as given, judged: the config to keep
 * (its id given or derived from what it says, so a retry is the same
 * config) into *ret, or the reason it is refused into why. */
static int cfg_judge(struct hub *h, const json_t *in, const char *task_id, json_t **ret,
                     char *why, size_t wn)
{
        const char *url = a2a_str(in, "url"), *token = a2a_str(in, "token");
        const char *cid = a2a_str(in, "id");
        const json_t *auth = json_object_get(in, "authentication");
        const char *scheme = a2a_str(auth, "scheme"), *cred = a2a_str(auth, "credentials");
        char host[PUSH_HOST_MAX + 1], port_s[8], derived[40];
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
        unsigned port;
        bool tls;
        int r;

        (void)h;
        if (!json_is_object(in) || !url || push_url_split(url, &tls, host, &port) < 0) {
                snprintf(why, wn, "url is not an http or https URL of %d bytes at most "
                         "(no user name in it)", PUSH_URL_MAX);
                return -EINVAL;
        }
        if ((token && strlen(token) > TOKEN_MAX) || (auth && !json_is_object(auth)) ||
            (auth && (!scheme || strlen(scheme) > 64 || strpbrk(scheme, " \r\n"))) ||
            (cred && (strlen(cred) > TOKEN_MAX || strpbrk(cred, "\r\n")))) {
                snprintf(why, wn, "token, authentication.scheme (one word) or "
                         "authentication.credentials is not one the hub can send");
                return -EINVAL;
        }
        if (cid && !cfg_id_ok(cid)) {
                snprintf(why, wn, "id is 1 to %d letters, digits, '.', '_' or '-'", CFG_ID_MAX);
                return -EINVAL;
        }
        /* A2A 1.0 section 13.2: no webhook on this host or its networks
         * unless [hub] push_allow says so */
        snprintf(port_s, sizeof(port_s), "%u", port);
        r = getaddrinfo(host, port_s, &hints, &ai);
        if (r != 0) {
                snprintf(why, wn, "url's host %.64s does not resolve: %s", host, gai_strerror(r));
                return -EINVAL;
        }
        for (struct addrinfo *a = ai; a; a = a->ai_next)
                if (!push_addr_allowed(&P.allow, a->ai_addr)) {
                        char num[64] = "?";
                        getnameinfo(a->ai_addr, a->ai_addrlen, num, sizeof(num), NULL, 0,
                                    NI_NUMERICHOST);
                        snprintf(why, wn, "url's host %.64s is at %s, a private, loopback or "
                                 "link-local address not in [hub] push_allow", host, num);
                        freeaddrinfo(ai);
                        return -EPERM;
                }
        freeaddrinfo(ai);
        if (!cid) {
                unsigned char d[32];
                crypto_hash_sha256_state st;
                const char *parts[] = { url, token ?: "", scheme ?: "", cred ?: "" };
                crypto_hash_sha256_init(&st);
                for (size_t i = 0; i < ELEMENTSOF(parts); i++)
                        crypto_hash_sha256_update(&st, (const unsigned char *)parts[i],
                                                  strlen(parts[i]) + 1);
                crypto_hash_sha256_final(&st, d);
                memcpy(derived, "cfg-", 4);
                sodium_bin2hex(derived + 4, 17, d, 8);
                cid = derived;
        }
        *ret = json_pack("{s:s, s:s, s:s}", "id", cid, "taskId", task_id, "url", url);
        if (*ret && token)
                json_object_set_new(*ret, "token", json_string(token));
        if (*ret && auth)
                json_object_set_new(*ret, "authentication",
                                    cred ? json_pack("{s:s, s:s}", "scheme", scheme,
                                                     "credentials", cred)
                                         : json_pack("{s:s}", "scheme", scheme));
        return *ret ? 0 : -ENOMEM;
}

static json_t *rec_configs(json_t *rec)
{
        return json_object_get(rec, "configs");
}

static ssize_t cfg_find(json_t *rec, const char *cid)
{
        size_t i;
        json_t *c;

        json_array_foreach(rec_configs(rec), i, c)
                if (!strcmp(a2a_str(json_object_get(c, "config"), "id") ?: "", cid))
                        return (ssize_t)i;
        return -1;
}

/* cfg kept for agent's task (task: as the hub shows it now): 0, -EDQUOT
 * (the token's share), -E2BIG (the task's), -errno.  A config's first
 * event is the Task as it is when the config is made, numbered as that
 * generation; the events after it follow. */
static int cfg_attach(struct hub *h, const char *agent, const json_t *task, json_t *cfg)
{
        _cleanup_json_ json_t *rec = NULL, *now = NULL, *hist = NULL;
        const char *id = a2a_str(task, "id"), *cid = a2a_str(cfg, "id");
        struct a2a_kept t;
        bool changed;
        ssize_t at;
        int r;

        /* its events, every turn's (before the lock: the lookup observes) */
        if (a2a_kept_task(agent, id, &t) == 0 &&
            a2a_task_lookup_full(h, agent, &t, 0, &now, &hist) == 0)
                task = now;
        else if (!(hist = a2a_task_history(task)))
                return -ENOMEM;
        pthread_mutex_lock(&P.lock);
        r = index_find(agent, id) >= 0 ? rec_read(h, agent, id, &rec) : -ENOENT;
        if (r == -ENOENT) {
                r = index_count(agent) >= HUB_PUSH_MAX_PER_TOKEN ? -EDQUOT : 0;
                /* what happened before the first config is no one's */
                if (r == 0 && !(rec = json_pack("{s:s, s:I, s:I, s:[], s:[]}", "task", id,
                                                 "created", (json_int_t)time(NULL), "gen",
                                                 (json_int_t)json_array_size(hist), "configs",
                                                 "events")))
                        r = -ENOMEM;
        }
        if (r < 0)
                goto out;
        r = rec_observe(rec, task, hist, &changed);
        if (r < 0)
                goto out;
        at = cfg_find(rec, cid);
        if (at >= 0) {
                /* the same id again: what it says now, its place kept */
                r = json_object_set(json_array_get(rec_configs(rec), (size_t)at), "config", cfg);
        } else if (json_array_size(rec_configs(rec)) >= HUB_PUSH_MAX_PER_TASK) {
                r = -E2BIG;
        } else {
                /* the Task as it is first, then what comes after it */
                r = json_array_append_new(rec_configs(rec),
                                          json_pack("{s:O, s:I, s:I, s:o}", "config", cfg, "sent",
                                                    rec_int(rec, "gen"), "tries", (json_int_t)0,
                                                    "first", first_event(task)));
        }
        if (r == 0 && !a2a_str(rec, "seen"))
                r = json_object_set_new(rec, "seen", json_string(a2a_str(json_object_get(
                        task, "status"), "state") ?: ""));
        if (r == 0)
                r = rec_write(h, agent, id, rec);
        if (r == 0)
                r = index_add(agent, id);
        if (r == 0)
                pthread_cond_signal(&P.wake);
out:
        pthread_mutex_unlock(&P.lock);
        return r < 0 ? r : 0;
}

/* ---- the methods ---------------------------------------------------------- */

/* c's task of id, as the hub shows it: 0 with *ret, or the error answered (1). */
static int call_task(struct a2a_call *c, const char *id, json_t **ret)
{
        struct a2a_kept t;
        int r;

        if (!hub_push_on(c->h))
                return a2a_call_error(c, A2A_PUSH_NOT_SUPPORTED, "push notifications are not "
                                      "supported here (no [hub] signing_key)") ?: 1;
        if (!id)
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.taskId is required") ?: 1;
        r = a2a_kept_task(c->agent, id, &t);
        if (r == 0 && strcmp(t.to, c->name))
                r = -ENOENT;
        if (r == 0)
                r = a2a_task_lookup(c->h, c->agent, &t, ret);
        if (r == -ENOENT)
                return a2a_call_error(c, A2A_TASK_NOT_FOUND, "no such task for this token") ?: 1;
        if (r < 0)
                return a2a_call_internal(c, "push config", r) ?: 1;
        return 0;
}

static int attach_error(struct a2a_call *c, int r)
{
        if (r == -EDQUOT)
                return a2a_call_error(c, RPC_INTERNAL, "this token has push configs on as many "
                                      "tasks as the hub keeps; retry once some have ended");
        if (r == -E2BIG)
                return a2a_call_error(c, RPC_INVALID_PARAMS, "this task has as many push "
                                      "configs as the hub keeps for one task");
        return a2a_call_internal(c, "push config", r);
}

int a2a_push_create(struct a2a_call *c)
{
        _cleanup_json_ json_t *task = NULL, *cfg = NULL;
        const char *tid = a2a_str(c->params, "taskId");
        char why[320];
        int r;

        r = call_task(c, tid, &task);
        if (r != 0)
                return r < 0 ? r : 0;
        r = cfg_judge(c->h, c->params, tid, &cfg, why, sizeof(why));
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return a2a_call_error(c, RPC_INVALID_PARAMS, why);
        r = cfg_attach(c->h, c->agent, task, cfg);
        if (r < 0)
                return attach_error(c, r);
        hub_log("push: config %s of task %s (%s) to %s", a2a_str(cfg, "id"), tid, c->agent,
                a2a_str(cfg, "url"));
        return a2a_answer_result(c->a, c->id, json_incref(cfg));
}

/* The configs of c's task: 0 with *ret (a record, maybe without one),
 * or the error answered (1). */
static int call_record(struct a2a_call *c, json_t **ret)
{
        _cleanup_json_ json_t *task = NULL;
        const char *tid = a2a_str(c->params, "taskId");
        int r = call_task(c, tid, &task);

        if (r != 0)
                return r;
        pthread_mutex_lock(&P.lock);
        r = index_find(c->agent, tid) >= 0 ? rec_read(c->h, c->agent, tid, ret) : -ENOENT;
        pthread_mutex_unlock(&P.lock);
        if (r == -ENOENT)
                r = (*ret = json_pack("{s:[]}", "configs")) ? 0 : -ENOMEM;
        if (r < 0)
                return a2a_call_internal(c, "push config", r) ?: 1;
        return 0;
}

int a2a_push_get(struct a2a_call *c)
{
        _cleanup_json_ json_t *rec = NULL;
        const char *cid = a2a_str(c->params, "id");
        ssize_t at;
        int r;

        if (hub_push_on(c->h) && !cid)
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.id is required");
        r = call_record(c, &rec);
        if (r != 0)
                return r < 0 ? r : 0;
        at = cfg_find(rec, cid);
        if (at < 0)
                return a2a_call_error(c, A2A_TASK_NOT_FOUND, "no push config of that id for "
                                      "this task");
        return a2a_answer_result(c->a, c->id, json_incref(json_object_get(
                json_array_get(rec_configs(rec), (size_t)at), "config")));
}

int a2a_push_list(struct a2a_call *c)
{
        _cleanup_json_ json_t *rec = NULL;
        json_t *out = json_array(), *e;
        size_t i;
        int r;

        if (!out)
                return -ENOMEM;
        r = call_record(c, &rec);
        if (r != 0) {
                json_decref(out);
                return r < 0 ? r : 0;
        }
        json_array_foreach(rec_configs(rec), i, e)
                json_array_append(out, json_object_get(e, "config"));
        return a2a_answer_result(c->a, c->id, json_pack("{s:o}", "configs", out));
}

int a2a_push_delete(struct a2a_call *c)
{
        _cleanup_json_ json_t *task = NULL, *rec = NULL;
        const char *tid = a2a_str(c->params, "taskId"), *cid = a2a_str(c->params, "id");
        ssize_t at;
        int r;

        if (hub_push_on(c->h) && !cid)
                return a2a_call_error(c, RPC_INVALID_PARAMS, "params.id is required");
        r = call_task(c, tid, &task);
        if (r != 0)
                return r < 0 ? r : 0;
        pthread_mutex_lock(&P.lock);
        r = index_find(c->agent, tid) >= 0 ? rec_read(c->h, c->agent, tid, &rec) : -ENOENT;
        if (r == 0 && (at = cfg_find(rec, cid)) >= 0) {
                json_array_remove(rec_configs(rec), (size_t)at);
                if (json_array_size(rec_configs(rec)) == 0) {
                        rec_remove(c->h, c->agent, tid);
                        index_del(c->agent, tid);
                } else {
                        r = rec_write(c->h, c->agent, tid, rec);
                }
        }
        pthread_mutex_unlock(&P.lock);
        if (r < 0 && r != -ENOENT)
                return a2a_call_internal(c, "DeleteTaskPushNotificationConfig", r);
        /* idempotent (3.1.10): a config already gone is deleted */
        return a2a_answer_result(c->a, c->id, json_object());
}

int a2a_push_inline_check(struct a2a_call *c)
{
        const json_t *in = json_object_get(json_object_get(c->params, "configuration"),
                                           "taskPushNotificationConfig");
        _cleanup_json_ json_t *cfg = NULL;
        char why[320];
        int r;

        if (!in || json_is_null(in))
                return 0;
        if (!hub_push_on(c->h))
                return a2a_call_error(c, A2A_PUSH_NOT_SUPPORTED, "push notifications are not "
                                      "supported here (no [hub] signing_key)") ?: 1;
        r = cfg_judge(c->h, in, "-", &cfg, why, sizeof(why));
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return a2a_call_error(c, RPC_INVALID_PARAMS, why) ?: 1;
        return 0;
}

int a2a_push_inline_attach(struct a2a_call *c, const json_t *task)
{
        const json_t *in = json_object_get(json_object_get(c->params, "configuration"),
                                           "taskPushNotificationConfig");
        _cleanup_json_ json_t *cfg = NULL;
        const char *tid = a2a_str(task, "id");
        char why[320];
        int r;

        if (!in || json_is_null(in) || !tid || !hub_push_on(c->h))
                return 0;
        r = cfg_judge(c->h, in, tid, &cfg, why, sizeof(why));
        if (r < 0)
                return r;
        return cfg_attach(c->h, c->agent, task, cfg);
}

/* ---- handoff-push --------------------------------------------------------- */

static void helper_stop(void)
{
        closep(&P.in_fd);
        closep(&P.out_fd);
        if (P.pid > 0) {
                kill(P.pid, SIGKILL);
                waitpid(P.pid, NULL, 0);
        }
        P.pid = -1;
        P.rlen = 0;
}

static int helper_start(struct hub *h)
{
        int in[2], out[2];
        pid_t pid;

        if (pipe2(in, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(out, O_CLOEXEC) < 0) {
                close(in[0]);
                close(in[1]);
                return -errno;
        }
        pid = fork();
        if (pid == 0) {
                /* the child: stdin, stdout, stderr, nothing else of ours */
                if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
                        _exit(127);
                close_range(3, ~0U, 0);
                execl(P.helper, "handoff-push", h->cfg->hub.push_allow ?: "", (char *)NULL);
                _exit(127);
        }
        close(in[0]);
        close(out[1]);
        if (pid < 0) {
                close(in[1]);
                close(out[0]);
                return -errno;
        }
        P.pid = pid;
        P.in_fd = in[1];
        P.out_fd = out[0];
        P.rlen = 0;
        return 0;
}

/* One POST through handoff-push: its reply (a retry when it failed). */
static void helper_post(struct hub *h, const char *url, json_t *headers, const char *body,
                        struct push_reply *out)
{
        _cleanup_json_ json_t *req = NULL;
        _cleanup_free_ char *line = NULL;
        int64_t deadline = mono_usec() + HUB_PUSH_TRY_S * 1000000LL;
        uint64_t n = ++P.seq;
        size_t len, off = 0;

        push_reply_make(n, 0, "handoff-push did not answer", out);
        if (P.pid < 0 && helper_start(h) < 0)
                return;
        req = json_pack("{s:I, s:s, s:O, s:s}", "n", (json_int_t)n, "url", url, "headers",
                        headers, "body", body);
        line = req ? json_dumps(req, JSON_COMPACT) : NULL;
        if (!line)
                return;
        len = strlen(line);
        line[len] = '\n';       /* json_dumps' NUL, ours no more */
        while (off < len + 1) {
                ssize_t w = write(P.in_fd, line + off, len + 1 - off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        helper_stop();
                        return;
                }
                off += (size_t)w;
        }
        for (;;) {
                char *nl = memchr(P.rbuf, '\n', P.rlen);
                if (nl) {
                        struct push_reply r;
                        size_t ll = (size_t)(nl - P.rbuf);
                        int q = push_line_parse(P.rbuf, ll, &r);
                        memmove(P.rbuf, nl + 1, P.rlen - ll - 1);
                        P.rlen -= ll + 1;
                        if (q == 0 && r.n == n) {
                                *out = r;
                                return;
                        }
                        if (q < 0) {
                                hub_log("push: handoff-push wrote what is not its line; "
                                        "restarting it");
                                helper_stop();
                                return;
                        }
                        continue;       /* an answer to a request given up on */
                }
                int64_t left = deadline - mono_usec();
                struct pollfd pfd = { .fd = P.out_fd, .events = POLLIN };
                if (P.rlen == sizeof(P.rbuf) || left <= 0 ||
                    poll(&pfd, 1, (int)(left / 1000) + 1) <= 0) {
                        helper_stop();
                        return;
                }
                ssize_t rd = read(P.out_fd, P.rbuf + P.rlen, sizeof(P.rbuf) - P.rlen);
                if (rd <= 0) {
                        helper_stop();
                        return;
                }
                P.rlen += (size_t)rd;
        }
}

/* ---- the sender thread ------------------------------------------------------ */

/* The headers of event (generation gen) of task to cfg. */
static json_t *post_headers(struct hub *h, const json_t *cfg, const char *task, json_int_t gen)
{
        const json_t *auth = json_object_get(cfg, "authentication");
        const char *url = a2a_str(cfg, "url"), *token = a2a_str(cfg, "token");
        unsigned char rnd[16];
        char jti[33], *v = NULL, *iss = NULL;
        _cleanup_free_ char *jwt = NULL;
        json_t *hs = json_array(), *claims;
        time_t now = time(NULL);

        randombytes_buf(rnd, sizeof(rnd));
        sodium_bin2hex(jti, sizeof(jti), rnd, sizeof(rnd));
        if (asprintf(&iss, "%s://%s", h->tls ? "https" : "http",
                     h->cfg->hub.listen ?: "localhost") < 0)
                iss = NULL;
        claims = json_pack("{s:s?, s:s, s:I, s:I, s:s, s:s, s:I}", "iss", iss, "aud", url,
                           "iat", (json_int_t)now, "exp", (json_int_t)now + HUB_JWT_LIFETIME,
                           "jti", jti, "taskId", task, "generation", gen);
        free(iss);
        jwt = claims ? hub_jwt_make(h->signer, claims) : NULL;
        json_decref(claims);
        if (!hs || !jwt) {
                json_decref(hs);
                return NULL;
        }
#define ADD(...) do { if (asprintf(&v, __VA_ARGS__) >= 0) { \
                json_array_append_new(hs, json_string(v)); free(v); } } while (0)
        ADD("Content-Type: application/a2a+json");
        if (auth && a2a_str(auth, "scheme"))
                ADD("Authorization: %s %s", a2a_str(auth, "scheme"),
                    a2a_str(auth, "credentials") ?: "");
        else
                ADD("Authorization: Bearer %s", jwt);
        ADD("X-Handoff-Push-JWT: %s", jwt);
        ADD("X-Handoff-Generation: %lld", (long long)gen);
        if (token)
                ADD("X-A2A-Notification-Token: %s", token);
#undef ADD
        return hs;
}

static int64_t backoff_ms(json_int_t tries)
{
        int64_t s = 1LL << (tries < 9 ? tries : 9);

        return (s < HUB_PUSH_RETRY_MAX_S ? s : HUB_PUSH_RETRY_MAX_S) * 1000;
}

static int64_t now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Events every config has had go; an ended task with none left goes. */
static void rec_tidy(struct hub *h, const struct push_entry *e, json_t *rec)
{
        json_t *evs = json_object_get(rec, "events"), *c;
        json_int_t low = INT64_MAX;
        size_t i;

        json_array_foreach(rec_configs(rec), i, c)
                if (rec_int(c, "sent") < low)
                        low = rec_int(c, "sent");
        bool firsts = false;

        json_array_foreach(rec_configs(rec), i, c)
                firsts |= json_object_get(c, "first") != NULL;
        while (json_array_size(evs) && rec_int(json_array_get(evs, 0), "gen") <= low)
                json_array_remove(evs, 0);
        if (!json_array_size(evs) && !firsts && state_final(a2a_str(rec, "seen"))) {
                rec_remove(h, e->agent, e->id);
                index_del(e->agent, e->id);
                return;
        }
        rec_write(h, e->agent, e->id, rec);
}

/* One try for the first config of e's that has an event due: true when
 * one was made. */
static bool send_one(struct hub *h, const struct push_entry *e, int64_t *next_due)
{
        _cleanup_json_ json_t *rec = NULL, *cfg = NULL, *hs = NULL;
        _cleanup_free_ char *body = NULL;
        json_t *c, *ev;
        json_int_t gen = 0;
        struct push_reply rp;
        size_t i, j;
        bool found = false;

        pthread_mutex_lock(&P.lock);
        if (rec_read(h, e->agent, e->id, &rec) < 0) {
                pthread_mutex_unlock(&P.lock);
                return false;
        }
        json_array_foreach(rec_configs(rec), i, c) {
                json_int_t sent = rec_int(c, "sent");
                int64_t due = rec_int(c, "next");
                json_t *evs = json_object_get(rec, "events");

                /* the config's first event (the Task), then the next it lacks */
                ev = json_object_get(c, "first");
                for (j = 0; !ev && j < json_array_size(evs); j++)
                        if (rec_int(json_array_get(evs, j), "gen") > sent)
                                ev = json_array_get(evs, j);
                if (!ev)
                        continue;
                if (due > now_ms()) {
                        if (due < *next_due)
                                *next_due = due;
                        continue;
                }
                gen = rec_int(ev, "gen");
                cfg = json_incref(json_object_get(c, "config"));
                body = json_dumps(json_object_get(ev, "event"), JSON_COMPACT);
                break;
        }
        pthread_mutex_unlock(&P.lock);
        if (!cfg || !body)
                return false;
        hs = post_headers(h, cfg, e->id, gen);
        if (!hs)
                return false;
        helper_post(h, a2a_str(cfg, "url"), hs, body, &rp);

        pthread_mutex_lock(&P.lock);
        json_decref(rec);
        rec = NULL;
        if (index_find(e->agent, e->id) >= 0 && rec_read(h, e->agent, e->id, &rec) == 0) {
                ssize_t at = cfg_find(rec, a2a_str(cfg, "id"));
                c = at >= 0 ? json_array_get(rec_configs(rec), (size_t)at) : NULL;
                if (c && rp.verdict == PUSH_DELIVERED) {
                        if (json_object_get(c, "first") &&
                            rec_int(json_object_get(c, "first"), "gen") == gen)
                                json_object_del(c, "first");
                        if (rec_int(c, "sent") < gen)
                                json_object_set_new(c, "sent", json_integer(gen));
                        json_object_set_new(c, "tries", json_integer(0));
                        json_object_set_new(c, "next", json_integer(0));
                        found = true;
                } else if (c) {
                        json_int_t t = rec_int(c, "tries");
                        json_object_set_new(c, "tries", json_integer(t + 1));
                        json_object_set_new(c, "next", json_integer(now_ms() + backoff_ms(t)));
                        hub_log("push: task %s event %lld to %s: %s; again in %llds", e->id,
                                (long long)gen, a2a_str(cfg, "url"), rp.text,
                                (long long)backoff_ms(t) / 1000);
                }
                if (c)
                        rec_tidy(h, e, rec);
        }
        pthread_mutex_unlock(&P.lock);
        return found;
}

static void *push_thread(void *arg)
{
        struct hub *h = arg;

        for (;;) {
                struct push_entry *snap = NULL;
                size_t n;
                int64_t next_due = INT64_MAX;

                pthread_mutex_lock(&P.lock);
                if (P.stop) {
                        pthread_mutex_unlock(&P.lock);
                        break;
                }
                n = P.n;
                snap = n ? malloc(n * sizeof(*snap)) : NULL;
                if (snap)
                        memcpy(snap, P.e, n * sizeof(*snap));
                else
                        n = 0;
                pthread_mutex_unlock(&P.lock);
                for (size_t i = 0; i < n && !P.stop; i++) {
                        struct a2a_kept t;
                        json_t *task = NULL;
                        /* a change nobody asked about: a2a_task_lookup()
                         * queues it */
                        if (a2a_kept_task(snap[i].agent, snap[i].id, &t) == 0 &&
                            a2a_task_lookup(h, snap[i].agent, &t, &task) == 0)
                                json_decref(task);
                        while (!P.stop && send_one(h, &snap[i], &next_due))
                                ;
                }
                free(snap);
                pthread_mutex_lock(&P.lock);
                if (!P.stop) {
                        struct timespec ts;
                        clock_gettime(CLOCK_REALTIME, &ts);
                        ts.tv_sec += 1;
                        pthread_cond_timedwait(&P.wake, &P.lock, &ts);
                }
                pthread_mutex_unlock(&P.lock);
        }
        helper_stop();
        return NULL;
}

/* ---- start, stop, prune ------------------------------------------------------ */

static int index_load(struct hub *h)
{
        _cleanup_close_ int top = openat(h->state_fd, PUSH_DIR, O_RDONLY | O_DIRECTORY |
                                         O_CLOEXEC | O_NOFOLLOW);
        DIR *d, *ad;
        struct dirent *de, *fe;

        if (top < 0)
                return errno == ENOENT ? 0 : -errno;
        d = fdopendir(dup(top));
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                int afd;
                if (!hd_agent_valid(de->d_name))
                        continue;
                afd = openat(top, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (afd < 0 || !(ad = fdopendir(afd))) {
                        if (afd >= 0)
                                close(afd);
                        continue;
                }
                while ((fe = readdir(ad))) {
                        char id[A2A_ID_MAX + 1];
                        size_t l = strlen(fe->d_name);
                        if (l <= 5 || l - 5 > A2A_ID_MAX || strcmp(fe->d_name + l - 5, ".json"))
                                continue;
                        memcpy(id, fe->d_name, l - 5);
                        id[l - 5] = '\0';
                        if (hd_id_valid(id))
                                index_add(de->d_name, id);
                }
                closedir(ad);
        }
        closedir(d);
        return 0;
}

int hub_push_start(struct hub *h)
{
        const char *env = getenv("HD_PUSH_HELPER");
        char bad[160] = "", self[4096];
        ssize_t n;
        int r;

        r = push_allow_parse(h->cfg->hub.push_allow, &P.allow, bad, sizeof(bad));
        if (r < 0) {
                hub_log("%s:%d: [hub] push_allow: %s", h->cfg->path, h->cfg->hub.line_push_allow,
                        bad);
                return HUB_EXIT_CONFIG;
        }
        if (!h->signer)
                return 0;
        /* handoff-push is installed beside handoff-hubd (HD_PUSH_HELPER: a test's) */
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (env && *env) {
                snprintf(P.helper, sizeof(P.helper), "%s", env);
        } else if (n > 0) {
                self[n] = '\0';
                *(strrchr(self, '/') ?: self) = '\0';
                if (xsnprintf(P.helper, sizeof(P.helper), "%s/handoff-push", self) < 0)
                        return HUB_EXIT_RUNTIME;
        }
        if (access(P.helper, X_OK) < 0) {
                hub_log("push notifications off: %s: %s", P.helper, strerror(errno));
                return 0;
        }
        pthread_mutex_lock(&P.lock);
        r = index_load(h);
        pthread_mutex_unlock(&P.lock);
        if (r < 0) {
                hub_log("[hub] state_dir: %s: %s", PUSH_DIR, strerror(-r));
                return HUB_EXIT_RUNTIME;
        }
        P.stop = false;
        r = -pthread_create(&P.thread, NULL, push_thread, h);
        if (r < 0) {
                hub_log("push: cannot start its thread: %s", strerror(-r));
                return HUB_EXIT_RUNTIME;
        }
        P.running = true;
        if (P.n)
                hub_log("push: %zu task(s) with events or configs kept", P.n);
        return 0;
}

void hub_push_stop(struct hub *h)
{
        (void)h;
        if (!P.running)
                return;
        pthread_mutex_lock(&P.lock);
        P.stop = true;
        pthread_cond_signal(&P.wake);
        pthread_mutex_unlock(&P.lock);
        pthread_join(P.thread, NULL);
        P.running = false;
        free(P.e);
        P.e = NULL;
        P.n = P.cap = 0;
}

void hub_push_prune(struct hub *h, int64_t now_s)
{
        pthread_mutex_lock(&P.lock);
        for (size_t i = 0; i < P.n;) {
                json_t *rec = NULL;
                struct push_entry e = P.e[i];
                if (rec_read(h, e.agent, e.id, &rec) == 0 &&
                    rec_int(rec, "created") + HUB_A2A_KEEP < now_s) {
                        hub_log("push: task %s of %s: its retention ended with %zu event(s) "
                                "undelivered", e.id, e.agent,
                                json_array_size(json_object_get(rec, "events")));
                        rec_remove(h, e.agent, e.id);
                        index_del(e.agent, e.id);
                } else {
                        i++;
                }
                json_decref(rec);
        }
        pthread_mutex_unlock(&P.lock);
}
