/* vox/1.0: the Vox cross-agent handoff contract (JSON Schema draft-07),
 * plus the binding of its agents to the signed envelope. */
#include <string.h>

#include "handoff.h"
#include "payload_str.h"
#include "payload_names.h"
#include "payload_vox.h"
#include "util.h"

#define VOX_MAX_FILES 5

/* A relative path that stays below where it is resolved. */
static bool vox_path_ok(const char *s)
{
        const char *p = s;

        if (!*s || *s == '/')
                return false;
        while (*p) {
                size_t n = strcspn(p, "/");
                if (n == 2 && p[0] == '.' && p[1] == '.')
                        return false;
                p += n;
                if (*p == '/')
                        p++;
        }
        return true;
}

static int vox_agent_match(const json_t *envelope, const char *env_key,
                           const char *key, const char *val, hd_verdict *v)
{
        const char *e = json_string_value(json_object_get(envelope, env_key));
        char q1[72], q2[72];

        if (!e || strcmp(e, val) != 0)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "vox/1.0: field '%s' '%s' does not match %s '%s'",
                               key, payload_quote(val, q1), env_key,
                               e ? payload_quote(e, q2) : "(none)");
        return 0;
}

int payload_vox_validate(const json_t *p, const json_t *envelope,
                         const char *const *roles, hd_verdict *v)
{
        static const char *const strings[] = {
                "version", "session_id", "source_agent", "target_agent", "goal",
        };
        const char *version, *session, *source, *target;
        const json_t *files;
        char q[72];
        size_t i;
        int r;

        if (!json_is_object(p))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "vox/1.0: payload is not an object");
        for (i = 0; i < ELEMENTSOF(strings); i++) {
                r = payload_string(PT_VOX, p, strings[i], true, NULL, v);
                if (r < 0)
                        return r;
        }
        r = payload_string_array(PT_VOX, p, "completed_steps", true, v);
        if (r >= 0)
                r = payload_string_array(PT_VOX, p, "pending_blockers", true, v);
        if (r >= 0)
                r = payload_string_array(PT_VOX, p, "relevant_files", false, v);
        if (r >= 0)
                r = payload_string(PT_VOX, p, "cryptographic_obo_token", false,
                                   NULL, v);
        if (r < 0)
                return r;

        version = json_string_value(json_object_get(p, "version"));
        if (strcmp(version, "1.0") != 0)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "vox/1.0: field 'version' must be \"1.0\", not '%s'",
                               payload_quote(version, q));
        /* The session id names the delivered file .vox/handoffs/<id>.json. */
        session = json_string_value(json_object_get(p, "session_id"));
        if (!hd_id_valid(session))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "vox/1.0: field 'session_id' '%s' is not a valid id",
                               payload_quote(session, q));
        if (!*json_string_value(json_object_get(p, "goal")))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "vox/1.0: field 'goal' is empty");

        files = json_object_get(p, "relevant_files");
        if (json_array_size(files) > VOX_MAX_FILES)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "vox/1.0: field 'relevant_files' has %zu items, at most %d",
                               json_array_size(files), VOX_MAX_FILES);
        for (i = 0; i < json_array_size(files); i++) {
                const char *f = json_string_value(json_array_get(files, i));
                if (!vox_path_ok(f))
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "vox/1.0: field 'relevant_files' item '%s' is not a relative path below the repository",
                                       payload_quote(f, q));
        }

        if (!envelope)
                return 0;
        source = json_string_value(json_object_get(p, "source_agent"));
        target = json_string_value(json_object_get(p, "target_agent"));
        r = vox_agent_match(envelope, "to_agent", "target_agent", target, v);
        if (r < 0)
                return r;
        return vox_agent_match(envelope, "from_agent", "source_agent", source, v);
}
