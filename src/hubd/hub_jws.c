/* The hub's own signatures, by [hub] signing_key (an Ed25519 secret key
 * file as handoffctl keygen --ed25519 writes it):
 *
 *   the agent cards: a JWS (RFC 7515, alg EdDSA, RFC 8037) whose payload
 *   is the card's JCS bytes without its "signatures" (A2A 1.0 section
 *   8.4), detached: the card itself carries {protected, signature};
 *
 *   the push notifications' JWTs (hub_push.c), so that a webhook can
 *   tell the hub's POSTs from anyone's;
 *
 *   /.well-known/jwks.json, the public key as an OKP JWK (RFC 8037) of
 *   the same kid, for both.
 *
 * The key is the hub's own: it signs what the hub says, never a handoff
 * (the daemon's [keys] do that), so a leaked card key forges no work. */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handoff.h"
#include "hub.h"
#include "hub_jws.h"
#include "jcs.h"
#include "util.h"

struct hub_signer {
        unsigned char *sk;      /* crypto_sign_SECRETKEYBYTES, sodium_malloc'ed */
        unsigned char pk[crypto_sign_PUBLICKEYBYTES];
        char kid[HD_KID_MAX + 1];
};

static void key_freep(hd_key **k)
{
        hd_key_free(*k);
}

void hub_signer_free(struct hub_signer *s)
{
        if (!s)
                return;
        sodium_free(s->sk);     /* zeroes it */
        free(s);
}

const char *hub_signer_kid(const struct hub_signer *s)
{
        return s ? s->kid : NULL;
}

int hub_signer_load(const char *path, struct hub_signer **ret, char *err, size_t errlen)
{
        _cleanup_(key_freep) hd_key *k = NULL;
        unsigned char seed[crypto_sign_SEEDBYTES];
        char line[HD_KEY_LINE_MAX], b64[64] = "", kid[HD_KID_MAX + 1] = "";
        struct hub_signer *s = NULL;
        size_t n = 0;
        int r;

        r = hd_key_load(path, &k, err, errlen);
        if (r < 0)
                return r;
        if (hd_key_kind_of(k) != HD_KEY_ED25519_SECRET) {
                snprintf(err, errlen, "%s: not an Ed25519 secret key (handoffctl keygen "
                         "--ed25519 writes one)", path);
                return -EINVAL;
        }
        /* the seed through the key's own line: the public API's only way out */
        r = hd_key_format(k, true, line, sizeof(line));
        if (r == 0 && sscanf(line, "ed25519-secret %63s %64s", b64, kid) != 2)
                r = -EINVAL;
        if (r == 0 && (sodium_base642bin(seed, sizeof(seed), b64, strlen(b64), NULL, &n, NULL,
                                         sodium_base64_VARIANT_ORIGINAL) < 0 ||
                       n != sizeof(seed)))
                r = -EINVAL;
        sodium_memzero(line, sizeof(line));
        sodium_memzero(b64, sizeof(b64));
        if (r == 0 && !(s = calloc(1, sizeof(*s))))
                r = -ENOMEM;
        if (r == 0 && !(s->sk = sodium_malloc(crypto_sign_SECRETKEYBYTES)))
                r = -ENOMEM;
        if (r == 0) {
                crypto_sign_seed_keypair(s->pk, s->sk, seed);
                snprintf(s->kid, sizeof(s->kid), "%s", kid);
        }
        sodium_memzero(seed, sizeof(seed));
        if (r < 0) {
                hub_signer_free(s);
                snprintf(err, errlen, "%s: %s", path, strerror(-r));
                return r;
        }
        *ret = s;
        return 0;
}

char *hub_b64url(const void *p, size_t n)
{
        size_t len = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
        char *s = malloc(len);

        if (s)
                sodium_bin2base64(s, len, p, n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
        return s;
}

/* BASE64URL(header) "." BASE64URL(payload) and the signature of it, each
 * malloc'ed: 0 or -ENOMEM. */
static int jws(const struct hub_signer *s, const json_t *header, const char *payload,
               size_t plen, char **ret_input, char **ret_protected, char **ret_sig)
{
        _cleanup_free_ char *hjson = json_dumps(header, JSON_COMPACT | JSON_PRESERVE_ORDER);
        _cleanup_free_ char *h64 = NULL, *p64 = NULL, *input = NULL;
        unsigned char sig[crypto_sign_BYTES];

        if (!hjson || !(h64 = hub_b64url(hjson, strlen(hjson))) ||
            !(p64 = hub_b64url(payload, plen)) || asprintf(&input, "%s.%s", h64, p64) < 0) {
                input = NULL;
                return -ENOMEM;
        }
        crypto_sign_detached(sig, NULL, (const unsigned char *)input, strlen(input), s->sk);
        if (!(*ret_sig = hub_b64url(sig, sizeof(sig))))
                return -ENOMEM;
        *ret_input = TAKE_PTR(input);
        *ret_protected = TAKE_PTR(h64);
        return 0;
}

int hub_jws_sign_card(const struct hub_signer *s, json_t *card, const char *jku)
{
        _cleanup_json_ json_t *header = json_pack("{s:s, s:s, s:s, s:s}", "alg", "EdDSA",
                                                  "typ", "JOSE", "kid", s->kid, "jku", jku);
        _cleanup_free_ char *bytes = NULL, *input = NULL, *prot = NULL, *sig = NULL;
        size_t len;
        int r;

        if (!header)
                return -ENOMEM;
        r = jcs_dump(card, "signatures", &bytes, &len);
        if (r < 0)
                return r;
        r = jws(s, header, bytes, len, &input, &prot, &sig);
        if (r < 0)
                return r;
        return json_object_set_new(card, "signatures",
                                   json_pack("[{s:s, s:s}]", "protected", prot, "signature",
                                             sig)) < 0 ? -ENOMEM : 0;
}

char *hub_jwt_make(const struct hub_signer *s, const json_t *claims)
{
        _cleanup_json_ json_t *header = json_pack("{s:s, s:s, s:s}", "alg", "EdDSA", "typ",
                                                  "JWT", "kid", s->kid);
        _cleanup_free_ char *body = NULL, *input = NULL, *prot = NULL, *sig = NULL;
        size_t len;
        char *jwt = NULL;

        if (!header || jcs_dump(claims, NULL, &body, &len) < 0 ||
            jws(s, header, body, len, &input, &prot, &sig) < 0)
                return NULL;
        if (asprintf(&jwt, "%s.%s", input, sig) < 0)
                return NULL;
        return jwt;
}

int hub_jwks_answer(const struct hub_signer *s, struct hub_answer *a)
{
        _cleanup_free_ char *x = NULL;
        json_t *set;

        if (!s)
                return hub_answer_reject(a, 404, "not_found",
                                         "no [hub] signing_key: the hub signs nothing");
        if (!(x = hub_b64url(s->pk, sizeof(s->pk))))
                return -ENOMEM;
        set = json_pack("{s:[{s:s, s:s, s:s, s:s, s:s, s:s}]}", "keys", "kty", "OKP", "crv",
                        "Ed25519", "x", x, "kid", s->kid, "use", "sig", "alg", "EdDSA");
        if (!set)
                return -ENOMEM;
        a->status = 200;
        a->ctype = "application/jwk-set+json";
        a->body = json_dumps(set, JSON_COMPACT);
        json_decref(set);
        return a->body ? 0 : -ENOMEM;
}
