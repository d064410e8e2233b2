/* Atomic writes and no-replace moves: what a crash or a race must never
 * leave behind (temp files, a replaced item, a silent overwrite). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "handoff.h"
#include "testutil.h"
#include "util.h"

static int open_dir(const char *path)
{
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        return fd;
}

/* Names in dir, excluding "." and "..". */
static int count_entries(const char *dir, int *n_dot)
{
        DIR *d = opendir(dir);
        struct dirent *de;
        int n = 0;

        ck_assert_ptr_nonnull(d);
        if (n_dot)
                *n_dot = 0;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                n++;
                if (n_dot && de->d_name[0] == '.')
                        (*n_dot)++;
        }
        closedir(d);
        return n;
}

/* dir/name has exactly mode (its permission bits), and size bytes. */
static void assert_mode_size(const char *dir, const char *name, mode_t mode, off_t size)
{
        char path[4096];
        struct stat st;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, mode);
        ck_assert_int_eq(st.st_size, size);
}

START_TEST(test_write_atomic_no_temp_left_and_mode)
{
        char *dir = tu_tmpdir(), path[4096];
        int dfd = open_dir(dir), n_dot;
        struct stat st;
        char *got;
        size_t len;

        ck_assert_int_eq(hd_write_atomic(dfd, "a.json", "hello", 5, 0640,
                                         true), 0);
        snprintf(path, sizeof(path), "%s/a.json", dir);
        got = tu_read_file(path, &len);
        ck_assert_ptr_nonnull(got);
        ck_assert_uint_eq(len, 5);
        ck_assert_mem_eq(got, "hello", 5);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0640);
        ck_assert_int_eq(count_entries(dir, &n_dot), 1);
        ck_assert_int_eq(n_dot, 0);
        free(got);

        /* a mode wider than the umask allows is still exact */
        mode_t old = umask(077);
        ck_assert_int_eq(hd_write_atomic(dfd, "b", "", 0, 0644, false), 0);
        umask(old);
        assert_mode_size(dir, "b", 0644, 0);

        /* WRITE_MODE_KEPT (the daemon's, umask 027): made with the mode at
         * once, no fchmod, so the umask stands; over an old file, which
         * keeps no temp name beside it */
        old = umask(027);
        ck_assert_int_eq(write_atomic(dfd, "c", "x", 1, 0640, WRITE_MODE_KEPT), 0);
        ck_assert_int_eq(write_atomic(dfd, "c", "yz", 2, 0640, WRITE_MODE_KEPT), 0);
        ck_assert_int_eq(write_atomic(dfd, "d", "", 0, 0666, WRITE_MODE_KEPT), 0);
        umask(old);
        assert_mode_size(dir, "c", 0640, 2);
        assert_mode_size(dir, "d", 0640, 0);
        ck_assert_int_eq(count_entries(dir, &n_dot), 4);
        ck_assert_int_eq(n_dot, 0);
        close(dfd);
        free(dir);
}
END_TEST

START_TEST(test_write_atomic_replaces)
{
        char *dir = tu_tmpdir(), path[4096];
        int dfd = open_dir(dir), n_dot;
        struct stat st;
        char *got;

        snprintf(path, sizeof(path), "%s/x", dir);
        tu_write_file(path, "old contents, longer", 20);
        ck_assert_int_eq(hd_write_atomic(dfd, "x", "new", 3, 0600, true), 0);
        got = tu_read_file(path, NULL);
        ck_assert_str_eq(got, "new");
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0600);
        ck_assert_int_eq(count_entries(dir, &n_dot), 1);
        ck_assert_int_eq(n_dot, 0);
        free(got);
        close(dfd);
        free(dir);
}
END_TEST

START_TEST(test_write_atomic_large_buffer)
{
        char *dir = tu_tmpdir(), path[4096];
        int dfd = open_dir(dir);
        size_t n = 3 * 1024 * 1024 + 17, len;
        char *buf = malloc(n), *got;

        ck_assert_ptr_nonnull(buf);
        for (size_t i = 0; i < n; i++)
                buf[i] = (char)('a' + i % 23);
        ck_assert_int_eq(hd_write_atomic(dfd, "big", buf, n, 0600, false), 0);
        snprintf(path, sizeof(path), "%s/big", dir);
        got = tu_read_file(path, &len);
        ck_assert_uint_eq(len, n);
        ck_assert_int_eq(memcmp(got, buf, n), 0);
        free(got);
        free(buf);
        close(dfd);
        free(dir);
}
END_TEST

