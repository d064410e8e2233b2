/* libFuzzer target: the path every spool file takes.  hd_parse, the
 * canonical writer (its output must parse again and be a fixed point),
 * hd_verify with the test-vector key at the vectors' "now"; then, since
 * almost no mutated input carries a good MAC, the same document signed by
 * us, which must pass the MAC check and reach the field, payload and
 * freshness checks; and the bootstrap of whatever verifies. */
#include <string.h>

#include "fuzz.h"

/* tests/vectors/TEST-ONLY.key without its newline: public, test only. */
static const char vector_key[] = "TEST-ONLY handoffd vector key, not a secret, 0001";
static hd_key *key;
static int64_t now;

static const hd_key *lookup(void *userdata, const char *kid, const char *from)
{
        (void)userdata;
        (void)from;
        /* As the vectors' lookup: the default key and kid "test-2026". */
        if (kid && strcmp(kid, "test-2026") != 0)
                return NULL;
        return key;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        if (hd_key_from_bytes(vector_key, strlen(vector_key), &key) < 0)
                abort();
        now = fuzz_now();
        return 0;
}

/* The canonical bytes must parse back to a document with the same bytes. */
static void check_canon(const json_t *doc)
{
        /* Escaping can make canonical text longer than the input: do not let
         * the size limit decide the property. */
        const hd_limits big = { .max_size = 64u << 20 };
        _cleanup_free_ char *c1 = NULL, *c2 = NULL, *h = NULL;
        _cleanup_json_ json_t *again = NULL;
        size_t l1, l2, lh;
        hd_verdict v;
        int r;

        r = hd_canon_dump(doc, NULL, &c1, &l1);
        if (r < 0) {
                FUZZ_ASSERT(r == -ENOMEM, "hd_canon_dump of a parsed document: %s",
                            strerror(-r));
                return;
        }
        FUZZ_ASSERT(strlen(c1) == l1, "canonical text holds a NUL byte");
        r = hd_parse(c1, l1, &big, &again, &v);
        FUZZ_ASSERT(r == 0, "canonical text does not parse: %s: %s\n%s",
                    hd_reason_name(v.reason), v.detail, c1);
        r = hd_canon_dump(again, NULL, &c2, &l2);
        FUZZ_ASSERT(r == 0, "second hd_canon_dump: %s", strerror(-r));
        FUZZ_ASSERT(l1 == l2 && memcmp(c1, c2, l1) == 0,
                    "canonical text is not a fixed point:\n%s\n%s", c1, c2);
        FUZZ_ASSERT(json_equal(doc, again), "canonical text changes the value:\n%s", c1);
        r = hd_canon_dump(doc, "hmac", &h, &lh);
        FUZZ_ASSERT(r == 0, "hd_canon_dump without hmac: %s", strerror(-r));
        FUZZ_ASSERT(lh <= l1, "leaving out hmac made the text longer");
}

static void check_verified(const json_t *doc)
{
        _cleanup_json_ json_t *b = NULL;
        _cleanup_free_ char *text = NULL;
        size_t n;
        int r;

        r = hd_bootstrap_build(doc, now, &b);
        FUZZ_ASSERT(r == 0 || r == -ENOMEM, "bootstrap of a verified document: %s",
                    strerror(-r));
        if (r == 0) {
                r = hd_canon_dump(b, NULL, &text, &n);
                FUZZ_ASSERT(r == 0 || r == -ENOMEM, "canonical bootstrap: %s",
                            strerror(-r));
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const hd_policy pol = { HD_DEFAULT_MAX_CLOCK_SKEW, HD_DEFAULT_MAX_WINDOW };
        const hd_payload_opts opts = { 0 };
        _cleanup_json_ json_t *doc = NULL;
        hd_verdict v;
        int r;

        if (hd_parse(data, size, NULL, &doc, &v) < 0) {
                FUZZ_DETAIL_OK(&v, "hd_parse");
                return 0;
        }
        FUZZ_ASSERT(json_is_object(doc), "hd_parse returned a non-object");
        check_canon(doc);

        r = hd_verify(doc, lookup, NULL, &pol, &opts, now, &v);
        FUZZ_DETAIL_OK(&v, "hd_verify");
        if (r == 0)
                check_verified(doc);

        /* Past the MAC: the checks a forged document never reaches. */
        hd_validate(doc, &v);
        FUZZ_DETAIL_OK(&v, "hd_validate");
        hd_check_fresh(doc, &pol, now, &v);
        FUZZ_DETAIL_OK(&v, "hd_check_fresh");
        hd_payload_validate(doc, &opts, &v);
        FUZZ_DETAIL_OK(&v, "hd_payload_validate");

        if (hd_sign(doc, key) < 0)
                return 0;
        r = hd_mac_check(doc, key, &v);
        FUZZ_ASSERT(r == 0, "a document we just signed fails the MAC check: %s: %s",
                    hd_reason_name(v.reason), v.detail);
        r = hd_verify(doc, lookup, NULL, &pol, &opts, now, &v);
        FUZZ_ASSERT(r == 0 || (v.reason != HD_R_BAD_MAC &&
                               v.reason != HD_R_BAD_MAC_FORMAT),
                    "a signed document is rejected as %s: %s",
                    hd_reason_name(v.reason), v.detail);
        FUZZ_DETAIL_OK(&v, "hd_verify (signed)");
        if (r == 0)
                check_verified(doc);
        return 0;
}
