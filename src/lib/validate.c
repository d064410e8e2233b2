/* Validation of protocol_version 1 documents (names are name.c's): fields
 * and types, freshness, and hd_verify(), which runs the daemon's checks in
 * order: key and MAC or signature (sig.c), fields, payload, freshness.
 * Authentication comes before anything that reads field values, so a
 * tampered field reads as bad_mac (or bad_signature), and nothing
 * unauthenticated steers the later checks. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "canon_src.h"
#include "handoff.h"
#include "payload_a2a.h"
#include "util.h"

#define USEC_PER_SEC INT64_C(1000000)

#define Q(js, qb) quote_untrusted(json_string_value(js), json_string_length(js), (qb), sizeof(qb))

static const char *type_name(const json_t *j)
{
        switch (json_typeof(j)) {
        case JSON_OBJECT:  return "an object";
        case JSON_ARRAY:   return "an array";
        case JSON_STRING:  return "a string";
        case JSON_INTEGER: return "an integer";
        case JSON_REAL:    return "a real";
        case JSON_TRUE:
        case JSON_FALSE:   return "a boolean";
        case JSON_NULL:    return "null";
        }
        return "unknown";
}

static const char *const required_fields[] = {
        "handoff_id", "from_agent", "to_agent", "initiated_at", "expires_at",
};

/* Every field of protocol_version 1 that must be a string when present. */
static const char *const string_fields[] = {
        "handoff_id", "from_agent", "to_agent", "initiated_at", "expires_at",
        "reason", "caller_hash", "kid",
};

