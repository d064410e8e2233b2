/* libFuzzer target: the signature path.  hd_parse, then hd_auth_check and
 * hd_verify with the keys of tests/vectors/sig/ (alice's and bob's public
 * keys bound to them, the HMAC vector key as default, dave with a key of
 * his own, a shared "ops" key) at the vectors' "now"; hd_sig_check with
 * alice's key directly; then the document signed by alice's secret key,
 * which must pass, and must be key_agent_mismatch for any other sender.
 * The input is also tried as a key line: a line that parses must format
 * back to itself. */
#include <sodium.h>
#include <string.h>

#include "fuzz.h"

/* Public test keys from tests/vectors/sig/: never configured anywhere. */
static const char alice_secret[] =
        "ed25519-secret tB6WsJdZCLeRnwaK2hRjGwMXyU/3FCLWwp0u8snopww= fe1bfe3370f5e806";
static const char alice2_public[] =
        "ed25519 7V0ECJo5lOmieF4TCCfyrzSYtTkyskXRF4DGB0FO/BQ= alice-2027";
static const char bob_public[] =
        "ed25519 WZ+x0r2odpcfM/7SNHqwj+U+BFp3dxxxQNIDphVpHa0= 011d87d2d36c82f1";
static const char vector_key[] = "TEST-ONLY handoffd vector key, not a secret, 0001";
static const char ops_key[] = "TEST-ONLY shared ops vector key, not a secret, 0003";
static const char dave_key[] = "TEST-ONLY dave's own vector key, not a secret, 0004";

static hd_key *alice_sk, *alice_pk, *alice2_pk, *bob_pk, *def, *ops, *dave;
static int64_t now;

static const hd_key *lookup(void *userdata, const char *kid, const char *from)
{
        const hd_key *pubs[] = { alice_pk, alice2_pk, bob_pk };

        (void)userdata;
        if (kid)
                for (size_t i = 0; i < ELEMENTSOF(pubs); i++)
                        if (!strcmp(hd_key_kid(pubs[i]), kid))
                                return pubs[i];
        if (kid)
                return strcmp(kid, "ops") ? NULL : ops;
        if (from && !strcmp(from, "dave"))
                return dave;
        return def;
}

static hd_key *parse_or_die(const char *line, const char *agent)
{
        hd_key *k = NULL;

        if (hd_key_parse(line, strlen(line), &k, NULL, 0) < 0)
                abort();
        if (agent && hd_key_set_agent(k, agent) < 0)
                abort();
        return k;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        char line[HD_KEY_LINE_MAX];

        (void)argc;
        (void)argv;
        alice_sk = parse_or_die(alice_secret, NULL);
        if (hd_key_format(alice_sk, false, line, sizeof(line)) < 0)
                abort();
        alice_pk = parse_or_die(line, "alice");
        alice2_pk = parse_or_die(alice2_public, "alice");
        bob_pk = parse_or_die(bob_public, "bob");
        if (hd_key_from_bytes(vector_key, strlen(vector_key), &def) < 0 ||
            hd_key_from_bytes(ops_key, strlen(ops_key), &ops) < 0 ||
            hd_key_from_bytes(dave_key, strlen(dave_key), &dave) < 0 ||
            hd_key_set_agent(dave, "dave") < 0)
                abort();
        now = fuzz_now();
        return 0;
}

/* A key line that parses formats back to the same line. */
static void check_key_line(const uint8_t *data, size_t size)
{
        char line[HD_KEY_LINE_MAX], err[200];
        hd_key *k = NULL;
        size_t len = size;

        if (hd_key_parse((const char *)data, size, &k, err, sizeof(err)) < 0) {
                json_t *s = json_string(err);
                FUZZ_ASSERT(s != NULL, "key line message is not UTF-8: %s", err);
                json_decref(s);
                return;
        }
        FUZZ_ASSERT(hd_key_format(k, hd_key_kind_of(k) == HD_KEY_ED25519_SECRET,
                                  line, sizeof(line)) == 0, "a parsed key does not format");
        if (len > 0 && data[len - 1] == '\n')
                len--;
        FUZZ_ASSERT(strlen(line) == len + 1 && !memcmp(line, data, len),
                    "key line does not round-trip: %.*s -> %s", (int)len, data, line);
        sodium_memzero(line, sizeof(line));
        hd_key_free(k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const hd_policy pol = { HD_DEFAULT_MAX_CLOCK_SKEW, HD_DEFAULT_MAX_WINDOW };
        _cleanup_json_ json_t *doc = NULL;
        const json_t *from;
        hd_verdict v;
        int r;

        check_key_line(data, size);
        if (hd_parse(data, size, NULL, &doc, &v) < 0)
                return 0;

        r = hd_auth_check(doc, lookup, NULL, &v);
        FUZZ_DETAIL_OK(&v, "hd_auth_check");
        FUZZ_ASSERT(r == 0 || r == -EBADMSG || r == -ENOMEM, "hd_auth_check: %d", r);
        if (r == 0)
                FUZZ_ASSERT(json_object_get(doc, "sig") || json_object_get(doc, "hmac"),
                            "authenticated without sig or hmac");
        r = hd_verify(doc, lookup, NULL, &pol, NULL, now, &v);
        FUZZ_DETAIL_OK(&v, "hd_verify");
        r = hd_sig_check(doc, alice_pk, &v);
        FUZZ_DETAIL_OK(&v, "hd_sig_check");

        /* Signed by alice: her key checks it, and it speaks for her only. */
        if (hd_sign(doc, alice_sk) < 0)
                return 0;
        r = hd_sig_check(doc, alice_pk, &v);
        FUZZ_ASSERT(r == 0, "a document alice just signed fails: %s: %s",
                    hd_reason_name(v.reason), v.detail);
        r = hd_sig_check(doc, bob_pk, &v);
        FUZZ_ASSERT(r == -EBADMSG, "bob's key accepts alice's signature");
        r = hd_auth_check(doc, lookup, NULL, &v);
        from = json_object_get(doc, "from_agent");
        if (json_is_string(from) && !strcmp(json_string_value(from), "alice") &&
            strlen("alice") == json_string_length(from))
                FUZZ_ASSERT(r == 0, "alice's signature for alice refused: %s: %s",
                            hd_reason_name(v.reason), v.detail);
        else
                FUZZ_ASSERT(r == -EBADMSG && v.reason == HD_R_KEY_AGENT_MISMATCH,
                            "alice's key signs for another sender: %s",
                            hd_reason_name(v.reason));
        /* One byte of the signature changed: refused. */
        {
                char s[HD_SIG_B64_LEN + 1];
                const char *cur = json_string_value(json_object_get(doc, "sig"));

                memcpy(s, cur, sizeof(s));
                s[10] = s[10] == 'A' ? 'B' : 'A';
                json_object_set_new(doc, "sig", json_string(s));
                r = hd_sig_check(doc, alice_pk, &v);
                FUZZ_ASSERT(r == -EBADMSG, "a changed signature passes");
        }
        return 0;
}
