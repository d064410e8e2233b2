/* The Baton store: one file per session, dirfd/<key>.json holding
 * {"baton": {...}, "history": [...], "agents": [...]}.  Patches merge with
 * RFC 7386 merge-patch semantics, except that decision_log only grows.
 *
 * Bounds, so that nobody can brick a session or fill the store: a session
 * belongs to the agents that took part in it (the first stage's sender
 * and recipient, then every recipient it is passed to) and only they may
 * send its next stage; its file stays within BATON_SESSION_MAX bytes and
 * HD_DEFAULT_MAX_VALUES values, the oldest history entries giving way
 * (counted in history_dropped); a session idle for BATON_IDLE_MAX is
 * removed when any stage is applied.
 *
 * A session made by a handoff is scoped by its creator (issue 24.7): its
 * key, and file name, is CREATOR.SESSION_ID, so that nobody can take a
 * name first.  A stage naming a bare SESSION_ID is its sender's own
 * session of that name, else the one of that name it passed through, else
 * (a whole baton) a new one of the sender's; several it passed through
 * must be told apart by their key.  The payload-only API keeps bare keys,
 * as older versions did. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "handoff.h"
#include "payload_baton.h"
#include "payload_str.h"
#include "util.h"

#define BATON_SESSION_MAX   (1024 * 1024)
#define BATON_AGENTS_MAX    64
#define BATON_IDLE_MAX      (30 * 24 * 3600LL)
#define BATON_PRUNE_BATCH   64

#define BATON_NAME_MAX (64 + 1 + 128 + sizeof(".json"))

static int baton_file_name(const char *key, char buf[static BATON_NAME_MAX])
{
        if (!payload_baton_key_valid(key))
                return -EINVAL;
        return xsnprintf(buf, BATON_NAME_MAX, "%s.json", key) < 0 ? -EINVAL : 0;
}

/* The session's document; -EBADMSG with v saying why it is unusable. */
static int baton_load(int dirfd, const char *session_id, json_t **ret, hd_verdict *v)
{
        /* Written within these bounds; a little room for older versions'
         * indented files. */
        hd_limits lim = { .max_size = 2 * BATON_SESSION_MAX };
        json_t *doc = NULL;
        char name[BATON_NAME_MAX];
        int r;

        r = baton_file_name(session_id, name);
        if (r < 0)
                return r;
        r = hd_load_at(dirfd, name, &lim, &doc, v);
        if (r == -EBADMSG) {
                char why[HD_DETAIL_MAX];
                snprintf(why, sizeof(why), "%s", v->detail);
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "baton/1: session '%s' cannot be read: %s: %s", session_id,
                               hd_reason_name(v->reason), why);
        }
        if (r < 0)
                return r;
        if (!json_is_object(json_object_get(doc, "baton")) ||
            !json_is_array(json_object_get(doc, "history"))) {
                json_decref(doc);
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "baton/1: session '%s' has no baton or history", session_id);
        }
        *ret = doc;
        return 0;
}

/* Each stored session named session (bare, or CREATOR.session), until
 * fn returns non-zero (which is returned). */
static int baton_each(int dirfd, const char *session,
                      int (*fn)(const char *key, void *ud), void *ud)
{
        struct dirent *de;
        int r = 0;
        DIR *d;

        d = opendir_at(dirfd);
        if (!d)
                return -errno;
        while (r == 0 && (de = readdir(d))) {
                const char *n = de->d_name, *dot;
                size_t l = strlen(n);
                char key[BATON_NAME_MAX];

                if (n[0] == '.' || l < 6 || strcmp(n + l - 5, ".json") || l - 5 >= sizeof(key))
                        continue;
                memcpy(key, n, l - 5);
                key[l - 5] = '\0';
                dot = strchr(key, '.');
                if (strcmp(dot ? dot + 1 : key, session) || !payload_baton_key_valid(key))
                        continue;
                r = fn(key, ud);
        }
        closedir(d);
        return r;
}