START_TEST(test_write_atomic_failure_leaves_nothing)
{
        char *dir = tu_tmpdir(), path[4096];
        int dfd = open_dir(dir), n_dot;

        /* the target is a non-empty directory: rename fails after the temp
         * file was written, and the temp must be gone */
        snprintf(path, sizeof(path), "%s/d", dir);
        ck_assert_int_eq(mkdir(path, 0700), 0);
        snprintf(path, sizeof(path), "%s/d/keep", dir);
        tu_write_file(path, "k", 1);
        ck_assert_int_lt(hd_write_atomic(dfd, "d", "data", 4, 0600, true), 0);
        ck_assert_int_eq(count_entries(dir, &n_dot), 1);
        ck_assert_int_eq(n_dot, 0);

        /* names that are not one plain name are refused */
        ck_assert_int_eq(hd_write_atomic(dfd, "a/b", "x", 1, 0600, false),
                         -EINVAL);
        ck_assert_int_eq(hd_write_atomic(dfd, "..", "x", 1, 0600, false),
                         -EINVAL);
        ck_assert_int_eq(hd_write_atomic(dfd, "", "x", 1, 0600, false),
                         -EINVAL);
        ck_assert_int_eq(count_entries(dir, NULL), 1);
        close(dfd);
        free(dir);
}
END_TEST

START_TEST(test_move_noreplace_refuses_existing)
{
        char *dir = tu_tmpdir(), path[4096];
        int dfd = open_dir(dir);
        char *got;

        snprintf(path, sizeof(path), "%s/src", dir);
        tu_write_file(path, "source", 6);
        snprintf(path, sizeof(path), "%s/dst", dir);
        tu_write_file(path, "target", 6);
        ck_assert_int_eq(move_noreplace(dfd, "src", dfd, "dst"), -EEXIST);
        got = tu_read_file(path, NULL);
        ck_assert_str_eq(got, "target");
        free(got);
        snprintf(path, sizeof(path), "%s/src", dir);
        ck_assert_int_eq(access(path, F_OK), 0);
        close(dfd);
        free(dir);
}
END_TEST

START_TEST(test_move_noreplace_moves_and_reports_vanished)
{
        char *dir = tu_tmpdir(), path[4096];
        int dfd, afd, bfd;
        char *got;

        snprintf(path, sizeof(path), "%s/a", dir);
        ck_assert_int_eq(mkdir(path, 0700), 0);
        afd = open_dir(path);
        snprintf(path, sizeof(path), "%s/b", dir);
        ck_assert_int_eq(mkdir(path, 0700), 0);
        bfd = open_dir(path);
        dfd = open_dir(dir);

        snprintf(path, sizeof(path), "%s/a/item", dir);
        tu_write_file(path, "one", 3);
        ck_assert_int_eq(move_noreplace(afd, "item", bfd, "item"), 0);
        ck_assert_int_eq(access(path, F_OK), -1);
        snprintf(path, sizeof(path), "%s/b/item", dir);
        got = tu_read_file(path, NULL);
        ck_assert_str_eq(got, "one");
        free(got);

        /* the second mover of the same item loses with -ENOENT */
        ck_assert_int_eq(move_noreplace(afd, "item", bfd, "item2"),
                         -ENOENT);
        ck_assert_int_eq(fsync_dir(afd), 0);
        ck_assert_int_eq(fsync_dir(bfd), 0);
        close(afd);
        close(bfd);
        close(dfd);
        free(dir);
}
END_TEST

START_TEST(test_read_fd_of_a_removed_file_is_gone_not_hardlink)
{
        char *dir = tu_tmpdir(), path[4096], *buf = NULL;
        hd_verdict v;
        size_t len;
        int dfd, fd;

        dfd = open_dir(dir);
        snprintf(path, sizeof(path), "%s/boot.json", dir);
        tu_write_file(path, "{}", 2);
        ck_assert_int_eq(hd_open_at(dfd, "boot.json", &fd, &v), 0);
        /* another consumer takes and deletes it between our open and read */
        ck_assert_int_eq(unlink(path), 0);
        ck_assert_int_eq(hd_read_fd(fd, "boot.json", 0, &buf, &len, &v), -ENOENT);
        ck_assert_ptr_null(buf);
        close(fd);
        close(dfd);
        free(dir);
}
END_TEST

