/* Shared by the libFuzzer targets (fuzz_*.c): the entry points' prototypes
 * and the small pieces of setup they have in common.  Each target is one
 * .c file and one binary; see mk/fuzz.mk. */
#ifndef HD_FUZZ_H
#define HD_FUZZ_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A property the code promises was broken: say which, then crash so that
 * libFuzzer keeps the input. */
#define FUZZ_ASSERT(cond, ...) do {                                           \
                if (!(cond)) {                                                \
                        fprintf(stderr, "fuzz: property broken: " __VA_ARGS__); \
                        fputc('\n', stderr);                                  \
                        abort();                                              \
                }                                                             \
        } while (0)

/* A verdict's detail goes into JSON (reason files, the control socket's
 * answers) and journald fields: it must be UTF-8 whatever the input was. */
#define FUZZ_DETAIL_OK(v, where) do {                                         \
                json_t *_s = json_string((v)->detail);                        \
                FUZZ_ASSERT(_s != NULL, "%s: detail of %s is not UTF-8: %s",   \
                            where, hd_reason_name((v)->reason), (v)->detail); \
                json_decref(_s);                                              \
        } while (0)

/* The code under test opens files by path (inih, hd_payload_load): give it
 * the input as "/proc/self/fd/N" of one memfd per process, rewritten for
 * every input. */
static inline const char *fuzz_path_of(const uint8_t *data, size_t size)
{
        static int fd = -1;
        static char path[64];
        size_t off = 0;

        if (fd < 0) {
                fd = memfd_create("hd-fuzz-input", MFD_CLOEXEC);
                if (fd < 0) {
                        perror("memfd_create");
                        abort();
                }
                snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        }
        if (ftruncate(fd, 0) < 0)
                abort();
        while (off < size) {
                ssize_t n = pwrite(fd, data + off, size - off, (off_t)off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        abort();
                off += (size_t)n;
        }
        return path;
}

/* root/dir/name written with the len bytes of data, or with text (mode
 * when it is made): the targets' temp spools.  Aborts on failure. */
static inline void fuzz_write_file(const char *root, const char *dir, const char *name,
                                   const void *data, size_t len, mode_t mode)
{
        char path[PATH_MAX];
        int fd;

        snprintf(path, sizeof(path), "%s/%s/%s", root, dir, name);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        if (fd < 0 || write(fd, data, len) != (ssize_t)len || close(fd) < 0) {
                perror(path);
                abort();
        }
}

static inline void fuzz_write_text(const char *root, const char *dir, const char *name,
                                   const char *text, mode_t mode)
{
        fuzz_write_file(root, dir, name, text, strlen(text), mode);
}

/* The target's temp tree, made with mkdtemp() as BASE/hd-fuzz-WHO.XXXXXX in
 * root (size n).  BASE is $FUZZ_TMPDIR when set, else /dev/shm when it is
 * writable, else $TMPDIR or /tmp: the targets rewrite scratch files for
 * every input, and on ext4 inode allocation took 80% of fuzz_consume's time
 * (2,300 executions/s in /tmp); nothing here is about durability.  Aborts
 * when the directory cannot be made. */
static inline void fuzz_temp_root(char *root, size_t n, const char *who)
{
        const char *base = getenv("FUZZ_TMPDIR");

        if (!base || !*base)
                base = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
        if (!base || !*base)
                base = "/tmp";
        if ((size_t)snprintf(root, n, "%s/hd-fuzz-%s.XXXXXX", base, who) >= n ||
            !mkdtemp(root)) {
                fprintf(stderr, "fuzz_%s: cannot make a temp directory in %s: %s\n", who,
                        base, strerror(errno));
                abort();
        }
}

/* At exit: the target's temp tree root (made from a mkdtemp() template;
 * still the template, ending in X, when that failed) removed. */
static inline void fuzz_remove_tree(const char *root, const char *who)
{
        char cmd[PATH_MAX + 16];

        if (!root[0] || root[strlen(root) - 1] == 'X')
                return;
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        if (system(cmd) != 0)
                fprintf(stderr, "%s: cannot remove %s\n", who, root);
}

/* The "now" of tests/vectors/expected.tsv, so the seeds are fresh. */
static inline int64_t fuzz_now(void)
{
        int64_t t = 0;

        if (hd_time_parse("2026-04-21T10:16:00Z", &t) < 0)
                abort();
        return t;
}

#endif
