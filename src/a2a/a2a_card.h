/* An agent card's signature (A2A 1.0 section 8.4), checked by handoff-a2a
 * against the key [remote NAME] a2a_card_key names (a2a_card.c). */
#ifndef HD_A2A_CARD_H
#define HD_A2A_CARD_H

#include <sodium.h>
#include <stddef.h>

#include "handoff.h"

struct a2a_card_key {
        unsigned char pk[crypto_sign_PUBLICKEYBYTES];
        char kid[HD_KID_MAX + 1];
};

/* The Ed25519 public key file path ("ed25519 B64 KID", as handoffctl
 * keygen --ed25519 writes FILE.pub) into *ret: 0, or -errno with why. */
int a2a_card_key_load(const char *path, struct a2a_card_key *ret, char *why, size_t why_size);
/* 0 when one of the card's signatures (body: the card as served)
 * verifies under k: a JWS with alg EdDSA (and k's kid, when its header
 * names one) over BASE64URL(protected) "." BASE64URL(JCS(the card
 * without "signatures")); else -1 with why. */
int a2a_card_verify(const char *body, size_t len, const struct a2a_card_key *k, char *why,
                    size_t why_size);

#endif