static int validate_caller_hash(const json_t *j, hd_verdict *v)
{
        const char *s = json_string_value(j);
        char qb[QBUF_LEN];

        if (json_string_length(j) != 16)
                goto bad;
        for (size_t i = 0; i < 16; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        goto bad;
        return 0;
bad:
        return verdict(v, HD_R_BAD_TYPE,
                       "caller_hash %s is not 16 lowercase hex chars", Q(j, qb));
}

/* transcript[i].key, a string: 0 and *ret, or the verdict. */
static int transcript_string(const json_t *e, size_t i, const char *key, const json_t **ret,
                             hd_verdict *v)
{
        const json_t *s = json_object_get(e, key);

        if (!s)
                return verdict(v, HD_R_BAD_TYPE, "transcript[%zu].%s is missing", i, key);
        if (!json_is_string(s))
                return verdict(v, HD_R_BAD_TYPE, "transcript[%zu].%s is %s, not a string",
                               i, key, type_name(s));
        *ret = s;
        return 0;
}

static int validate_transcript(const json_t *t, hd_verdict *v)
{
        const json_t *e;
        size_t i;

        if (!json_is_array(t))
                return verdict(v, HD_R_BAD_TYPE, "transcript is %s, not an array",
                               type_name(t));
        json_array_foreach(t, i, e) {
                const json_t *role, *text;
                const char *r;
                char qb[QBUF_LEN];
                int q;

                if (!json_is_object(e))
                        return verdict(v, HD_R_BAD_TYPE,
                                       "transcript[%zu] is %s, not an object",
                                       i, type_name(e));
                q = transcript_string(e, i, "role", &role, v);
                if (q < 0)
                        return q;
                r = json_string_value(role);
                if (strcmp(r, "user") != 0 && strcmp(r, "assistant") != 0 &&
                    strcmp(r, "system") != 0)
                        return verdict(v, HD_R_BAD_TYPE,
                                       "transcript[%zu].role %s is not user, assistant or system",
                                       i, Q(role, qb));
                q = transcript_string(e, i, "text", &text, v);
                if (q < 0)
                        return q;
        }
        return 0;
}

/* A time field that must be there and parse; bad_timestamp otherwise. */
static int get_time(const json_t *doc, const char *field, int64_t *ret,
                    hd_verdict *v)
{
        const json_t *j = json_object_get(doc, field);
        char qb[QBUF_LEN];

        if (!j)
                return verdict(v, HD_R_BAD_TIMESTAMP, "%s is missing", field);
        if (!json_is_string(j))
                return verdict(v, HD_R_BAD_TIMESTAMP, "%s is %s, not a string",
                               field, type_name(j));
        if (hd_time_parse(json_string_value(j), ret) < 0)
                return verdict(v, HD_R_BAD_TIMESTAMP,
                               "%s %s is not an ISO-8601 time with an offset",
                               field, Q(j, qb));
        return 0;
}

/* Both time fields, initiated_at first: its verdict wins when both are
 * bad, in hd_validate() and hd_check_fresh() alike. */
static int get_times(const json_t *doc, int64_t *ret_init, int64_t *ret_exp,
                     hd_verdict *v)
{
        int r = get_time(doc, "initiated_at", ret_init, v);

        if (r < 0)
                return r;
        return get_time(doc, "expires_at", ret_exp, v);
}

int hd_validate(const json_t *doc, hd_verdict *v)
{
        const json_t *pv, *j, *from, *to;
        int64_t t_init, t_exp;
        char qb[QBUF_LEN];
        int r;

        verdict_clear(v);
        if (!doc)
                return -EINVAL;
        if (!json_is_object(doc))
                return verdict(v, HD_R_BAD_TYPE, "document is %s, not an object",
                               type_name(doc));

        pv = json_object_get(doc, "protocol_version");
        if (!pv)
                return verdict(v, HD_R_MISSING_FIELD, "protocol_version is missing");
        /* An integer 1 only: 1.0 and "1" are other documents to Python. */
        if (!json_is_integer(pv) || json_integer_value(pv) != HD_PROTOCOL_VERSION)
                return verdict(v, HD_R_BAD_VERSION,
                               "protocol_version is not the integer %d",
                               HD_PROTOCOL_VERSION);

        for (size_t i = 0; i < ELEMENTSOF(required_fields); i++)
                if (!json_object_get(doc, required_fields[i]))
                        return verdict(v, HD_R_MISSING_FIELD, "%s is missing",
                                       required_fields[i]);
        for (size_t i = 0; i < ELEMENTSOF(string_fields); i++) {
                j = json_object_get(doc, string_fields[i]);
                if (j && !json_is_string(j))
                        return verdict(v, HD_R_BAD_TYPE, "%s is %s, not a string",
                                       string_fields[i], type_name(j));
        }

        j = json_object_get(doc, "handoff_id");
        if (!hd_id_valid(json_string_value(j)) ||
            strlen(json_string_value(j)) != json_string_length(j))
                return verdict(v, HD_R_BAD_ID, "handoff_id %s is not a safe id",
                               Q(j, qb));
        from = json_object_get(doc, "from_agent");
        to = json_object_get(doc, "to_agent");
        if (!hd_agent_valid(json_string_value(from)) ||
            strlen(json_string_value(from)) != json_string_length(from))
                return verdict(v, HD_R_BAD_AGENT, "from_agent %s is not an agent name",
                               Q(from, qb));
        if (!hd_agent_valid(json_string_value(to)) ||
            strlen(json_string_value(to)) != json_string_length(to))
                return verdict(v, HD_R_BAD_AGENT, "to_agent %s is not an agent name",
                               Q(to, qb));
        if (json_equal(from, to))
                return verdict(v, HD_R_SELF_HANDOFF, "from_agent and to_agent are both %s",
                               Q(from, qb));

        j = json_object_get(doc, "caller_hash");
        if (j) {
                r = validate_caller_hash(j, v);
                if (r < 0)
                        return r;
        }
        j = json_object_get(doc, "transcript");
        if (j) {
                r = validate_transcript(j, v);
                if (r < 0)
                        return r;
        }

        r = get_times(doc, &t_init, &t_exp, v);
        if (r < 0)
                return r;
        if (t_exp <= t_init)
                return verdict(v, HD_R_BAD_TIMESTAMP,
                               "expires_at is not after initiated_at");
        return 0;
}

/* A usec value for the detail; the raw field is untrusted and may be long. */
static const char *fmt_time(int64_t usec, char buf[HD_TIME_MAX])
{
        if (hd_time_format(usec, buf, HD_TIME_MAX) < 0)
                xsnprintf(buf, HD_TIME_MAX, "@%lld us", (long long)usec);
        return buf;
}

static int64_t sat_add(int64_t a, int64_t b)
{
        int64_t r;

        if (__builtin_add_overflow(a, b, &r))
                return b > 0 ? INT64_MAX : INT64_MIN;
        return r;
}

static int64_t sat_sec(int64_t s)
{
        int64_t r;

        if (__builtin_mul_overflow(s, USEC_PER_SEC, &r))
                return s > 0 ? INT64_MAX : INT64_MIN;
        return r;
}

int hd_check_fresh(const json_t *doc, const hd_policy *p, int64_t now_usec,
                   hd_verdict *v)
{
        /* Non-positive window or negative skew in p means "the default": a
         * zero window would make every handoff stale on arrival. */
        int64_t skew = p && p->max_clock_skew_s >= 0 ? p->max_clock_skew_s
                                                     : HD_DEFAULT_MAX_CLOCK_SKEW;
        int64_t window = p && p->max_window_s > 0 ? p->max_window_s
                                                  : HD_DEFAULT_MAX_WINDOW;
        int64_t t_init, t_exp;
        char a[HD_TIME_MAX], b[HD_TIME_MAX];
        int r;

        verdict_clear(v);
        if (!doc)
                return -EINVAL;
        if (!json_is_object(doc))
                return verdict(v, HD_R_BAD_TIMESTAMP, "document has no timestamps");
        r = get_times(doc, &t_init, &t_exp, v);
        if (r < 0)
                return r;

        /* Valid while now <= expires_at, as the real consumer compares. */
        if (now_usec > t_exp)
                return verdict(v, HD_R_EXPIRED, "expired at %s (now %s)",
                               fmt_time(t_exp, a), fmt_time(now_usec, b));
        /* The producer's expires_at is not trusted to be short: a signed
         * handoff is never good for longer than the window. */
        if (now_usec > sat_add(t_init, sat_sec(window)))
                return verdict(v, HD_R_EXPIRED,
                               "initiated at %s, more than %llds ago",
                               fmt_time(t_init, a), (long long)window);
        if (t_init > sat_add(now_usec, sat_sec(skew)))
                return verdict(v, HD_R_FUTURE_TIMESTAMP,
                               "initiated at %s, more than %llds after now %s",
                               fmt_time(t_init, a), (long long)skew,
                               fmt_time(now_usec, b));
        return 0;
}

int hd_verify(const json_t *doc, hd_key_lookup_fn lookup, void *userdata,
              const hd_policy *p, const struct hd_payload_opts *opts,
              int64_t now_usec, hd_verdict *v)
{
        return canon_src_verify(doc, NULL, lookup, userdata, p, opts, now_usec, v);
}

int canon_src_verify(const json_t *doc, const struct canon_src *src,
                     hd_key_lookup_fn lookup, void *userdata, const hd_policy *p,
                     const struct hd_payload_opts *opts, int64_t now_usec, hd_verdict *v)
{
        int r;

        verdict_clear(v);
        if (!doc || !lookup)
                return -EINVAL;
        if (!json_is_object(doc))
                return verdict(v, HD_R_BAD_TYPE, "document is %s, not an object",
                               type_name(doc));
        r = auth_check_src(doc, src, lookup, userdata, v);
        if (r < 0)
                return r;
        r = hd_validate(doc, v);
        if (r < 0)
                return r;
        if (opts && (json_object_get(doc, "payload_type") ||
                     json_object_get(doc, "payload"))) {
                r = hd_payload_validate(doc, opts, v);
                if (r < 0)
                        return r;
        }
        /* An a2a- id must be the hub's task id of this very document, or
         * whoever guessed a sender's next id could take it first. */
        r = payload_a2a_id_check(doc, json_object_get(doc, "sig") ? NULL :
                                 lookup(userdata, json_string_value(json_object_get(doc, "kid")),
                                        json_string_value(json_object_get(doc, "from_agent"))),
                                 v);
        if (r < 0)
                return r;
        return hd_check_fresh(doc, p, now_usec, v);
}
