/* Sender signatures and the authentication step.
 *
 * A signed handoff carries "sig" (standard base64 of the 64-byte Ed25519
 * signature, 88 chars) and "kid" (the key's id) instead of "hmac"; the
 * signed bytes are the canonical bytes without "sig".  hd_sign() picks
 * HMAC or Ed25519 by the key; hd_auth_check() picks the key with the
 * caller's lookup, holds it to the agent it belongs to, and checks the one
 * of "hmac" or "sig" the document carries. */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "canon_src.h"
#include "handoff.h"
#include "key.h"
#include "util.h"

#define SIG_RAW_LEN crypto_sign_BYTES

_Static_assert(sodium_base64_ENCODED_LEN(SIG_RAW_LEN,
               sodium_base64_VARIANT_ORIGINAL) == HD_SIG_B64_LEN + 1,
               "a 64-byte signature is 88 base64 chars");

/* Untrusted strings in details: quoted and cut short, never raw. */
#define SQ(s, qb) ((s) ? quote_untrusted((s), strlen(s), (qb), sizeof(qb)) : "(none)")

/* doc becomes the signed form: the other scheme's member dropped, and for
 * Ed25519 the key's kid set, before the bytes are taken. */
static int sig_prepare(json_t *doc, const hd_key *k)
{
        json_object_del(doc, "sig");
        json_object_del(doc, "hmac");
        if (k->kind == HD_KEY_HMAC)
                return 0;
        return json_object_set_new(doc, "kid", json_string(k->kid)) < 0 ? -ENOMEM : 0;
}

int hd_sign(json_t *doc, const hd_key *k)
{
        _cleanup_json_ json_t *copy = NULL;
        _cleanup_free_ char *canon = NULL;
        unsigned char sig[SIG_RAW_LEN];
        char b64[HD_SIG_B64_LEN + 1];
        size_t len = 0;
        int r;

        if (!doc || !k || !json_is_object(doc) || k->kind == HD_KEY_ED25519_PUBLIC)
                return -EINVAL;
        /* Work on a shallow copy: on failure doc is left as it was. */
        copy = json_copy(doc);
        if (!copy)
                return -ENOMEM;
        r = sig_prepare(copy, k);
        if (r < 0)
                return r;
        if (k->kind == HD_KEY_HMAC) {
                r = hd_mac_compute(copy, k, b64);
                if (r < 0)
                        return r;
        } else {
                if (sodium_init() < 0)
                        return -EIO;
                r = hd_canon_dump(copy, NULL, &canon, &len);
                if (r < 0)
                        return r;
                crypto_sign_detached(sig, NULL, (const unsigned char *)canon, len, k->bytes);
                sodium_bin2base64(b64, sizeof(b64), sig, sizeof(sig),
                                  sodium_base64_VARIANT_ORIGINAL);
        }
        r = sig_prepare(doc, k);
        if (r < 0)
                return r;
        if (json_object_set_new(doc, k->kind == HD_KEY_HMAC ? "hmac" : "sig",
                                json_string(b64)) < 0)
                return -ENOMEM;
        return 0;
}

int hd_sig_check(const json_t *doc, const hd_key *k, hd_verdict *v)
{
        return sig_check_src(doc, NULL, k, v);
}

/* The signed bytes in one piece: src's two joined, or written here. */
static int sig_bytes(const json_t *doc, const struct canon_src *src, char **ret, size_t *ret_len)
{
        const char *piece[2];
        size_t n[2];
        char *b;

        if (!canon_src_pieces(src, "sig", piece, n))
                return hd_canon_dump(doc, "sig", ret, ret_len);
        b = malloc(n[0] + n[1] + 1);
        if (!b)
                return -ENOMEM;
        memcpy(b, piece[0], n[0]);
        if (n[1])
                memcpy(b + n[0], piece[1], n[1]);
        b[n[0] + n[1]] = '\0';
        *ret = b;
        *ret_len = n[0] + n[1];
        return 0;
}

int sig_check_src(const json_t *doc, const struct canon_src *src, const hd_key *k,
                  hd_verdict *v)
{
        _cleanup_free_ char *canon = NULL;
        unsigned char sig[SIG_RAW_LEN];
        const json_t *kid;
        char qb[QBUF_LEN], qk[QBUF_LEN];
        size_t len = 0;
        int r;

        verdict_clear(v);
        if (!doc || !k || k->kind == HD_KEY_HMAC)
                return -EINVAL;
        r = auth_field_decode(doc, "sig", sig, sizeof(sig), v);
        if (r < 0)
                return r;
        kid = json_object_get(doc, "kid");
        if (!kid)
                return verdict(v, HD_R_MISSING_FIELD, "kid is missing: a sig names its key");
        if (!json_is_string(kid))
                return verdict(v, HD_R_BAD_TYPE, "kid is not a string");
        /* The kid is covered by the signature; holding it to the key's own
         * kid keeps one key from answering for another's name. */
        if (strcmp(json_string_value(kid), k->kid) != 0 ||
            strlen(k->kid) != json_string_length(kid))
                return verdict(v, HD_R_UNKNOWN_KEY, "kid %s is not the kid of the key (%s)",
                               SQ(json_string_value(kid), qb), SQ(k->kid, qk));

        if (sodium_init() < 0)
                return -EIO;
        r = sig_bytes(doc, src, &canon, &len);
        if (r == -ERANGE)
                return verdict(v, HD_R_NUMBER_OUT_OF_RANGE,
                               "a number has no canonical form (not finite)");
        if (r < 0)
                return r;
        if (crypto_sign_verify_detached(sig, (const unsigned char *)canon, len, k->pk) != 0)
                return verdict(v, HD_R_BAD_SIGNATURE,
                               "sig does not match the document (key %s)",
                               SQ(k->kid, qk));
        return 0;
}