struct baton_pick {
        const char *from;       /* NULL: any session of that name */
        json_t *doc;            /* with from: the first one's, loaded */
        size_t n;
        char key[BATON_NAME_MAX], other[BATON_NAME_MAX];
        int dirfd;
};

static bool agents_have(const json_t *agents, const char *name);

static int pick_one(const char *key, void *ud)
{
        struct baton_pick *p = ud;

        if (p->from) {
                _cleanup_json_ json_t *doc = NULL;
                hd_verdict v;
                json_t *agents;
                if (baton_load(p->dirfd, key, &doc, &v) < 0)
                        return 0;
                agents = json_object_get(doc, "agents");
                /* an older version's session (no agents) is anyone's */
                if (json_is_array(agents) && !agents_have(agents, p->from))
                        return 0;
                if (!p->doc)
                        p->doc = TAKE_PTR(doc);
        }
        if (p->n++ == 0)
                snprintf(p->key, sizeof(p->key), "%s", key);
        else
                snprintf(p->other, sizeof(p->other), "%s", key);
        return 0;
}

static bool baton_exists(int dirfd, const char *key)
{
        char name[BATON_NAME_MAX];
        struct stat st;

        return baton_file_name(key, name) == 0 &&
               fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int hd_baton_load(int dirfd, const char *session_id, json_t **ret)
{
        struct baton_pick p = { .dirfd = dirfd };
        hd_verdict v;
        int r;

        if (!payload_baton_key_valid(session_id))
                return -EINVAL;
        if (strchr(session_id, '.') || baton_exists(dirfd, session_id))
                return baton_load(dirfd, session_id, ret, &v);
        r = baton_each(dirfd, session_id, pick_one, &p);
        if (r < 0)
                return r;
        if (p.n > 1)
                return -ENOTUNIQ;
        if (p.n == 0)
                return -ENOENT;
        return baton_load(dirfd, p.key, ret, &v);
}

/* The session a stage from `from` naming `session` is: its key into key,
 * *exists whether it is stored.  full: the stage carries a whole baton
 * (it may begin a session); else a patch, which needs one to apply to. */
static int baton_resolve(int dirfd, const char *session, const char *from, bool full,
                         char key[static BATON_NAME_MAX], bool *exists, json_t **ret_doc,
                         hd_verdict *v)
{
        struct baton_pick mine = { .dirfd = dirfd, .from = from },
                          any = { .dirfd = dirfd };
        const char *dot = strchr(session, '.');
        char q[72];
        int r;

        if (!from || dot) {
                /* the payload-only API, or a key: that session only; a
                 * new one only under the sender's own name */
                snprintf(key, BATON_NAME_MAX, "%s", session);
                *exists = baton_exists(dirfd, key);
                if (!*exists && from && dot &&
                    ((size_t)(dot - session) != strlen(from) || strncmp(session, from, strlen(from))))
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "baton/1: no session '%s' (only %s may begin %s.%s)",
                                       payload_quote(session, q), from, from, dot + 1);
                return 0;
        }
        if (xsnprintf(key, BATON_NAME_MAX, "%s.%s", from, session) < 0)
                return -EINVAL;
        *exists = baton_exists(dirfd, key);
        if (*exists)
                return 0;
        r = baton_each(dirfd, session, pick_one, &mine);
        _cleanup_json_ json_t *found = mine.doc;
        if (r < 0 && r != -ENOENT)
                return r;
        if (mine.n > 1)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "baton/1: %zu sessions named '%s' passed through %s "
                               "('%s', '%s'): name one by its key", mine.n, session,
                               from, mine.key, mine.other);
        if (mine.n == 1) {
                memcpy(key, mine.key, BATON_NAME_MAX);
                *exists = true;
                if (ret_doc)
                        *ret_doc = TAKE_PTR(found);    /* read once */
                return 0;
        }
        if (!full) {
                r = baton_each(dirfd, session, pick_one, &any);
                if (r < 0 && r != -ENOENT)
                        return r;
                if (any.n > 0)
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "baton/1: session '%s' is not %s's: only the agents it "
                                       "passed through may send its next stage", session, from);
        }
        return 0;       /* a new session of the sender's: from.session */
}

