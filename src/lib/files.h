/* Private file helpers of libhandoff, shared with handoffd and handoffctl:
 * directories, durable renames, random names.  All return 0 or -errno. */
#ifndef HD_FILES_H
#define HD_FILES_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "handoff.h"

/* mkdir -p of path relative to dirfd (AT_FDCWD fine); each component it
 * creates gets mode (subject to the umask); existing directories are fine,
 * an existing non-directory is -ENOTDIR. */
int mkdir_p_at(int dirfd, const char *path, mode_t mode);

/* fsync a directory fd (EINVAL/EROFS from file systems that cannot are
 * ignored). */
int fsync_dir(int dirfd);
/* The writeback of fd's bytes begun, not waited for
 * (sync_file_range(SYNC_FILE_RANGE_WRITE)), before a name of it is made
 * that its fsync is to follow.  On ext4 and XFS this gives the file its
 * blocks now, so a journal commit that makes the name durable first (an
 * fsync of another file does one) writes the bytes before it: a power cut
 * in between finds the file whole, not empty.  The fsync still decides. */
void write_start(int fd);

/* renameat2(RENAME_NOREPLACE): -EEXIST when to exists, -ENOENT when from is
 * gone (another mover won); neither is fsync'ed here. */
int move_noreplace(int fromfd, const char *from, int tofd, const char *to);

/* 2*nbytes lowercase hex chars of randomness plus NUL into buf (which needs
 * 2*nbytes + 1 bytes).  -EINVAL for nbytes 0. */
int random_hex(char *buf, size_t nbytes);
/* The same for names only (temp names, a name that must not clash), at
 * most 32 bytes: drawn from a small per-thread pool refilled a hundred
 * bytes at a time, not a system call each.  Never for a secret. */
int name_hex(char *buf, size_t nbytes);

/* A DIR stream over dirfd's directory (its own fd; dirfd stays open):
 * NULL with errno set on failure. */
#include <dirent.h>
DIR *opendir_at(int dirfd);

/* Open dirfd/path as a directory, creating it (and its parents) when
 * missing, with exactly mode whatever the umask; a directory created is
 * synced with every one above it.  The last component is never
 * followed: a symlink there is -ELOOP (or -ENOTDIR). */
int open_dir_at(int dirfd, const char *path, mode_t mode, int *ret, bool *ret_created);

/* Open an existing directory for a look only (nothing created); without
 * read permission an O_PATH fd, which still gives its owner and mode.
 * -ENOENT when it is missing. */
int open_dir_look(int dirfd, const char *path, int *ret);

/* Read fd to its end into a NUL-terminated malloc'ed buffer of at most
 * max bytes (the buffer has room for extra more bytes after them):
 * -EFBIG when there is more. */
int read_all(int fd, size_t max, size_t extra, char **ret_buf, size_t *ret_len);
/* read_all() of a regular file fstat() found size bytes long: one read()
 * when it still is (asking for size + 1 bytes and getting size is its end
 * as fstat() saw it; one still being written is a race the reader loses
 * either way), read_all()'s loop otherwise.  No extra room. */
int read_all_sized(int fd, size_t max, size_t size, char **ret_buf, size_t *ret_len);

/* Read fd into buf until cap bytes or the end of the file (EINTR
 * retried); returns the count, or -errno. */
ssize_t read_full(int fd, void *buf, size_t cap);

/* hd_read_fd() for a caller that has just done fstat(fd, st) itself:
 * the same checks on *st, no second fstat. */
int read_fd_stat(int fd, const struct stat *st, const char *name, size_t max_size,
                 char **ret_buf, size_t *ret_len, hd_verdict *v);

/* hd_load_at() that also reads a file with several links when only its
 * owner may write it (a record and its bootstrap are one file of the
 * daemon's). */
int load_at_linked(int dirfd, const char *name, const hd_limits *lim,
                   json_t **ret, hd_verdict *v);

/* hd_write_atomic() with the two syncs chosen apart, so a burst can sync
 * each file and then its directory once. */
