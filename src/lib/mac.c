/* The MAC: HMAC-SHA256 over the canonical bytes (the document without its
 * "hmac" member, serialized as Python's json.dumps(sort_keys=True,
 * separators=(",", ":"))), carried as 44 chars of standard base64.
 * Computing and the constant-time check live here; hd_sign() (sig.c)
 * picks this or the Ed25519 signature by the key. */
#include <errno.h>
#include <sodium.h>
#include <string.h>

#include "canon_src.h"
#include "handoff.h"
#include "key.h"
#include "util.h"

#define MAC_RAW_LEN crypto_auth_hmacsha256_BYTES

_Static_assert(sodium_base64_ENCODED_LEN(MAC_RAW_LEN,
               sodium_base64_VARIANT_ORIGINAL) == HD_MAC_B64_LEN + 1,
               "a 32-byte MAC is 44 base64 chars");

/* Over the canonical bytes: src's pieces when doc was parsed from them,
 * else written here. */
static int mac_raw(const json_t *doc, const struct canon_src *src, const hd_key *k,
                   unsigned char out[MAC_RAW_LEN])
{
        _cleanup_free_ char *canon = NULL;
        crypto_auth_hmacsha256_state st;
        const char *piece[2] = { NULL, NULL };
        size_t n[2] = { 0, 0 };
        int r;

        if (!doc || !k || !json_is_object(doc) || k->kind != HD_KEY_HMAC)
                return -EINVAL;
        if (sodium_init() < 0)
                return -EIO;
        if (!canon_src_pieces(src, "hmac", piece, n)) {
                r = hd_canon_dump(doc, "hmac", &canon, &n[0]);
                if (r < 0)
                        return r;
                piece[0] = canon;
        }
        /* The _init/_update/_final form takes a key of any length (longer
         * than a block it is hashed first, as Python's hmac does); the
         * one-shot crypto_auth_hmacsha256() insists on 32 bytes. */
        crypto_auth_hmacsha256_init(&st, k->bytes, k->len);
        for (int i = 0; i < 2; i++)
                if (n[i])
                        crypto_auth_hmacsha256_update(&st, (const unsigned char *)piece[i], n[i]);
        crypto_auth_hmacsha256_final(&st, out);
        /* The state holds the key's padded inner and outer blocks. */
        sodium_memzero(&st, sizeof(st));
        return 0;
}

int hd_mac_compute(const json_t *doc, const hd_key *k,
                   char out[HD_MAC_B64_LEN + 1])
{
        unsigned char mac[MAC_RAW_LEN];
        int r;

        if (!out)
                return -EINVAL;
        r = mac_raw(doc, NULL, k, mac);
        if (r < 0)
                return r;
        sodium_bin2base64(out, HD_MAC_B64_LEN + 1, mac, sizeof(mac),
                          sodium_base64_VARIANT_ORIGINAL);
        sodium_memzero(mac, sizeof(mac));
        return 0;
}

int auth_field_decode(const json_t *doc, const char *name, unsigned char *out,
                      size_t n, hd_verdict *v)
{
        const json_t *f;

        if (!json_is_object(doc))
                return verdict(v, HD_R_BAD_TYPE, "document is not a JSON object");
        f = json_object_get(doc, name);
        if (json_object_get(doc, "hmac") && json_object_get(doc, "sig"))
                return verdict(v, HD_R_BAD_MAC_FORMAT,
                               "both hmac and sig: a document carries one of them");
        if (!f)
                return verdict(v, HD_R_MISSING_FIELD, "%s is missing", name);
        if (!json_is_string(f))
                return verdict(v, HD_R_BAD_MAC_FORMAT, "%s is not a string", name);
        if (!key_b64_decode(json_string_value(f), json_string_length(f), out, n))
                return verdict(v, HD_R_BAD_MAC_FORMAT,
                               "%s is not %zu chars of standard base64 of %zu bytes",
                               name, (size_t)sodium_base64_ENCODED_LEN(n,
                               sodium_base64_VARIANT_ORIGINAL) - 1, n);
        return 0;
}

int hd_mac_check(const json_t *doc, const hd_key *k, hd_verdict *v)
{
        return mac_check_src(doc, NULL, k, v);
}

int mac_check_src(const json_t *doc, const struct canon_src *src, const hd_key *k,
                  hd_verdict *v)
{
        unsigned char want[MAC_RAW_LEN], got[MAC_RAW_LEN];
        int r;

        verdict_clear(v);
        if (!doc || !k || k->kind != HD_KEY_HMAC)
                return -EINVAL;
        r = auth_field_decode(doc, "hmac", got, MAC_RAW_LEN, v);
        if (r < 0)
                return r;

        r = mac_raw(doc, src, k, want);
        if (r == -ERANGE)
                return verdict(v, HD_R_NUMBER_OUT_OF_RANGE,
                               "a number has no canonical form (not finite)");
        if (r < 0)
                return r;
        r = sodium_memcmp(want, got, MAC_RAW_LEN);
        sodium_memzero(want, sizeof(want));
        if (r != 0)
                return verdict(v, HD_R_BAD_MAC, "hmac does not match the document");
        return 0;
}
