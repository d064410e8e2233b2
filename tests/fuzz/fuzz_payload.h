/* The body of the payload targets (fuzz_payload_*.c): the input is a
 * payload file as `handoffctl submit --payload` reads it.  hd_payload_load
 * parses and validates it bare; what loads must also validate inside an
 * envelope naming the agents it names, and then render. */
#ifndef HD_FUZZ_PAYLOAD_H
#define HD_FUZZ_PAYLOAD_H

#include <string.h>

#include "fuzz.h"

/* The envelope's agents: those the payload names when they are valid
 * agent names (vox binds them to the envelope), else fixed ones. */
static inline const char *fuzz_agent(const json_t *p, const char *key,
                                     const char *fallback)
{
        const char *s = json_string_value(json_object_get(p, key));

        return s && hd_agent_valid(s) ? s : fallback;
}

static inline int fuzz_payload(const char *type, const uint8_t *data,
                               size_t size)
{
        _cleanup_json_ json_t *p = NULL, *env = NULL;
        _cleanup_free_ char *md = NULL;
        const char *from, *to;
        hd_verdict v;
        int r;

        r = hd_payload_load(type, fuzz_path_of(data, size), &p, &v);
        if (r < 0) {
                FUZZ_ASSERT(r == -EBADMSG || r == -ENOMEM,
                            "hd_payload_load: %s", strerror(-r));
                if (r == -EBADMSG)
                        FUZZ_DETAIL_OK(&v, "hd_payload_load");
                return 0;
        }
        from = fuzz_agent(p, "source_agent", "alice");
        to = fuzz_agent(p, "target_agent", "bob");
        if (!strcmp(from, to))
                to = strcmp(from, "bob") ? "bob" : "carol";
        env = json_pack("{s:s, s:s, s:s, s:O}", "from_agent", from,
                        "to_agent", to, "payload_type", type, "payload", p);
        if (!env)
                return 0;
        r = hd_payload_validate(env, NULL, &v);
        FUZZ_DETAIL_OK(&v, "hd_payload_validate");
        /* vox binds its agents to the envelope: only when both are names
         * taken from the payload must it pass. */
        if (strcmp(type, "vox/1.0") ||
            (!strcmp(from, json_string_value(json_object_get(p, "source_agent"))) &&
             !strcmp(to, json_string_value(json_object_get(p, "target_agent")))))
                FUZZ_ASSERT(r == 0, "%s: loads alone but not in an envelope: %s: %s",
                            type, hd_reason_name(v.reason), v.detail);
        hd_payload_target(type, p);
        r = hd_payload_render(type, p, &md);
        FUZZ_ASSERT(r == 0 || r == -ENOMEM, "%s: a valid payload does not render: %s",
                    type, strerror(-r));
        if (r == 0)
                FUZZ_ASSERT(md != NULL, "%s: render gave no text", type);
        return 0;
}

#endif