#define WRITE_SYNC_FILE 1u
#define WRITE_SYNC_DIR  2u
/* write_linked(), write_direct(), write_atomic(): the file is created
 * with mode, which the caller's umask leaves as it is (no fchmod). */
#define WRITE_MODE_KEPT 4u
/* write_direct(): -EEXIST when name exists, as a link (never replaced). */
#define WRITE_EXCL      8u
int write_atomic(int dirfd, const char *name, const void *buf, size_t len,
                 mode_t mode, unsigned flags);
/* The same, the file's descriptor kept open in *ret_fd (for a sync
 * later, fsync_many_at() with several others: see store_sync_later()),
 * its writeback begun before it is named (write_start()). */
int write_atomic_fd(int dirfd, const char *name, const void *buf, size_t len,
                    mode_t mode, unsigned flags, int *ret_fd);
/* The longest name write_atomic() takes: its temp name, "." + name + "."
 * + 6 hex characters, must fit NAME_MAX too. */
#define WRITE_ATOMIC_NAME_MAX (NAME_MAX - 8)

/* The same, written under name itself, with no temp name and rename: for
 * a file nobody trusts until a later step (a hidden name published by a
 * rename, a marker whose being there is what counts).  A file already
 * there under name is unlinked first, never written through (it may be a
 * link someone else planted), or with WRITE_EXCL left and -EEXIST
 * returned.  On failure name is removed again. */
int write_direct(int dirfd, const char *name, const void *buf, size_t len,
                 mode_t mode, unsigned flags);
/* The same, the file's descriptor kept open in *ret_fd. */
int write_direct_fd(int dirfd, const char *name, const void *buf, size_t len,
                    mode_t mode, unsigned flags, int *ret_fd);

/* Descriptors closed together: one close_range() per run of numbers
 * that follow each other, instead of a close() each.  Only what was
 * added is closed (a number between two of them never is); past
 * FD_BATCH_MAX one is closed at once.  Nothing a close() says is heard:
 * for files read, or written on a local file system and not synced. */
#define FD_BATCH_MAX 128
struct fd_batch {
        int fd[FD_BATCH_MAX];
        size_t n;
};
void fd_batch_add(struct fd_batch *b, int fd);
void fd_batch_close(struct fd_batch *b);

/* buf written into a new file with no name (O_TMPFILE) and linked as
 * name in dirfd once complete, with exactly mode: -EEXIST when name
 * exists (a link never replaces), nothing left behind on any failure or
 * crash.  A file system without O_TMPFILE: a temp name, linked. */
int write_linked(int dirfd, const char *name, const void *buf, size_t len,
                 mode_t mode, unsigned flags);
/* The same, the file's descriptor kept open in *ret_fd, its writeback
 * begun before it is linked in (write_start()); -1 there when the file
 * system has no O_TMPFILE and the file was synced already. */
int write_linked_fd(int dirfd, const char *name, const void *buf, size_t len,
                    mode_t mode, unsigned flags, int *ret_fd);

/* The bytes a file really holds: its size, but no more than its blocks
 * (truncate -s 1536M makes a sparse file of 4 KiB whose size anyone who
 * may write it can set; retention and status count this). */
static inline uint64_t st_bytes(const struct stat *st)
{
        uint64_t b = (uint64_t)st->st_blocks * 512;

        return (uint64_t)st->st_size < b ? (uint64_t)st->st_size : b;
}

/* fsync of n files or directories at once, so they share the device's
 * cache flushes (and a journal's commits): names[i] in dirfds[i], or
 * dirfds[i] itself when names is NULL or names[i] is NULL (fsync_dir()'s
 * rules then).  A file is opened read-only, O_NOFOLLOW, for it.  Up to
 * FSYNC_MANY_THREADS threads while this call waits; one item is synced
 * here, with no thread.  rets[i]: 0 or -errno of each; returns the first
 * error or 0. */
#define FSYNC_MANY_THREADS 8
int fsync_many_at(const int *dirfds, const char *const *names, size_t n, int *rets);

#endif
