/* Results: the word of the agent that consumed a handoff on what came of
 * it (include/handoff.h, "results").  A small document of fixed members,
 * signed as a handoff from that agent is, so that whoever holds the
 * agent's public key can tell its words from the daemon's; the agent
 * writes it into its own handoffs/ directory (the one place it may write
 * and the daemon watches), and the daemon, which alone writes archive/,
 * verifies it there and records it beside the item (handoffd(8),
 * RESULTS). */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "handoff.h"
#include "layout.h"
#include "util.h"

#define RESULT_TYPE "handoff-result"

static const char *const result_members[] = {
        "type", "protocol_version", "handoff_id", "from_agent", "status", "completed_at",
        "text", "data", "reason", "hmac", "kid", "sig",
};

int hd_result_name(const char *handoff_id, char *buf, size_t n)
{
        if (!handoff_id || !hd_id_valid(handoff_id))
                return -EINVAL;
        return layout_prefixed(LAYOUT_RESULT_IN, handoff_id, buf, n);
}

static bool member_known(const char *k)
{
        for (size_t i = 0; i < ELEMENTSOF(result_members); i++)
                if (!strcmp(k, result_members[i]))
                        return true;
        return false;
}

static const char *str_member(const json_t *doc, const char *k)
{
        return json_string_value(json_object_get(doc, k));
}

/* The members alone, no signature: the rules hd_result_build() and
 * hd_result_check() share. */
static int result_fields(const json_t *doc, const char *handoff_id, const char *agent,
                         hd_verdict *v)
{
        char qa[QBUF_LEN], qb[QBUF_LEN];
        const json_t *pv = json_object_get(doc, "protocol_version");
        const char *id = str_member(doc, "handoff_id"), *from = str_member(doc, "from_agent");
        const char *status = str_member(doc, "status"), *at = str_member(doc, "completed_at");
        const json_t *reason = json_object_get(doc, "reason"), *text = json_object_get(doc, "text");
        const char *k;
        json_t *x;
        int64_t t;

        if (!json_is_object(doc))
                return verdict(v, HD_R_BAD_TYPE, "a result is a JSON object");
        json_object_foreach((json_t *)doc, k, x)
                if (!member_known(k))
                        return verdict(v, HD_R_BAD_TYPE, "a result has no member %s",
                                       quote_untrusted(k, strlen(k), qa, sizeof(qa)));
        if (strcmp(str_member(doc, "type") ?: "", RESULT_TYPE))
                return verdict(v, HD_R_BAD_TYPE, "type is not \"" RESULT_TYPE "\"");
        if (!json_is_integer(pv) || json_integer_value(pv) != HD_PROTOCOL_VERSION)
                return verdict(v, HD_R_BAD_VERSION, "protocol_version is not 1");
        if (!id || !from || !status || !at)
                return verdict(v, HD_R_MISSING_FIELD,
                               "handoff_id, from_agent, status and completed_at are required");
        if (!hd_id_valid(id))
                return verdict(v, HD_R_BAD_ID, "handoff_id %s is not valid",
                               quote_untrusted(id, strlen(id), qa, sizeof(qa)));
        if (handoff_id && strcmp(id, handoff_id))
                return verdict(v, HD_R_BAD_ID, "the result of %s under the name of %s",
                               quote_untrusted(id, strlen(id), qa, sizeof(qa)),
                               quote_untrusted(handoff_id, strlen(handoff_id), qb, sizeof(qb)));
        if (!hd_agent_valid(from))
                return verdict(v, HD_R_BAD_AGENT, "from_agent %s is not an agent name",
                               quote_untrusted(from, strlen(from), qa, sizeof(qa)));
        if (agent && strcmp(from, agent))
                return verdict(v, HD_R_BAD_AGENT, "from_agent %s, in the directory of %s",
                               quote_untrusted(from, strlen(from), qa, sizeof(qa)),
                               quote_untrusted(agent, strlen(agent), qb, sizeof(qb)));
        if (hd_time_parse(at, &t) < 0)
                return verdict(v, HD_R_BAD_TIMESTAMP, "completed_at is not an ISO-8601 time");
        if (text && !json_is_string(text))
                return verdict(v, HD_R_BAD_TYPE, "text is not a string");
        if (!strcmp(status, "completed")) {
                if (reason)
                        return verdict(v, HD_R_BAD_TYPE, "a reason belongs to a failed result");
        } else if (!strcmp(status, "input_required")) {
                /* the question is the text */
                if (reason)
                        return verdict(v, HD_R_BAD_TYPE, "a reason belongs to a failed result");
                if (!text || utf8_blank(json_string_value(text)))
                        return verdict(v, HD_R_MISSING_FIELD,
                                       "an input_required result asks its question: text");
        } else if (!strcmp(status, "failed")) {
                if (!json_is_string(reason) || utf8_blank(json_string_value(reason)))
                        return verdict(v, HD_R_MISSING_FIELD, "a failed result says why: reason");
                if (json_string_length(reason) > HD_RESULT_REASON_MAX)
                        return verdict(v, HD_R_TOO_LARGE, "reason is %zu bytes, at most %d",
                                       json_string_length(reason), HD_RESULT_REASON_MAX);
        } else {
                return verdict(v, HD_R_BAD_TYPE,
                               "status %s is not completed, failed or input_required",
                               quote_untrusted(status, strlen(status), qa, sizeof(qa)));
        }
        return 0;
}