/* A key belongs to at most one agent; a shared key named by kid never
 * speaks for an agent that has a key of its own. */
static int sig_owner_check(const hd_key *k, const char *kid, const char *from,
                           hd_key_lookup_fn lookup, void *userdata, hd_verdict *v)
{
        char qa[QBUF_LEN], qb[QBUF_LEN], qc[QBUF_LEN];
        const hd_key *own;

        if (k->agent[0]) {
                if (from && !strcmp(k->agent, from))
                        return 0;
                if (k->kind == HD_KEY_HMAC)
                        return verdict(v, HD_R_KEY_AGENT_MISMATCH,
                                       "the key of %s does not sign for from_agent %s",
                                       SQ(k->agent, qb), SQ(from, qc));
                return verdict(v, HD_R_KEY_AGENT_MISMATCH,
                               "key %s belongs to %s, not to from_agent %s",
                               SQ(k->kid, qa),
                               SQ(k->agent, qb), SQ(from, qc));
        }
        if (!kid || !from)
                return 0;
        own = lookup(userdata, NULL, from);
        if (own && own != k && own->agent[0] && !strcmp(own->agent, from))
                return verdict(v, HD_R_KEY_AGENT_MISMATCH,
                               "kid %s names a shared key, but from_agent %s has a key "
                               "of its own", SQ(kid, qa), SQ(from, qb));
        return 0;
}

int hd_auth_check(const json_t *doc, hd_key_lookup_fn lookup, void *userdata,
                  hd_verdict *v)
{
        return auth_check_src(doc, NULL, lookup, userdata, v);
}

int auth_check_src(const json_t *doc, const struct canon_src *src,
                   hd_key_lookup_fn lookup, void *userdata, hd_verdict *v)
{
        const json_t *sig, *kid, *from;
        const char *kids, *froms;
        char qa[QBUF_LEN], qb[QBUF_LEN];
        const hd_key *k;
        int r;

        verdict_clear(v);
        if (!doc || !lookup)
                return -EINVAL;
        if (!json_is_object(doc))
                return verdict(v, HD_R_BAD_TYPE, "document is not a JSON object");

        /* Unauthenticated at this point: only used to pick a key, and a
         * wrong pick fails the check. */
        sig = json_object_get(doc, "sig");
        kid = json_object_get(doc, "kid");
        from = json_object_get(doc, "from_agent");
        if (sig && json_object_get(doc, "hmac"))
                return verdict(v, HD_R_BAD_MAC_FORMAT,
                               "both hmac and sig: a document carries one of them");
        if (sig && !kid)
                return verdict(v, HD_R_MISSING_FIELD, "kid is missing: a sig names its key");
        if (sig && !json_is_string(kid))
                return verdict(v, HD_R_BAD_TYPE, "kid is not a string");
        kids = json_is_string(kid) ? json_string_value(kid) : NULL;
        froms = json_is_string(from) ? json_string_value(from) : NULL;

        k = lookup(userdata, kids, froms);
        if (!k) {
                if (sig)
                        return verdict(v, HD_R_UNKNOWN_KEY, "no public key named by kid %s",
                                       SQ(kids, qa));
                if (kids)
                        return verdict(v, HD_R_UNKNOWN_KEY, "no key named by kid %s",
                                       SQ(kids, qa));
                if (froms)
                        return verdict(v, HD_R_UNKNOWN_KEY, "no key for from_agent %s",
                                       SQ(froms, qa));
                return verdict(v, HD_R_UNKNOWN_KEY, "no default key");
        }
        r = sig_owner_check(k, kids, froms, lookup, userdata, v);
        if (r < 0)
                return r;

        if (sig) {
                if (k->kind == HD_KEY_HMAC)
                        return verdict(v, HD_R_UNKNOWN_KEY,
                                       "kid %s names an HMAC key, not a public key",
                                       SQ(kids, qa));
                return sig_check_src(doc, src, k, v);
        }
        if (k->kind != HD_KEY_HMAC)
                return verdict(v, HD_R_SIGNATURE_REQUIRED,
                               "from_agent %s signs with Ed25519 (key %s): hmac is refused",
                               SQ(froms, qa), SQ(k->kid, qb));
        return mac_check_src(doc, src, k, v);
}