/* RFC 7386: a patch object merges member by member, null removes,
 * anything else (lists included) replaces. */
static json_t *merge_patch(const json_t *target, const json_t *patch)
{
        const char *key;
        json_t *val, *res;

        if (!json_is_object(patch))
                return json_deep_copy(patch);
        res = json_is_object(target) ? json_deep_copy(target) : json_object();
        if (!res)
                return NULL;
        json_object_foreach((json_t *)patch, key, val) {
                if (json_is_null(val)) {
                        json_object_del(res, key);
                        continue;
                }
                json_t *m = merge_patch(json_object_get(res, key), val);
                if (!m || json_object_set_new(res, key, m) < 0) {
                        json_decref(res);
                        return NULL;
                }
        }
        return res;
}

/* Values in v, object keys included, as hd_parse counts them. */
static size_t baton_values(const json_t *v)
{
        const char *key;
        json_t *e;
        size_t i, n = 1;

        if (json_is_object(v))
                json_object_foreach((json_t *)v, key, e)
                        n += 1 + baton_values(e);
        else if (json_is_array(v))
                json_array_foreach(v, i, e)
                        n += baton_values(e);
        return n;
}

static size_t baton_bytes(const json_t *v)
{
        return json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_SORT_KEYS);
}

/* Drop the oldest history entries until doc fits; the newest stays. */
static int baton_fit(json_t *doc, const char *session, hd_verdict *v)
{
        size_t bytes = baton_bytes(doc), values = baton_values(doc);

        while (bytes > BATON_SESSION_MAX || values > HD_DEFAULT_MAX_VALUES) {
                json_t *hist = json_object_get(doc, "history");
                size_t n = json_array_size(hist), drop = 0, b = bytes, c = values;
                json_int_t was = json_integer_value(json_object_get(doc, "history_dropped"));

                /* estimate from the entries' own sizes, then measure */
                while ((b > BATON_SESSION_MAX || c > HD_DEFAULT_MAX_VALUES) && drop + 1 < n) {
                        const json_t *e = json_array_get(hist, drop);
                        b -= baton_bytes(e) + 1;
                        c -= baton_values(e);
                        drop++;
                }
                if (drop == 0 && n > 1)
                        drop = 1;
                if (drop == 0)
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "baton/1: session '%s' would take %zu bytes and %zu values "
                                       "with this stage alone in its history, limits %d and %d",
                                       session, bytes, values, BATON_SESSION_MAX,
                                       HD_DEFAULT_MAX_VALUES);
                for (size_t i = 0; i < drop; i++)
                        if (json_array_remove(hist, 0) < 0)
                                return -ENOMEM;
                if (json_object_set_new(doc, "history_dropped",
                                        json_integer(was + (json_int_t)drop)) < 0)
                        return -ENOMEM;
                bytes = baton_bytes(doc);
                values = baton_values(doc);
        }
        return 0;
}

static bool agents_have(const json_t *agents, const char *name)
{
        const json_t *e;
        size_t i;

        json_array_foreach(agents, i, e)
                if (json_is_string(e) && !strcmp(json_string_value(e), name))
                        return true;
        return false;
}

/* Who may send the next stage: the agents the session passed through.
 * A session of an older version (no "agents") is bound from now on. */
