/* An agent card's signature checked (A2A 1.0 section 8.4.3): the card is
 * the remote's word for where its JSON-RPC interface is, and a card
 * changed on its way (a proxy, a mirror, a DNS slip) would send our token
 * and our messages elsewhere.  With [remote NAME] a2a_card_key, a card is
 * used only when a signature of the card verifies under that key; an
 * unsigned card is refused then.  The key comes from the operator, never
 * from the card (its jku is not fetched).  The bytes signed are the
 * card's RFC 8785 form without its "signatures" (src/lib/jcs.c, as the
 * hub signs its own cards). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "a2a_answer.h"
#include "a2a_card.h"
#include "jcs.h"

#define CARD_SIGS_MAX 16        /* signatures looked at, at most */

int a2a_card_key_load(const char *path, struct a2a_card_key *ret, char *why, size_t why_size)
{
        char line[HD_KEY_LINE_MAX], b64[64] = "", err[256] = "";
        hd_key *k = NULL;
        size_t n = 0;
        int r;

        r = hd_key_load(path, &k, err, sizeof(err));
        if (r < 0) {
                snprintf(why, why_size, "a2a_card_key: %s", err[0] ? err : strerror(-r));
                return r;
        }
        if (hd_key_kind_of(k) != HD_KEY_ED25519_PUBLIC) {
                hd_key_free(k);
                snprintf(why, why_size, "a2a_card_key: %s is not an Ed25519 public key", path);
                return -EINVAL;
        }
        r = hd_key_format(k, false, line, sizeof(line));
        hd_key_free(k);
        if (r == 0 && sscanf(line, "ed25519 %63s %64s", b64, ret->kid) != 2)
                r = -EINVAL;
        if (r == 0 && (sodium_base642bin(ret->pk, sizeof(ret->pk), b64, strlen(b64), NULL, &n,
                                         NULL, sodium_base64_VARIANT_ORIGINAL) < 0 ||
                       n != sizeof(ret->pk)))
                r = -EINVAL;
        if (r < 0)
                snprintf(why, why_size, "a2a_card_key: %s: %s", path, strerror(-r));
        return r;
}

static char *b64url(const void *p, size_t n)
{
        size_t len = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
        char *s = malloc(len);

        if (s)
                sodium_bin2base64(s, len, p, n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
        return s;
}

/* One AgentCardSignature {protected, signature} over payload p64: 0 when
 * it verifies under k, -1 when it does not, 1 when it is not one for k
 * (another alg, another kid). */
static int one(const json_t *sig, const char *p64, const struct a2a_card_key *k)
{
        const char *prot = json_string_value(json_object_get(sig, "protected"));
        const char *s64 = json_string_value(json_object_get(sig, "signature"));
        unsigned char hdr[1024], s[crypto_sign_BYTES];
        size_t hn = 0, sn = 0;
        json_error_t je;
        int r = -1;

        if (!prot || !s64 || strlen(prot) > 1300 ||
            sodium_base642bin(hdr, sizeof(hdr) - 1, prot, strlen(prot), NULL, &hn, NULL,
                              sodium_base64_VARIANT_URLSAFE_NO_PADDING) < 0 ||
            sodium_base642bin(s, sizeof(s), s64, strlen(s64), NULL, &sn, NULL,
                              sodium_base64_VARIANT_URLSAFE_NO_PADDING) < 0 ||
            sn != sizeof(s))
                return -1;
        json_t *h = json_loadb((const char *)hdr, hn, JSON_REJECT_DUPLICATES, &je);
        const char *alg = json_string_value(json_object_get(h, "alg"));
        const char *kid = json_string_value(json_object_get(h, "kid"));
        if (!json_is_object(h) || !alg) {
                r = -1;
        } else if (strcmp(alg, "EdDSA") || (kid && strcmp(kid, k->kid))) {
                r = 1;
        } else {
                char *input = NULL;
                if (asprintf(&input, "%s.%s", prot, p64) < 0)
                        input = NULL;
                r = input && crypto_sign_verify_detached(s, (const unsigned char *)input,
                                                         strlen(input), k->pk) == 0 ? 0 : -1;
                free(input);
        }
        json_decref(h);
        return r;
}

int a2a_card_verify(const char *body, size_t len, const struct a2a_card_key *k, char *why,
                    size_t why_size)
{
        char *bytes = NULL, *p64 = NULL;
        json_error_t je;
        size_t n, i, other = 0, bad = 0;
        json_t *sig;
        int r = -1;

        json_t *card = len <= A2A_CARD_MAX ? json_loadb(body, len, JSON_REJECT_DUPLICATES, &je)
                                           : NULL;
        json_t *sigs = json_object_get(card, "signatures");
        if (!json_is_object(card)) {
                snprintf(why, why_size, "the answer is not an agent card");
                goto out;
        }
        if (!json_is_array(sigs) || json_array_size(sigs) == 0) {
                snprintf(why, why_size, "the agent card is not signed (a2a_card_key wants a "
                         "signature under kid %s)", k->kid);
                goto out;
        }
        if (jcs_dump(card, "signatures", &bytes, &n) < 0 || !(p64 = b64url(bytes, n))) {
                snprintf(why, why_size, "the agent card cannot be put in its canonical form");
                goto out;
        }
        json_array_foreach(sigs, i, sig) {
                if (i == CARD_SIGS_MAX)
                        break;
                int q = one(sig, p64, k);
                if (q == 0) {
                        r = 0;
                        goto out;
                }
                q > 0 ? other++ : bad++;
        }
        snprintf(why, why_size, "no signature of the agent card verifies under a2a_card_key "
                 "(kid %s): %zu do not verify, %zu are for another key", k->kid, bad, other);
out:
        free(bytes);
        free(p64);
        json_decref(card);
        return r;
}
