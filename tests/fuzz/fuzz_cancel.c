/* libFuzzer target: cancel requests (cancelreq.h), the file a member of
 * the spool's group drops into cancel/ and the daemon reads.  The input is
 * parsed as the daemon parses one (4 KiB at most, depth 4) and checked
 * with the HMAC vector key as default and bob's public key bound to bob:
 * one that passes is a cancel/1 request without a to_agent, with a valid
 * id and agent, fresh; every refusal's detail is UTF-8.  A request built
 * and signed for an id and agent made from the input passes, and fails
 * once a byte of its id changes.  The input as a request's name: its
 * answers' names are answers, of the right word, and a name that is not a
 * dotfile never is one. */
#include <string.h>

#include "cancelreq.h"
#include "fuzz.h"

static const char vector_key[] = "TEST-ONLY handoffd vector key, not a secret, 0001";
static const char bob_public[] =
        "ed25519 WZ+x0r2odpcfM/7SNHqwj+U+BFp3dxxxQNIDphVpHa0= 011d87d2d36c82f1";

static hd_key *def, *bob_pk;
static int64_t now;

static const hd_key *lookup(void *userdata, const char *kid, const char *from)
{
        (void)userdata;
        if (kid)
                return !strcmp(kid, hd_key_kid(bob_pk)) ? bob_pk : NULL;
        if (from && !strcmp(from, "bob"))
                return bob_pk;
        return def;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        if (hd_key_from_bytes(vector_key, strlen(vector_key), &def) < 0 ||
            hd_key_parse(bob_public, strlen(bob_public), &bob_pk, NULL, 0) < 0 ||
            hd_key_set_agent(bob_pk, "bob") < 0)
                abort();
        now = fuzz_now();
        return 0;
}

static void check_doc(const uint8_t *data, size_t size)
{
        const hd_limits lim = { .max_size = CANCELREQ_MAX, .max_depth = 4 };
        const hd_policy pol = { .max_clock_skew_s = 30, .max_window_s = 3600 };
        json_t *doc = NULL;
        hd_verdict v;
        int r;

        if (size > CANCELREQ_MAX || hd_parse(data, size, &lim, &doc, &v) < 0)
                return;
        r = cancelreq_check(doc, lookup, NULL, &pol, now, &v);
        if (r == 0) {
                const char *id = json_string_value(json_object_get(doc, "handoff_id"));
                const char *from = json_string_value(json_object_get(doc, "from_agent"));
                FUZZ_ASSERT(!json_object_get(doc, "to_agent"), "a request with a to_agent passed");
                FUZZ_ASSERT(!strcmp(json_string_value(json_object_get(doc, "type")) ?: "",
                                    CANCELREQ_TYPE), "a request of another type passed");
                FUZZ_ASSERT(id && hd_id_valid(id) && from && hd_agent_valid(from),
                            "a request without a valid id or agent passed");
        } else {
                FUZZ_ASSERT(r == -EBADMSG, "cancelreq_check: %d", r);
                FUZZ_DETAIL_OK(&v, "cancelreq_check");
        }
        json_decref(doc);
}

/* A request built for an id and agent the input makes passes; changed, not. */
static void check_built(const uint8_t *data, size_t size)
{
        const hd_limits lim = { .max_size = CANCELREQ_MAX, .max_depth = 4 };
        const hd_policy pol = { .max_clock_skew_s = 30, .max_window_s = 3600 };
        char id[129], from[65];
        size_t n = 0, m = 0;
        json_t *doc = NULL;
        char *buf = NULL;
        size_t len;
        hd_verdict v;

        for (size_t i = 0; i < size && n < 128; i++) {
                char c = (char)data[i];
                if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')
                        id[n++] = c;
        }
        id[n] = '\0';
        for (size_t i = 0; i < n && m < 64; i++)
                if (id[i] != '_' || m > 0)
                        from[m++] = id[i];
        from[m] = '\0';
        if (!hd_id_valid(id) || !hd_agent_valid(from) || !strcmp(from, "bob"))
                return;
        FUZZ_ASSERT(cancelreq_build(id, from, def, now, 600, &buf, &len) == 0, "build %s", id);
        FUZZ_ASSERT(hd_parse(buf, len, &lim, &doc, &v) == 0, "a built request does not parse");
        FUZZ_ASSERT(cancelreq_check(doc, lookup, NULL, &pol, now, &v) == 0,
                    "a built request does not pass: %s", v.detail);
        json_object_set_new(doc, "handoff_id", json_string(id[0] == 'a' ? "b" : "a"));
        FUZZ_ASSERT(cancelreq_check(doc, lookup, NULL, &pol, now, &v) == -EBADMSG,
                    "a request whose id changed passes");
        json_decref(doc);
        free(buf);
}

static void check_names(const uint8_t *data, size_t size)
{
        char name[256], an[NAME_MAX + 1];
        enum cancelreq_answer got;

        if (size == 0 || size >= sizeof(name) || memchr(data, '\0', size))
                return;
        memcpy(name, data, size);
        name[size] = '\0';
        if (name[0] != '.')
                FUZZ_ASSERT(!cancelreq_is_answer(name, NULL), "'%s' taken for an answer", name);
        for (int a = CA_NONE + 1; a < _CA_MAX; a++) {
                if (cancelreq_answer_file(name, (enum cancelreq_answer)a, an, sizeof(an)) < 0)
                        continue;
                FUZZ_ASSERT(cancelreq_is_answer(an, &got) && got == (enum cancelreq_answer)a,
                            "the answer '%s' is not one", an);
        }
        FUZZ_ASSERT(cancelreq_answer_file(name, CA_NONE, an, sizeof(an)) == -EINVAL,
                    "an answer of no word");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        check_doc(data, size);
        check_built(data, size);
        check_names(data, size);
        return 0;
}
