/* a2a/1: an A2A 1.0 message as a handoff's payload (payload_a2a.h): its
 * validator (strict: only the fields the hub writes), its Markdown for
 * resume_context, and the conversion of a client's message into it
 * (lenient where A2A lets a client send more: extensions and unknown
 * fields are not carried). */
#include <errno.h>
#include <sodium.h>
#include <string.h>

#include "handoff.h"
#include "key.h"
#include "payload_a2a.h"
#include "payload_names.h"
#include "payload_str.h"
#include "sbuf.h"
#include "util.h"

static const char *const msg_keys[] = {
        "messageId", "contextId", "taskId", "role", "parts", "metadata", "referenceTaskIds",
};
static const char *const part_keys[] = {
        "text", "data", "url", "mediaType", "filename", "metadata",
};

static bool in_list(const char *k, const char *const *list, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!strcmp(k, list[i]))
                        return true;
        return false;
}

/* An id of A2A's (messageId, contextId, a task's): 1 to A2A_MAX_ID bytes,
 * no control character. */
static int a2a_id(const json_t *o, const char *key, bool required, hd_verdict *v)
{
        const json_t *j = json_object_get(o, key);
        const char *s = json_string_value(j);

        if (!j && !required)
                return 0;
        if (!j)
                return verdict(v, HD_R_PAYLOAD_INVALID, PT_A2A ": missing field '%s'", key);
        if (!s || json_string_length(j) == 0 || json_string_length(j) > A2A_MAX_ID ||
            strlen(s) != json_string_length(j))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               PT_A2A ": field '%s' is not a string of 1 to %d bytes", key,
                               A2A_MAX_ID);
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       PT_A2A ": field '%s' holds a control character", key);
        return 0;
}

/* A URI with a scheme (RFC 3986 "scheme:"), no blank or control byte. */
static bool url_ok(const json_t *j)
{
        const char *s = json_string_value(j), *p;

        if (!s || json_string_length(j) > A2A_MAX_URL || strlen(s) != json_string_length(j))
                return false;
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
                return false;
        for (p = s + 1; *p && *p != ':'; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p == '+' || *p == '-' || *p == '.'))
                        return false;
        if (*p != ':' || !p[1])
                return false;
        for (; *p; p++)
                if ((unsigned char)*p <= 0x20 || *p == 0x7f)
                        return false;
        return true;
}

static int part_validate(const json_t *part, size_t i, hd_verdict *v)
{
        const char *k;
        const json_t *val;
        int kinds = 0;
        char q[72];

        if (!json_is_object(part))
                return verdict(v, HD_R_PAYLOAD_INVALID, PT_A2A ": parts[%zu] is not an object", i);
        json_object_foreach((json_t *)part, k, val) {
                if (!in_list(k, part_keys, ELEMENTSOF(part_keys)))
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       PT_A2A ": parts[%zu] has unknown field '%s'", i,
                                       payload_quote(k, q));
        }
        kinds = !!json_object_get(part, "text") + !!json_object_get(part, "data") +
                !!json_object_get(part, "url");
        if (kinds != 1)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               PT_A2A ": parts[%zu] holds not exactly one of text, data, url", i);
        val = json_object_get(part, "text");
        if (val && (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val)))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               PT_A2A ": parts[%zu].text is not a string without NUL", i);
        val = json_object_get(part, "url");
        if (val && !url_ok(val))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               PT_A2A ": parts[%zu].url is not a URI of at most %d bytes", i,
                               A2A_MAX_URL);
        val = json_object_get(part, "metadata");
        if (val && !json_is_object(val))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               PT_A2A ": parts[%zu].metadata is not an object", i);
        if (payload_string(PT_A2A, part, "mediaType", false, NULL, v) < 0 ||
            payload_string(PT_A2A, part, "filename", false, NULL, v) < 0)
                return -EBADMSG;
        return 0;
}

