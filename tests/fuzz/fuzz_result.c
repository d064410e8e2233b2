/* libFuzzer target: an agent's result, as handoffd reads it from the
 * agent's handoffs/ (result.c): hd_parse() with the result's bound, then
 * hd_result_check() without a key (its members) and with the keys a
 * daemon would hold (the default HMAC key, bob's own HMAC key bound to
 * him, alice's Ed25519 public key bound to her).  Every detail is UTF-8,
 * and what passes with the keys passes without them and carries a MAC or
 * a signature.  Then the input as an agent's words: its text (when it is
 * UTF-8) and its document as data, built and signed by alice
 * (hd_result_build()): either refused for what the daemon refuses
 * (too_large, number_out_of_range), or a result her key passes and that
 * fails with one word changed. */
#include <string.h>

#include "fuzz.h"

/* Public test keys from tests/vectors/sig/: never configured anywhere. */
static const char alice_secret[] =
        "ed25519-secret tB6WsJdZCLeRnwaK2hRjGwMXyU/3FCLWwp0u8snopww= fe1bfe3370f5e806";
static const char vector_key[] = "TEST-ONLY handoffd vector key, not a secret, 0001";
static const char bob_key[] = "TEST-ONLY bob's own vector key, not a secret, 0005";

static hd_key *alice_sk, *alice_pk, *def, *bob;
static int64_t now;

static const hd_key *lookup(void *userdata, const char *kid, const char *from)
{
        (void)userdata;
        if (kid)
                return !strcmp(kid, hd_key_kid(alice_pk)) ? alice_pk : NULL;
        if (from && !strcmp(from, "bob"))
                return bob;
        if (from && !strcmp(from, "alice"))
                return alice_pk;
        return def;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        char line[HD_KEY_LINE_MAX];

        (void)argc;
        (void)argv;
        if (hd_key_parse(alice_secret, strlen(alice_secret), &alice_sk, NULL, 0) < 0 ||
            hd_key_format(alice_sk, false, line, sizeof(line)) < 0 ||
            hd_key_parse(line, strlen(line), &alice_pk, NULL, 0) < 0 ||
            hd_key_set_agent(alice_pk, "alice") < 0 ||
            hd_key_from_bytes(vector_key, strlen(vector_key), &def) < 0 ||
            hd_key_from_bytes(bob_key, strlen(bob_key), &bob) < 0 ||
            hd_key_set_agent(bob, "bob") < 0)
                abort();
        now = fuzz_now();
        return 0;
}

/* res signed by alice: refused for what the daemon refuses, or passing
 * her key and failing it once its words change. */
static void built_by_alice(const hd_result *res)
{
        _cleanup_json_ json_t *doc = NULL;
        hd_verdict v;
        int r;

        r = hd_result_build("fuzz-1", "alice", res, alice_sk, now, &doc, &v);
        FUZZ_DETAIL_OK(&v, "hd_result_build");
        if (r == -EBADMSG) {
                FUZZ_ASSERT(v.reason == HD_R_TOO_LARGE || v.reason == HD_R_NUMBER_OUT_OF_RANGE,
                            "alice's result refused: %s: %s", hd_reason_name(v.reason), v.detail);
                return;
        }
        FUZZ_ASSERT(r == 0 || r == -ENOMEM, "hd_result_build: %d", r);
        if (r < 0)
                return;
        r = hd_result_check(doc, "fuzz-1", "alice", lookup, NULL, &v);
        FUZZ_ASSERT(r == 0, "alice's own result fails: %s: %s", hd_reason_name(v.reason), v.detail);
        const char *was = json_string_value(json_object_get(doc, "text"));
        json_object_set_new(doc, "text", json_string(was && !strcmp(was, "changed words")
                                                     ? "other words" : "changed words"));
        r = hd_result_check(doc, "fuzz-1", "alice", lookup, NULL, &v);
        FUZZ_ASSERT(r == -EBADMSG && v.reason == HD_R_BAD_SIGNATURE,
                    "alice's result with its words changed: %d %s", r, hd_reason_name(v.reason));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const hd_limits lim = { .max_size = HD_RESULT_MAX_SIZE };
        _cleanup_json_ json_t *doc = NULL, *text = NULL;
        hd_verdict v;
        int with, without;

        text = json_stringn((const char *)data, size);
        if (text && !memchr(data, '\0', size))
                built_by_alice(&(hd_result){ .text = json_string_value(text) });
        if (hd_parse(data, size, &lim, &doc, &v) < 0) {
                FUZZ_DETAIL_OK(&v, "hd_parse");
                return 0;
        }
        without = hd_result_check(doc, NULL, NULL, NULL, NULL, &v);
        FUZZ_DETAIL_OK(&v, "hd_result_check without keys");
        with = hd_result_check(doc, NULL, NULL, lookup, NULL, &v);
        FUZZ_DETAIL_OK(&v, "hd_result_check");
        FUZZ_ASSERT(with == 0 || with == -EBADMSG || with == -ENOMEM, "hd_result_check: %d", with);
        if (with == 0)
                FUZZ_ASSERT(without == 0 && (json_object_get(doc, "hmac") || json_object_get(doc, "sig")),
                            "a result passes its keys and not its members, or has no MAC");
        built_by_alice(&(hd_result){ .data = doc, .failed = with == 0 ? NULL : "the check failed" });
        return 0;
}
