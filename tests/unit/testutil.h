/* Helpers for the Check suites: paths of the build and the source tree,
 * fresh temp directories, running a program and capturing its output. */
#ifndef HD_TESTUTIL_H
#define HD_TESTUTIL_H

#include <check.h>
#include <stddef.h>

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
/* Read a whole file, NUL-terminated; NULL if absent. */
char *tu_read_file(const char *path, size_t *len);
/* The check binary is linked with -Wl,--wrap=calloc: set to n > 0, the
 * n-th calloc() of the code under test from now fails with ENOMEM
 * (libraries of their own, jansson's, are not affected). */
extern int tu_fail_calloc;
void *__wrap_calloc(size_t n, size_t size);
void *__real_calloc(size_t n, size_t size);

#endif