int payload_a2a_validate(const json_t *p, const json_t *envelope,
                         const char *const *roles, hd_verdict *v)
{
        const json_t *parts, *j, *e;
        const char *k, *role;
        char q[72];
        size_t i;
        int r;

        if (!json_is_object(p))
                return verdict(v, HD_R_PAYLOAD_INVALID, PT_A2A ": payload is not an object");
        json_object_foreach((json_t *)p, k, j) {
                if (!in_list(k, msg_keys, ELEMENTSOF(msg_keys)))
                        return verdict(v, HD_R_PAYLOAD_INVALID, PT_A2A ": unknown field '%s'",
                                       payload_quote(k, q));
        }
        r = a2a_id(p, "messageId", true, v);
        if (r >= 0)
                r = a2a_id(p, "contextId", true, v);
        if (r >= 0)
                r = a2a_id(p, "taskId", false, v);
        if (r < 0)
                return r;
        role = json_string_value(json_object_get(p, "role"));
        if (json_object_get(p, "role") &&
            (!role || (strcmp(role, "ROLE_USER") && strcmp(role, "ROLE_AGENT"))))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               PT_A2A ": field 'role' is not ROLE_USER or ROLE_AGENT");
        j = json_object_get(p, "metadata");
        if (j && !json_is_object(j))
                return verdict(v, HD_R_PAYLOAD_INVALID, PT_A2A ": field 'metadata' is not an object");
        j = json_object_get(p, "referenceTaskIds");
        if (j && (!json_is_array(j) || json_array_size(j) > A2A_MAX_PARTS))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               PT_A2A ": field 'referenceTaskIds' is not an array of at most %d",
                               A2A_MAX_PARTS);
        json_array_foreach(j, i, e) {
                if (!json_is_string(e) || json_string_length(e) == 0 ||
                    json_string_length(e) > A2A_MAX_ID ||
                    strlen(json_string_value(e)) != json_string_length(e))
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       PT_A2A ": referenceTaskIds[%zu] is not an id", i);
        }
        parts = json_object_get(p, "parts");
        if (!json_is_array(parts) || json_array_size(parts) == 0 ||
            json_array_size(parts) > A2A_MAX_PARTS)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               PT_A2A ": field 'parts' is not an array of 1 to %d parts",
                               A2A_MAX_PARTS);
        json_array_foreach(parts, i, e) {
                r = part_validate(e, i, v);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* One line of untrusted text: control characters become spaces. */
static void render_inline(struct sbuf *b, const char *s)
{
        for (; s && *s; s++)
                sb_put(b, (unsigned char)*s < 0x20 ? " " : s, 1);
}

static void render_json(struct sbuf *b, const json_t *j)
{
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENCODE_ANY);

        sb_puts(b, "```json\n");
        sb_puts(b, s ? s : "(not representable)");
        sb_puts(b, "\n```\n");
        free(s);
}

int render_a2a(const json_t *p, char **ret)
{
        const json_t *parts = json_object_get(p, "parts"), *part, *j;
        struct sbuf b = {};
        size_t i;

        sb_puts(&b, "## A2A message\n\n**Message:** ");
        render_inline(&b, json_string_value(json_object_get(p, "messageId")));
        sb_puts(&b, "\n**Context:** ");
        render_inline(&b, json_string_value(json_object_get(p, "contextId")));
        sb_puts(&b, "\n");
        if ((j = json_object_get(p, "taskId"))) {
                /* the sender's answer to a question the agent asked */
                sb_puts(&b, "**Continues task:** ");
                render_inline(&b, json_string_value(j));
                sb_puts(&b, " (an answer to its input_required result)\n");
        }
        json_array_foreach(parts, i, part) {
                const char *mt = json_string_value(json_object_get(part, "mediaType"));
                const char *fn = json_string_value(json_object_get(part, "filename"));

                sb_printf(&b, "\n**Part %zu**", i + 1);
                if (fn) {
                        sb_puts(&b, " ");
                        render_inline(&b, fn);
                }
                if (mt) {
                        sb_puts(&b, " (");
                        render_inline(&b, mt);
                        sb_puts(&b, ")");
                }
                sb_puts(&b, ":\n");
                if ((j = json_object_get(part, "text"))) {
                        sb_puts(&b, json_string_value(j));
                        sb_puts(&b, "\n");
                } else if ((j = json_object_get(part, "url"))) {
                        sb_puts(&b, "file at ");
                        render_inline(&b, json_string_value(j));
                        sb_puts(&b, "\n");
                } else {
                        render_json(&b, json_object_get(part, "data"));
                }
        }
        if ((j = json_object_get(p, "metadata"))) {
                sb_puts(&b, "\n**Metadata:**\n");
                render_json(&b, j);
        }
        return sb_take(&b, ret);
}

/* ---- a client's message ------------------------------------------------ */

static int msg_refuse(enum a2a_msg_verdict kind, enum a2a_msg_verdict *ret_kind)
{
        *ret_kind = kind;
        return 0;
}

int a2a_message_payload(const json_t *msg, const char *context_id, json_t **ret,
                        enum a2a_msg_verdict *ret_kind, hd_verdict *v)
{
        _cleanup_json_ json_t *p = NULL, *parts = NULL;
        const json_t *in_parts, *part, *j;
        size_t i;