static int baton_bind(json_t *doc, const char *session, const char *from,
                      const char *to, bool exists, hd_verdict *v)
{
        json_t *agents = json_object_get(doc, "agents");

        if (!from)
                return 0;       /* the payload-only API: not bound */
        if (exists && json_is_array(agents) && !agents_have(agents, from))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "baton/1: session '%s' is not %s's: only the agents it passed "
                               "through may send its next stage", session,
                               hd_agent_valid(from) ? from : "(invalid)");
        if (!json_is_array(agents)) {
                agents = json_array();
                if (!agents || json_object_set_new(doc, "agents", agents) < 0)
                        return -ENOMEM;
        }
        for (int k = 0; k < 2; k++) {
                const char *a = k ? to : from;
                if (!a || agents_have(agents, a))
                        continue;
                if (json_array_size(agents) >= BATON_AGENTS_MAX)
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "baton/1: session '%s' already passed through %d agents",
                                       session, BATON_AGENTS_MAX);
                if (json_array_append_new(agents, json_string(a)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* Load the session (an empty one when there is none yet) and build the
 * document this payload leads to, from and to (may be NULL) being the
 * handoff's sender and recipient. */
static int baton_next(int dirfd, const json_t *payload, const char *from, const char *to,
                      int64_t now_usec, json_t **ret_doc, char ret_key[static BATON_NAME_MAX],
                      hd_verdict *v)
{
        _cleanup_json_ json_t *doc = NULL, *next = NULL, *entry = NULL;
        const json_t *cur, *old_log, *new_log, *change;
        char at[HD_TIME_MAX];
        const char *session;
        bool exists = true;
        size_t i;
        int r;

        r = payload_baton_validate(payload, v);
        if (r < 0)
                return r;
        session = json_string_value(json_object_get(payload, "session_id"));
        r = baton_resolve(dirfd, session, from, json_object_get(payload, "baton") != NULL,
                          ret_key, &exists, &doc, v);
        if (r < 0)
                return r;
        session = ret_key;
        r = doc ? 0 : exists ? baton_load(dirfd, session, &doc, v) : -ENOENT;
        if (r == -ENOENT) {
                exists = false;
                doc = json_pack("{s:{},s:[]}", "baton", "history");
                if (!doc)
                        return -ENOMEM;
        } else if (r < 0) {
                return r;
        }
        r = baton_bind(doc, session, from, to, exists, v);
        if (r < 0)
                return r;
        cur = json_object_get(doc, "baton");
        change = json_object_get(payload, "baton");
        next = change ? json_deep_copy(change)
                      : merge_patch(cur, json_object_get(payload, "baton_patch"));
        if (!next)
                return -ENOMEM;
        r = baton_validate(next, "baton", v);
        if (r < 0)
                return r;

        /* Decisions are never taken back: the new log extends the old. */
        old_log = json_object_get(cur, "decision_log");
        new_log = json_object_get(next, "decision_log");
        if (json_array_size(new_log) < json_array_size(old_log))
                return verdict(v, HD_R_DECISION_LOG_REWRITE,
                               "baton/1: decision_log of session '%s' would drop %zu decision(s)",
                               session,
                               json_array_size(old_log) - json_array_size(new_log));
        for (i = 0; i < json_array_size(old_log); i++)
                if (!json_equal(json_array_get(old_log, i),
                                json_array_get(new_log, i)))
                        return verdict(v, HD_R_DECISION_LOG_REWRITE,
                                       "baton/1: decision_log of session '%s' changes decision %zu",
                                       session, i);

        r = hd_time_format(now_usec, at, sizeof(at));
        if (r < 0)
                return r;
        change = json_object_get(payload, "baton_patch");
        if (!change)
                change = json_object_get(payload, "baton");
        entry = json_pack("{s:O,s:s,s:O,s:O}",
                          "stage_id", json_object_get(payload, "stage_id"),
                          "at", at, "patch", change, "baton", next);
        if (!entry ||
            json_object_set(doc, "baton", next) < 0 ||
            json_array_append(json_object_get(doc, "history"), entry) < 0)
                return -ENOMEM;
        r = baton_fit(doc, session, v);
        if (r < 0)
                return r;
        *ret_doc = TAKE_PTR(doc);
        return 0;
}

/* Remove up to BATON_PRUNE_BATCH sessions idle for BATON_IDLE_MAX. */
static void baton_prune(int dirfd, int64_t now_usec)
{
        struct dirent *de;
        struct stat st;
        unsigned n = 0;
        DIR *d;

        d = opendir_at(dirfd);
        if (!d)
                return;
        while ((de = readdir(d)) && n < BATON_PRUNE_BATCH) {
                size_t l = strlen(de->d_name);
                if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".json"))
                        continue;
                if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode))
                        continue;
                if (now_usec / 1000000 - (int64_t)st.st_mtim.tv_sec > BATON_IDLE_MAX &&
                    unlinkat(dirfd, de->d_name, 0) == 0)
                        n++;
        }
        closedir(d);
}

