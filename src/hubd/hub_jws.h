/* The hub's signatures (hub_jws.c): [hub] signing_key, an Ed25519 key,
 * signs the agent cards (a JWS over their JCS bytes, src/lib/jcs.c) and the
 * JWTs of the push notifications; /.well-known/jwks.json serves its
 * public half. */
#ifndef HUBD_HUB_JWS_H
#define HUBD_HUB_JWS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#define HUB_JWKS_PATH "/.well-known/jwks.json"
#define HUB_JWT_LIFETIME 300    /* seconds: a push's JWT, from its try */

struct hub_signer;
struct hub_answer;

/* ---- hub_jws.c ---- */
/* The Ed25519 secret key file path (as handoffctl keygen --ed25519
 * writes it): 0 with *ret, or -errno with err filled. */
int hub_signer_load(const char *path, struct hub_signer **ret, char *err, size_t errlen);
void hub_signer_free(struct hub_signer *s);
const char *hub_signer_kid(const struct hub_signer *s);
/* base64url without padding of n bytes, malloc'ed. */
char *hub_b64url(const void *p, size_t n);
/* card signed in place: its "signatures" an AgentCardSignature whose
 * protected header is {alg EdDSA, typ JOSE, kid, jku}.  0 or -errno. */
int hub_jws_sign_card(const struct hub_signer *s, json_t *card, const char *jku);
/* A JWT (compact JWS, header alg EdDSA, typ JWT, kid) of claims,
 * malloc'ed; NULL when out of memory. */
char *hub_jwt_make(const struct hub_signer *s, const json_t *claims);
/* GET /.well-known/jwks.json: the key as a JWK set, or 404 without one
 * (s NULL). */
int hub_jwks_answer(const struct hub_signer *s, struct hub_answer *a);

#endif
