/* The Baton store: one file per session, dirfd/<session_id>.json holding
 * {"baton": {...}, "history": [...]}.  Patches merge with RFC 7386
 * merge-patch semantics, except that decision_log only grows. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "handoff.h"
#include "payload_baton.h"
#include "util.h"

/* A session file only we write, but it grows with every stage. */
#define BATON_FILE_MAX      (8 * 1024 * 1024)
#define BATON_HISTORY_MAX   1000

static int baton_file_name(const char *session, char buf[static 160])
{
        if (!hd_id_valid(session))
                return -EINVAL;
        return xsnprintf(buf, 160, "%s.json", session) < 0 ? -EINVAL : 0;
}

int hd_baton_load(int dirfd, const char *session_id, json_t **ret)
{
        hd_limits lim = { .max_size = BATON_FILE_MAX };
        json_t *doc = NULL;
        hd_verdict v;
        char name[160];
        int r;

        r = baton_file_name(session_id, name);
        if (r < 0)
                return r;
        r = hd_load_at(dirfd, name, &lim, &doc, &v);
        if (r < 0)
                return r;
        if (!json_is_object(json_object_get(doc, "baton")) ||
            !json_is_array(json_object_get(doc, "history"))) {
                json_decref(doc);
                return -EBADMSG;
        }
        *ret = doc;
        return 0;
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

/* Load the session (an empty one when there is none yet) and compute the
 * baton this payload leads to. */
static int baton_next(int dirfd, const json_t *payload, json_t **ret_doc,
                      json_t **ret_baton, hd_verdict *v)
{
        _cleanup_json_ json_t *doc = NULL, *next = NULL;
        const json_t *cur, *old_log, *new_log, *change;
        const char *session;
        size_t i;
        int r;

        r = payload_baton_validate(payload, v);
        if (r < 0)
                return r;
        session = json_string_value(json_object_get(payload, "session_id"));
        r = hd_baton_load(dirfd, session, &doc);
        if (r == -ENOENT) {
                doc = json_pack("{s:{},s:[]}", "baton", "history");
                if (!doc)
                        return -ENOMEM;
        } else if (r < 0) {
                return r;
        }
        if (json_array_size(json_object_get(doc, "history")) >= BATON_HISTORY_MAX)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "baton/1: session '%s' has %d stages, the most kept",
                               session, BATON_HISTORY_MAX);
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
        *ret_doc = TAKE_PTR(doc);
        *ret_baton = TAKE_PTR(next);
        return 0;
}

int hd_baton_check(int dirfd, const json_t *payload, hd_verdict *v)
{
        _cleanup_json_ json_t *doc = NULL, *next = NULL;

        verdict_clear(v);
        return baton_next(dirfd, payload, &doc, &next, v);
}

int hd_baton_apply(int dirfd, const json_t *payload, int64_t now_usec,
                   bool do_fsync, hd_verdict *v)
{
        _cleanup_json_ json_t *doc = NULL, *next = NULL, *entry = NULL;
        _cleanup_free_ char *buf = NULL;
        const json_t *change;
        char at[HD_TIME_MAX], name[160];
        int r;

        verdict_clear(v);
        r = baton_next(dirfd, payload, &doc, &next, v);
        if (r < 0)
                return r;
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
        buf = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
        if (!buf)
                return -ENOMEM;
        r = baton_file_name(json_string_value(json_object_get(payload,
                                                               "session_id")),
                            name);
        if (r < 0)
                return r;
        return hd_write_atomic(dirfd, name, buf, strlen(buf), 0640, do_fsync);
}
