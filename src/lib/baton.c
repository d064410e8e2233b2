/* The Baton store: one file per session, dirfd/<session_id>.json holding
 * {"baton": {...}, "history": [...], "agents": [...]}.  Patches merge with
 * RFC 7386 merge-patch semantics, except that decision_log only grows.
 *
 * Bounds, so that nobody can brick a session or fill the store: a session
 * belongs to the agents that took part in it (the first stage's sender
 * and recipient, then every recipient it is passed to) and only they may
 * send its next stage; its file stays within BATON_SESSION_MAX bytes and
 * HD_DEFAULT_MAX_VALUES values, the oldest history entries giving way
 * (counted in history_dropped); a session idle for BATON_IDLE_MAX is
 * removed when any stage is applied. */
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
#include "util.h"

#define BATON_SESSION_MAX   (1024 * 1024)
#define BATON_AGENTS_MAX    64
#define BATON_IDLE_MAX      (30 * 24 * 3600LL)
#define BATON_PRUNE_BATCH   64

static int baton_file_name(const char *session, char buf[static 160])
{
        if (!hd_id_valid(session))
                return -EINVAL;
        return xsnprintf(buf, 160, "%s.json", session) < 0 ? -EINVAL : 0;
}

/* The session's document; -EBADMSG with v saying why it is unusable. */
static int baton_load(int dirfd, const char *session_id, json_t **ret, hd_verdict *v)
{
        /* Written within these bounds; a little room for older versions'
         * indented files. */
        hd_limits lim = { .max_size = 2 * BATON_SESSION_MAX };
        json_t *doc = NULL;
        char name[160];
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

int hd_baton_load(int dirfd, const char *session_id, json_t **ret)
{
        hd_verdict v;
        return baton_load(dirfd, session_id, ret, &v);
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
                      int64_t now_usec, json_t **ret_doc, hd_verdict *v)
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
        r = baton_load(dirfd, session, &doc, v);
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

        verdict_clear(v);
        return baton_next(dirfd, payload, from, to, hd_now_usec(), &doc, v);
}

static int baton_apply(int dirfd, const json_t *payload, const char *from, const char *to,
                       int64_t now_usec, bool do_fsync, hd_verdict *v)
{
        _cleanup_json_ json_t *doc = NULL;
        _cleanup_free_ char *buf = NULL;
        char name[160];
        int r;

        verdict_clear(v);
        r = baton_next(dirfd, payload, from, to, now_usec, &doc, v);
        if (r < 0)
                return r;
        buf = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
        if (!buf)
                return -ENOMEM;
        r = baton_file_name(json_string_value(json_object_get(payload, "session_id")), name);
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