/* read_all_sized() reads the whole file whatever the size it is told:
 * the size fstat() gave (one read), a file that grew since (a smaller
 * size), one that shrank (a larger size), one that grew past max, and the
 * sizes around max and the 4 KiB a first read asks for. */
START_TEST(test_read_all_sized_whatever_the_size_told)
{
        static const size_t lens[] = { 1, 100, 4095, 4096, 4097, 9000, 70000 };
        char *dir = tu_tmpdir(), path[4096];
        char *data = malloc(70000);

        for (size_t i = 0; i < 70000; i++)
                data[i] = (char)('a' + i % 26);
        snprintf(path, sizeof(path), "%s/f", dir);
        for (size_t i = 0; i < ELEMENTSOF(lens); i++) {
                size_t n = lens[i];
                const size_t told[] = { n, n - 1, n / 2, n + 1, 2 * n, 0 };

                tu_write_file(path, data, n);
                for (size_t k = 0; k < ELEMENTSOF(told); k++) {
                        int fd = open(path, O_RDONLY | O_CLOEXEC);
                        char *buf = NULL;
                        size_t len = 0;

                        ck_assert_int_ge(fd, 0);
                        ck_assert_int_eq(read_all_sized(fd, 70000, told[k], &buf, &len), 0);
                        ck_assert_msg(len == n && !memcmp(buf, data, n) && buf[n] == '\0',
                                      "%zu bytes told %zu: read %zu", n, told[k], len);
                        free(buf);
                        close(fd);
                        /* one byte over max is too big, however it is told */
                        fd = open(path, O_RDONLY | O_CLOEXEC);
                        buf = NULL;
                        ck_assert_int_eq(read_all_sized(fd, n - 1, told[k], &buf, &len),
                                         -EFBIG);
                        ck_assert_ptr_null(buf);
                        close(fd);
                }
        }
        free(data);
        free(dir);
}
END_TEST

START_TEST(test_mkdir_p_and_random_hex)
{
        char *dir = tu_tmpdir(), path[4096], a[33], b[33];
        int dfd = open_dir(dir);
        struct stat st;

        ck_assert_int_eq(mkdir_p_at(dfd, "x//y/./z/", 0700), 0);
        ck_assert_int_eq(mkdir_p_at(dfd, "x/y/z", 0700), 0);
        snprintf(path, sizeof(path), "%s/x/y/z", dir);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert(S_ISDIR(st.st_mode));
        snprintf(path, sizeof(path), "%s/x/y/z/file", dir);
        tu_write_file(path, "f", 1);
        ck_assert_int_eq(mkdir_p_at(dfd, "x/y/z/file/w", 0700), -ENOTDIR);
        snprintf(path, sizeof(path), "%s/abs/path", dir);
        ck_assert_int_eq(mkdir_p_at(AT_FDCWD, path, 0700), 0);
        ck_assert_int_eq(stat(path, &st), 0);

        ck_assert_int_eq(random_hex(a, 16), 0);
        ck_assert_int_eq(random_hex(b, 16), 0);
        ck_assert_uint_eq(strlen(a), 32);
        ck_assert_uint_eq(strspn(a, "0123456789abcdef"), 32);
        ck_assert_str_ne(a, b);
        ck_assert_int_eq(random_hex(a, 0), -EINVAL);
        close(dfd);
        free(dir);
}
END_TEST

/* name_hex(): names from a pool, each new; bounds refused. */
START_TEST(test_name_hex_pool)
{
        enum { N = 1000 };
        static char names[N][17];

        for (int i = 0; i < N; i++) {
                ck_assert_int_eq(name_hex(names[i], 8), 0);
                ck_assert_uint_eq(strlen(names[i]), 16);
                ck_assert_uint_eq(strspn(names[i], "0123456789abcdef"), 16);
                for (int j = 0; j < i; j++)
                        ck_assert_str_ne(names[i], names[j]);
        }
        ck_assert_int_eq(name_hex(names[0], 0), -EINVAL);
        ck_assert_int_eq(name_hex(names[0], 33), -EINVAL);
}
END_TEST

/* The write_*_fd() calls leave the named file's descriptor open: the
 * same inode as the name, its bytes written (what store_sync_later()
 * syncs), the mode as asked. */