static int baton_check(int dirfd, const json_t *payload, const char *from,
                       const char *to, hd_verdict *v)
{
        _cleanup_json_ json_t *doc = NULL;
        char key[BATON_NAME_MAX];

        verdict_clear(v);
        return baton_next(dirfd, payload, from, to, hd_now_usec(), &doc, key, v);
}

static int baton_apply(int dirfd, const json_t *payload, const char *from, const char *to,
                       int64_t now_usec, bool do_fsync, hd_verdict *v)
{
        _cleanup_json_ json_t *doc = NULL;
        _cleanup_free_ char *buf = NULL;
        char name[BATON_NAME_MAX], key[BATON_NAME_MAX];
        int r;

        verdict_clear(v);
        r = baton_next(dirfd, payload, from, to, now_usec, &doc, key, v);
        if (r < 0)
                return r;
        buf = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
        if (!buf)
                return -ENOMEM;
        r = baton_file_name(key, name);
        if (r < 0)
                return r;
        r = hd_write_atomic(dirfd, name, buf, strlen(buf), 0640, do_fsync);
        if (r == 0)
                baton_prune(dirfd, now_usec);
        return r;
}

int hd_baton_check(int dirfd, const json_t *payload, hd_verdict *v)
{
        return baton_check(dirfd, payload, NULL, NULL, v);
}

int hd_baton_apply(int dirfd, const json_t *payload, int64_t now_usec,
                   bool do_fsync, hd_verdict *v)
{
        return baton_apply(dirfd, payload, NULL, NULL, now_usec, do_fsync, v);
}

static const char *doc_str(const json_t *doc, const char *k)
{
        return json_string_value(json_object_get(doc, k));
}

int hd_baton_check_handoff(int dirfd, const json_t *doc, hd_verdict *v)
{
        const char *from = doc_str(doc, "from_agent");

        if (!from)
                return verdict(v, HD_R_MISSING_FIELD, "baton/1: the handoff has no from_agent");
        return baton_check(dirfd, json_object_get(doc, "payload"), from,
                           doc_str(doc, "to_agent"), v);
}

int hd_baton_apply_handoff(int dirfd, const json_t *doc, int64_t now_usec,
                           bool do_fsync, hd_verdict *v)
{
        const char *from = doc_str(doc, "from_agent");

        if (!from)
                return verdict(v, HD_R_MISSING_FIELD, "baton/1: the handoff has no from_agent");
        return baton_apply(dirfd, json_object_get(doc, "payload"), from,
                           doc_str(doc, "to_agent"), now_usec, do_fsync, v);
}

int hd_baton_load_handoff(int dirfd, const json_t *doc, json_t **ret, char **ret_key)
{
        const json_t *p = json_object_get(doc, "payload");
        const char *from = doc_str(doc, "from_agent");
        const char *session = json_string_value(json_object_get(p, "session_id"));
        char key[BATON_NAME_MAX];
        hd_verdict v;
        bool exists;
        int r;

        if (!from || !session)
                return -EINVAL;
        json_t *found = NULL;
        r = baton_resolve(dirfd, session, from, true, key, &exists, &found, &v);
        if (r < 0)
                return r;
        if (!exists)
                return -ENOENT;
        if (found) {
                *ret = found;
                r = 0;
        } else {
                r = baton_load(dirfd, key, ret, &v);
        }
        if (r == 0 && ret_key) {
                *ret_key = strdup(key);
                if (!*ret_key) {
                        json_decref(*ret);
                        *ret = NULL;
                        return -ENOMEM;
                }
        }
        return r;
}