        verdict_clear(v);
        if (!json_is_object(msg)) {
                verdict(v, HD_R_PAYLOAD_INVALID, "params.message is not an object");
                return msg_refuse(A2A_MSG_INVALID, ret_kind);
        }
        in_parts = json_object_get(msg, "parts");
        p = json_object();
        parts = json_array();
        if (!p || !parts)
                return -ENOMEM;
        json_array_foreach(in_parts, i, part) {
                json_t *out;

                if (json_is_object(part) && json_object_get(part, "raw")) {
                        verdict(v, HD_R_PAYLOAD_INVALID, "parts[%zu]: inline file bytes (raw) "
                                "are not supported: send a file by url", i);
                        return msg_refuse(A2A_MSG_CONTENT_UNSUPPORTED, ret_kind);
                }
                if (!json_is_object(part)) {
                        verdict(v, HD_R_PAYLOAD_INVALID, "parts[%zu] is not an object", i);
                        return msg_refuse(A2A_MSG_INVALID, ret_kind);
                }
                out = json_object();
                if (!out || json_array_append_new(parts, out) < 0)
                        return -ENOMEM;
                for (size_t k = 0; k < ELEMENTSOF(part_keys); k++)
                        if ((j = json_object_get(part, part_keys[k])) &&
                            json_object_set(out, part_keys[k], (json_t *)j) < 0)
                                return -ENOMEM;
        }
        for (size_t k = 0; k < ELEMENTSOF(msg_keys); k++)
                if (strcmp(msg_keys[k], "parts") && (j = json_object_get(msg, msg_keys[k])) &&
                    json_object_set(p, msg_keys[k], (json_t *)j) < 0)
                        return -ENOMEM;
        if (json_is_array(in_parts) && json_object_set(p, "parts", parts) < 0)
                return -ENOMEM;
        if (!json_object_get(p, "contextId") && context_id &&
            json_object_set_new(p, "contextId", json_string(context_id)) < 0)
                return -ENOMEM;
        if (payload_a2a_validate(p, NULL, NULL, v) < 0)
                return msg_refuse(A2A_MSG_INVALID, ret_kind);
        *ret = TAKE_PTR(p);
        return msg_refuse(A2A_MSG_OK, ret_kind);
}

/* ---- task ids ---------------------------------------------------------- */

int payload_a2a_task_id(const hd_key *k, const char *from, const char *to,
                        const char *message_id, char *id, size_t n)
{
        static const char label[] = "handoffd a2a task id 1";
        unsigned char sub[crypto_generichash_KEYBYTES], hash[A2A_TASK_ID_BYTES];
        char hex[2 * A2A_TASK_ID_BYTES + 1];
        crypto_generichash_state s;

        if (!k || k->kind != HD_KEY_HMAC || !k->bytes || !from || !to || !message_id)
                return -EINVAL;
        /* A subkey for this use alone, so the MAC key keys nothing else. */
        crypto_generichash_init(&s, NULL, 0, sizeof(sub));
        crypto_generichash_update(&s, (const unsigned char *)label, sizeof(label));
        crypto_generichash_update(&s, k->bytes, k->len);
        crypto_generichash_final(&s, sub, sizeof(sub));
        crypto_generichash_init(&s, sub, sizeof(sub), sizeof(hash));
        crypto_generichash_update(&s, (const unsigned char *)from, strlen(from) + 1);
        crypto_generichash_update(&s, (const unsigned char *)to, strlen(to) + 1);
        crypto_generichash_update(&s, (const unsigned char *)message_id, strlen(message_id));
        crypto_generichash_final(&s, hash, sizeof(hash));
        sodium_memzero(sub, sizeof(sub));
        sodium_memzero(&s, sizeof(s));
        sodium_bin2hex(hex, sizeof(hex), hash, sizeof(hash));
        return xsnprintf(id, n, A2A_TASK_ID_PREFIX "%s", hex) < 0 ? -ENAMETOOLONG : 0;
}

int payload_a2a_id_check(const json_t *doc, const hd_key *k, hd_verdict *v)
{
        const char *id = json_string_value(json_object_get(doc, "handoff_id"));
        const char *from = json_string_value(json_object_get(doc, "from_agent"));
        const char *to = json_string_value(json_object_get(doc, "to_agent"));
        const char *ptype = json_string_value(json_object_get(doc, "payload_type"));
        const char *mid = json_string_value(
                json_object_get(json_object_get(doc, "payload"), "messageId"));
        char want[sizeof(A2A_TASK_ID_PREFIX) + 2 * A2A_TASK_ID_BYTES];

        if (!id || strncmp(id, A2A_TASK_ID_PREFIX, strlen(A2A_TASK_ID_PREFIX)))
                return 0;
        if (!ptype || strcmp(ptype, PT_A2A) || !mid)
                return verdict(v, HD_R_BAD_A2A_ID, "handoff_id %.80s begins " A2A_TASK_ID_PREFIX
                               " (the hub's A2A task ids) but the payload is not an "
                               PT_A2A " message", id);
        /* The hub signs with an HMAC key only: a document signed another
         * way cannot be one of its tasks. */
        if (!k || k->kind != HD_KEY_HMAC)
                return verdict(v, HD_R_BAD_A2A_ID, "handoff_id %.80s begins " A2A_TASK_ID_PREFIX
                               " (the hub's A2A task ids) but the document is not signed "
                               "with an HMAC key", id);
        if (payload_a2a_task_id(k, from, to, mid, want, sizeof(want)) < 0 ||
            strlen(id) != strlen(want) || sodium_memcmp(id, want, strlen(want)) != 0)
                return verdict(v, HD_R_BAD_A2A_ID, "handoff_id %.80s is not the A2A task id of "
                               "its own from_agent, to_agent and messageId", id);
        return 0;
}
