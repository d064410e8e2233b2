/* Private: a document's canonical bytes taken from the bytes it was parsed
 * from, when those are already canonical (what Python's json.dumps with
 * sort_keys and compact separators writes, as every producer does): the
 * MAC then covers them as they are, without writing the document again.
 * Not installed. */
#ifndef HD_CANON_SRC_H
#define HD_CANON_SRC_H

#include <stddef.h>

#include "handoff.h"

/* The caller's bytes, borrowed: valid while they are and while the
 * document parsed from them is not changed. */
struct canon_src {
        const char *buf;
        size_t off, len;                /* the top-level object; len 0: not canonical */
        size_t hmac_off, hmac_len;      /* the member and one comma beside it; len 0: none */
        size_t sig_off, sig_len;
};

/* hd_parse(), and in *src where buf holds the document's canonical bytes
 * exactly (src->len 0 when it does not: a real, a space, an escape or an
 * order other than the canonical writer's).  Only bytes the writer would
 * write are taken: whatever is not is left to it. */
int canon_src_parse(const void *buf, size_t len, const hd_limits *lim,
                    json_t **ret, struct canon_src *src, hd_verdict *v);

/* The canonical bytes of the document without the member skip ("hmac",
 * "sig") as at most two pieces of src's buffer: false when src has none. */
bool canon_src_pieces(const struct canon_src *src, const char *skip,
                      const char *ret_p[2], size_t ret_n[2]);

/* hd_verify(), hd_auth_check(), hd_mac_check(), hd_sig_check() with the
 * bytes doc was parsed from (src NULL: the document written again). */
int canon_src_verify(const json_t *doc, const struct canon_src *src,
                     hd_key_lookup_fn lookup, void *userdata, const hd_policy *p,
                     const struct hd_payload_opts *opts, int64_t now_usec, hd_verdict *v);
int auth_check_src(const json_t *doc, const struct canon_src *src,
                   hd_key_lookup_fn lookup, void *userdata, hd_verdict *v);
int mac_check_src(const json_t *doc, const struct canon_src *src, const hd_key *k,
                  hd_verdict *v);
int sig_check_src(const json_t *doc, const struct canon_src *src, const hd_key *k,
                  hd_verdict *v);

#endif