int hd_result_build(const char *handoff_id, const char *agent, const hd_result *res,
                    const hd_key *k, int64_t now_usec, json_t **ret, hd_verdict *v)
{
        _cleanup_json_ json_t *doc = NULL;
        _cleanup_free_ char *buf = NULL;
        char at[HD_TIME_MAX];
        size_t len;
        int r;

        verdict_clear(v);
        if (!handoff_id || !agent || !res || !k || !ret)
                return -EINVAL;
        if (!hd_id_valid(handoff_id))
                return verdict(v, HD_R_BAD_ID, "'%s' is not a handoff_id", handoff_id);
        if (!hd_agent_valid(agent))
                return verdict(v, HD_R_BAD_AGENT, "'%s' is not an agent name", agent);
        if (res->input_required && (res->failed || res->text))
                return verdict(v, HD_R_BAD_TYPE, "a question (input_required) is the text of "
                               "a result that neither failed nor has a text of its own");
        r = hd_time_format(now_usec, at, sizeof(at));
        if (r < 0)
                return r;
        doc = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s}", "type", RESULT_TYPE,
                        "protocol_version", HD_PROTOCOL_VERSION, "handoff_id", handoff_id,
                        "from_agent", agent, "status",
                        res->failed ? "failed" : res->input_required ? "input_required"
                                                                     : "completed",
                        "completed_at", at);
        if (!doc)
                return -ENOMEM;
        if (res->input_required &&
            json_object_set_new(doc, "text", json_string(res->input_required)) < 0)
                return verdict(v, HD_R_BAD_TYPE, "the question is not UTF-8");
        if (res->text && json_object_set_new(doc, "text", json_string(res->text)) < 0)
                return verdict(v, HD_R_BAD_TYPE, "text is not UTF-8");
        if (res->data && json_object_set_new(doc, "data", json_deep_copy(res->data)) < 0)
                return -ENOMEM;
        if (res->failed && json_object_set_new(doc, "reason", json_string(res->failed)) < 0)
                return verdict(v, HD_R_BAD_TYPE, "reason is not UTF-8");
        r = result_fields(doc, handoff_id, agent, v);
        if (r < 0)
                return r;
        r = hd_sign(doc, k);
        if (r < 0)
                return r;
        r = hd_canon_dump(doc, NULL, &buf, &len);
        if (r == -ERANGE)
                return verdict(v, HD_R_NUMBER_OUT_OF_RANGE, "data holds a number JSON cannot carry");
        if (r < 0)
                return r;
        if (len > HD_RESULT_MAX_SIZE)
                return verdict(v, HD_R_TOO_LARGE, "the signed result is %zu bytes, at most %d",
                               len, HD_RESULT_MAX_SIZE);
        *ret = TAKE_PTR(doc);
        return 0;
}

int hd_result_check(const json_t *doc, const char *handoff_id, const char *agent,
                    hd_key_lookup_fn lookup, void *userdata, hd_verdict *v)
{
        int r;

        verdict_clear(v);
        if (!doc)
                return -EINVAL;
        if (!json_is_object(doc))
                return verdict(v, HD_R_BAD_TYPE, "a result is a JSON object");
        /* Authentication first, as for a handoff: nothing unauthenticated
         * steers what is said of the rest. */
        if (lookup) {
                r = hd_auth_check(doc, lookup, userdata, v);
                if (r < 0)
                        return r;
        }
        return result_fields(doc, handoff_id, agent, v);
}

int hd_complete(int dirfd, const char *handoff_id, const char *agent, const hd_result *res,
                const hd_key *k, int64_t now_usec, bool do_fsync, hd_verdict *v)
{
        _cleanup_json_ json_t *doc = NULL;
        _cleanup_free_ char *buf = NULL;
        char name[NAME_MAX + 1];
        size_t len;
        int r;

        verdict_clear(v);
        if (dirfd < 0 || !handoff_id || !hd_id_valid(handoff_id))
                return -EINVAL;
        r = hd_result_name(handoff_id, name, sizeof(name));
        if (r < 0)
                return r;
        r = hd_result_build(handoff_id, agent, res, k, now_usec, &doc, v);
        if (r < 0)
                return r;
        r = hd_canon_dump(doc, NULL, &buf, &len);
        if (r < 0)
                return r;
        /* Read by the daemon, which owns the directory but is not in the
         * agent's group: others' read bit.  Nobody else can reach it:
         * state_dir and handoffs/ are the daemon's and the agent's group's
         * alone (2770, handoffd(8) "AGENTS' DIRECTORIES"). */
        return hd_write_atomic(dirfd, name, buf, len, 0644, do_fsync);
}
