/* Private: the layout of hd_key, shared by key.c (which owns it), mac.c and
 * sig.c (which only read it), and the strict base64 decoder they share.
 * Not installed. */
#ifndef HD_KEY_H
#define HD_KEY_H

#include <sodium.h>
#include <stdbool.h>
#include <stddef.h>

#include "handoff.h"

#define KEY_AGENT_MAX 64

struct hd_key {
        hd_key_kind kind;
        /* The secret, sodium_malloc'ed (guard pages, mlock'ed where
         * allowed, wiped on free): the HMAC key's bytes, or the 64-byte
         * Ed25519 secret key (seed and public key).  NULL for a public
         * key, which is no secret and lives in pk only. */
        unsigned char *bytes;
        size_t len;
        unsigned char pk[crypto_sign_PUBLICKEYBYTES];  /* Ed25519 kinds */
        char kid[HD_KID_MAX + 1];                      /* Ed25519 kinds */
        char agent[KEY_AGENT_MAX + 1];                 /* "" = bound to none */
};

/* Strict standard base64: exactly the encoded length of n bytes with its
 * padding, decoding to n bytes, and the canonical spelling of those bytes
 * (no stray low bits), so that one value has one spelling. */
bool key_b64_decode(const char *s, size_t slen, unsigned char *out, size_t n);

/* The rule for a document's authenticator field name ("hmac" or "sig"),
 * one for both schemes (mac.c): doc is an object, carries not both, and
 * name is present as the strict base64 (key_b64_decode()) of exactly n
 * bytes, decoded into out.  0, or the verdict's -EBADMSG. */
int auth_field_decode(const json_t *doc, const char *name, unsigned char *out,
                      size_t n, hd_verdict *v);

/* For _cleanup_(hd_key_freep) (util.h). */
static inline void hd_key_freep(hd_key **k) { hd_key_free(*k); }

#endif
