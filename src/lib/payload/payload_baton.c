/* baton/1: the shape of a Baton payload ({session_id, stage_id, baton} or
 * {session_id, stage_id, baton_patch}) and of a baton itself.  The store
 * and the merge live in baton.c. */
#include <stdio.h>
#include <string.h>

#include "handoff.h"
#include "payload_names.h"
#include "payload_baton.h"
#include "payload_str.h"
#include "util.h"

#define BATON_GOAL_MAX 1024

static const char *const baton_lists[] = {
        "current_state", "decision_log", "open_questions", "constraints",
        "work_scope", "acceptance",
};

static int baton_artifacts(const json_t *a, const char *where, hd_verdict *v)
{
        const json_t *e;
        char name[96];
        size_t i;
        int r;

        if (!json_is_array(a))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "baton/1: field '%s.artifacts' is not an array",
                               where);
        if (json_array_size(a) > PAYLOAD_MAX_ITEMS)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "baton/1: field '%s.artifacts' has too many items",
                               where);
        json_array_foreach(a, i, e) {
                const char *key;
                const json_t *val;

                snprintf(name, sizeof(name), "baton/1: %s.artifacts[%zu]",
                         where, i);
                if (!json_is_object(e))
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "%s is not an object", name);
                r = payload_string(name, e, "id", true, NULL, v);
                if (r >= 0)
                        r = payload_string(name, e, "type", true, NULL, v);
                if (r >= 0)
                        r = payload_string(name, e, "hash", true, NULL, v);
                if (r >= 0)
                        r = payload_string(name, e, "summary_ref", false, NULL, v);
                if (r < 0)
                        return r;
                json_object_foreach((json_t *)e, key, val)
                        if (strcmp(key, "id") && strcmp(key, "type") &&
                            strcmp(key, "hash") && strcmp(key, "summary_ref")) {
                                char q[72];
                                return verdict(v, HD_R_PAYLOAD_INVALID,
                                               "%s: unknown field '%s'", name,
                                               payload_quote(key, q));
                        }
        }
        return 0;
}

static bool baton_known(const char *key)
{
        if (!strcmp(key, "goal") || !strcmp(key, "artifacts"))
                return true;
        for (size_t i = 0; i < ELEMENTSOF(baton_lists); i++)
                if (!strcmp(key, baton_lists[i]))
                        return true;
        return false;
}

/* The fields of a baton or a patch; a patch may hold null (reset) for
 * anything but its goal, and need not hold a goal. */
static int baton_fields(const json_t *b, const char *where, bool patch,
                        hd_verdict *v)
{
        char type[64], q[72];
        const char *key, *goal = NULL;
        const json_t *val;
        int r;

        if (!json_is_object(b))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "baton/1: field '%s' is not an object", where);
        json_object_foreach((json_t *)b, key, val) {
                if (!baton_known(key))
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "baton/1: unknown field '%s.%s'", where,
                                       payload_quote(key, q));
                if (patch && json_is_null(val) && strcmp(key, "goal") != 0)
                        continue;
                if (!strcmp(key, "artifacts")) {
                        r = baton_artifacts(val, where, v);
                        if (r < 0)
                                return r;
                }
        }
        snprintf(type, sizeof(type), "baton/1: %s", where);
        r = payload_string(type, b, "goal", !patch, &goal, v);
        if (r < 0)
                return r;
        if (goal && (!*goal || strlen(goal) > BATON_GOAL_MAX ||
                     strpbrk(goal, "\n\r")))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "baton/1: field '%s.goal' must be one non-empty line of at most %d bytes",
                               where, BATON_GOAL_MAX);
        for (size_t i = 0; i < ELEMENTSOF(baton_lists); i++) {
                if (patch && json_is_null(json_object_get(b, baton_lists[i])))
                        continue;
                r = payload_string_array(type, b, baton_lists[i], false, v);
                if (r < 0)
                        return r;
        }
        return 0;
}

int baton_validate(const json_t *b, const char *where, hd_verdict *v)
{
        return baton_fields(b, where, false, v);
}

int payload_baton_validate(const json_t *p, hd_verdict *v)
{
        const json_t *full, *patch, *val;
        const char *session, *stage, *key;
        char q[72];
        int r;

        if (!json_is_object(p))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "baton/1: payload is not an object");
        r = payload_string(PT_BATON, p, "session_id", true, &session, v);
        if (r >= 0)
                r = payload_string(PT_BATON, p, "stage_id", true, &stage, v);
        if (r < 0)
                return r;
        /* The session id names the store file baton/<key>.json: a bare
         * id, or a session's key CREATOR.ID (baton.c). */
        if (!payload_baton_key_valid(session))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "baton/1: field 'session_id' '%s' is not a valid id",
                               payload_quote(session, q));
        if (!hd_id_valid(stage))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "baton/1: field 'stage_id' '%s' is not a valid id",
                               payload_quote(stage, q));
        json_object_foreach((json_t *)p, key, val)
                if (strcmp(key, "session_id") && strcmp(key, "stage_id") &&
                    strcmp(key, "baton") && strcmp(key, "baton_patch"))
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "baton/1: unknown field '%s'",
                                       payload_quote(key, q));
        full = json_object_get(p, "baton");
        patch = json_object_get(p, "baton_patch");
        if (full && patch)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "baton/1: both 'baton' and 'baton_patch'");
        if (!full && !patch)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "baton/1: missing field 'baton' or 'baton_patch'");
        if (full)
                return baton_fields(full, "baton", false, v);
        return baton_fields(patch, "baton_patch", true, v);
}

bool payload_baton_key_valid(const char *key)
{
        const char *dot = strchr(key, '.');
        char agent[65];

        if (!dot)
                return hd_id_valid(key);
        if ((size_t)(dot - key) >= sizeof(agent))
                return false;
        memcpy(agent, key, (size_t)(dot - key));
        agent[dot - key] = '\0';
        return hd_agent_valid(agent) && hd_id_valid(dot + 1);
}
