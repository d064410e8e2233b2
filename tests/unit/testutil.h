/* Helpers for the Check suites: paths of the build and the source tree,
 * fresh temp directories, running a program and capturing its output. */
#ifndef HD_TESTUTIL_H
#define HD_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "handoff.h"

/* $HD_BUILD (the build dir with handoffd, handoffctl) and $HD_SRC. */
const char *tu_build_dir(void);
const char *tu_src_dir(void);
/* A fresh directory under $TMPDIR, removed (all of them) at the exit of
 * the test process; the runner removes what a failed test left. */
char *tu_tmpdir(void);
/* Remove path and everything under it (best effort). */
void tu_rm_rf(const char *path);
/* Run argv (NULL-terminated) with stdin from /dev/null; output (stdout and
 * stderr merged) into *out (malloc'ed, may be NULL).  Returns the exit code,
 * or 128+signal. */
int tu_run(char *const argv[], char **out);
/* Write a whole file (mode 0600). */
void tu_write_file(const char *path, const void *buf, size_t len);
/* "dir/name", malloc'ed. */
char *tu_path(const char *dir, const char *name);
/* dir/name written with len bytes of buf, then chmod mode; its path. */
char *tu_file_in(const char *dir, const char *name, const void *buf, size_t len, mode_t mode);
/* The bytes of a_dir/rel and b_dir/rel are the same (what: the program
 * that wrote b_dir, for the message). */
void tu_assert_same_file(const char *a_dir, const char *b_dir, const char *rel,
                         const char *what);
/* A vectors directory's expected.tsv (tests/vectors, tests/vectors/sig):
 * one line per file, "FILE\tREASON\tNOW". */
struct tu_vec {
        char file[256], reason[64], now[64];
};
size_t tu_read_vectors(const char *dir, struct tu_vec **ret);
/* Each vector of vs, loaded from dfd and verified with lookup(userdata)
 * at its now, gets the reason its line names (HD_OK exactly for a valid/
 * one); seen[reason] (_HD_R_MAX entries) is set for each. */
void tu_check_vectors(int dfd, const struct tu_vec *vs, size_t n, hd_key_lookup_fn lookup,
                      void *userdata, bool *seen);
/* tu_file_in with a NUL-terminated text. */
char *tu_file_text(const char *dir, const char *name, const char *text, mode_t mode);
/* For the sender signature suites (test_sig*.c): a handoff from `from`
 * to zoe, initiated 2026-04-21T10:15:00Z; a fresh Ed25519 secret key
 * (kid NULL: the default kid); the public half of a secret key, through
 * its key line. */
json_t *tu_sig_doc(const char *from);
hd_key *tu_sig_gen(const char *kid);
hd_key *tu_sig_public_of(const hd_key *sk);
/* A small keyring for tu_ring_lookup: keys[i] answers for its kid; own
 * is own_agent's key when asked without kid; def the default (and the
 * key of kid "ops"). */
struct tu_ring {
        const hd_key *keys[8];
        size_t n;
        const char *own_agent;
        const hd_key *own;
        const hd_key *def;
};
const hd_key *tu_ring_lookup(void *ud, const char *kid, const char *from);
/* For the verification suites (test_verify*.c): the HMAC key of
 * test_verify.c; a valid protocol_version 1 document from alice to bob
 * issued 2026-04-21T10:15:00Z for 5 minutes. */
hd_key *tu_hmac_key(void);
json_t *tu_hmac_doc(void);
/* A key lookup that records how it was asked (tu_lookup_log_cb, with a
 * struct tu_lookup_log as userdata). */
struct tu_lookup_log {
        const hd_key *key;
        const char *only_kid;   /* non-NULL: any other kid is unknown */
        int calls;
        char kid[64], from[64];
        bool kid_null, from_null;
        bool asked_kid;         /* the last call named a kid and got a key */
};
const hd_key *tu_lookup_log_cb(void *userdata, const char *kid, const char *from);
/* For the payload suites (test_payload*.c): tests/payloads/REL, its
 * path, its text, its JSON; loaded through hd_payload_load (returns its
 * result; *ret may be NULL).  An envelope with the fields
 * hd_payload_validate looks at; a payload that validates, one rejected as
 * payload_invalid with a detail naming detail_part. */
char *tu_pl_path(const char *rel);
char *tu_pl_read(const char *rel);
json_t *tu_pl_json(const char *rel);
int tu_pl_load(const char *type, const char *rel, json_t **ret, hd_verdict *v);
json_t *tu_pl_envelope(const char *type, json_t *payload);
void tu_pl_expect_ok(const char *type, json_t *payload);
void tu_pl_expect_reject_doc(json_t *d, const hd_payload_opts *o, const char *detail_part);
void tu_pl_expect_reject(const char *type, json_t *payload, const char *detail_part);
/* Read a whole file, NUL-terminated; NULL if absent. */
char *tu_read_file(const char *path, size_t *len);
/* The check binary is linked with -Wl,--wrap=calloc: set to n > 0, the
 * n-th calloc() of the code under test from now fails with ENOMEM
 * (libraries of their own, jansson's, are not affected). */
extern int tu_fail_calloc;
void *__wrap_calloc(size_t n, size_t size);
void *__real_calloc(size_t n, size_t size);

#endif