START_TEST(test_write_fd_kept)
{
        char *dir = tu_tmpdir();
        int dfd = open_dir(dir), fds[3] = { -1, -1, -1 };
        const char *names[3] = { "atomic", "linked", "direct" };
        struct stat a, b;
        char buf[8];

        ck_assert_int_eq(write_atomic_fd(dfd, names[0], "abc", 3, 0640, 0, &fds[0]), 0);
        ck_assert_int_eq(write_linked_fd(dfd, names[1], "abc", 3, 0640, 0, &fds[1]), 0);
        ck_assert_int_eq(write_direct_fd(dfd, names[2], "abc", 3, 0640, 0, &fds[2]), 0);
        int none = 0;
        ck_assert_int_eq(write_linked_fd(dfd, names[1], "x", 1, 0640, 0, &none), -EEXIST);
        ck_assert_int_eq(none, -1);
        for (int i = 0; i < 3; i++) {
                ck_assert_int_ge(fds[i], 0);
                ck_assert_int_eq(fstat(fds[i], &a), 0);
                ck_assert_int_eq(fstatat(dfd, names[i], &b, AT_SYMLINK_NOFOLLOW), 0);
                ck_assert(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
                ck_assert_int_eq(b.st_mode & 07777, 0640);
                ck_assert_int_eq(fsync(fds[i]), 0);
                int r = openat(dfd, names[i], O_RDONLY | O_CLOEXEC);
                ck_assert_int_ge(r, 0);
                ck_assert_int_eq(read(r, buf, sizeof(buf)), 3);
                ck_assert(!memcmp(buf, "abc", 3));
                close(r);
                close(fds[i]);
        }
        close(dfd);
        tu_rm_rf(dir);
        free(dir);
}
END_TEST

static bool fd_open(int fd)
{
        return fcntl(fd, F_GETFD) >= 0;
}

/* fd_batch_close() closes what was added, in runs, and never a number
 * between two of them that was not; past FD_BATCH_MAX at once. */
START_TEST(test_fd_batch_closes_only_its_own)
{
        struct fd_batch b = { .n = 0 };
        int fd[8], kept;

        for (int i = 0; i < 8; i++) {
                fd[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
                ck_assert_int_ge(fd[i], 0);
        }
        kept = fd[3];                   /* not added: a neighbour's */
        for (int i = 7; i >= 0; i--)    /* in any order */
                if (i != 3)
                        fd_batch_add(&b, fd[i]);
        fd_batch_close(&b);
        ck_assert_uint_eq(b.n, 0);
        for (int i = 0; i < 8; i++)
                ck_assert_msg(fd_open(fd[i]) == (i == 3), "fd %d (%d)", i, fd[i]);
        close(kept);

        int many[FD_BATCH_MAX + 2];
        for (int i = 0; i < FD_BATCH_MAX + 2; i++) {
                many[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
                ck_assert_int_ge(many[i], 0);
                fd_batch_add(&b, many[i]);
        }
        ck_assert_uint_eq(b.n, FD_BATCH_MAX);
        ck_assert(!fd_open(many[FD_BATCH_MAX]) && !fd_open(many[FD_BATCH_MAX + 1]));
        ck_assert(fd_open(many[0]));
        fd_batch_close(&b);
        for (int i = 0; i < FD_BATCH_MAX; i++)
                ck_assert(!fd_open(many[i]));
}
END_TEST

Suite *suite_files(void);
Suite *suite_files(void)
{
        Suite *s = suite_create("files");
        TCase *tc = tcase_create("atomic");

        tcase_add_test(tc, test_write_atomic_no_temp_left_and_mode);
        tcase_add_test(tc, test_write_atomic_replaces);
        tcase_add_test(tc, test_write_atomic_large_buffer);
        tcase_add_test(tc, test_write_atomic_failure_leaves_nothing);
        tcase_add_test(tc, test_move_noreplace_refuses_existing);
        tcase_add_test(tc, test_move_noreplace_moves_and_reports_vanished);
        tcase_add_test(tc, test_read_fd_of_a_removed_file_is_gone_not_hardlink);
        tcase_add_test(tc, test_mkdir_p_and_random_hex);
        tcase_add_test(tc, test_fd_batch_closes_only_its_own);
        tcase_add_test(tc, test_read_all_sized_whatever_the_size_told);
        tcase_add_test(tc, test_name_hex_pool);
        tcase_add_test(tc, test_write_fd_kept);
        suite_add_tcase(s, tc);
        return s;
}
