/* Test helpers; see testutil.h. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

const char *tu_build_dir(void)
{
        const char *s = getenv("HD_BUILD");
        return s ? s : "build";
}

const char *tu_src_dir(void)
{
        const char *s = getenv("HD_SRC");
        return s ? s : ".";
}

/* Every directory tu_tmpdir() made in this process, removed at its exit. */
static char **tmp_dirs;
static size_t n_tmp_dirs;

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
        (void)st, (void)flag, (void)f;
        remove(p);
        return 0;
}

void tu_rm_rf(const char *path)
{
        nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void tmp_cleanup(void)
{
        for (size_t i = 0; i < n_tmp_dirs; i++) {
                if (!getenv("HD_KEEP_TMP"))
                        tu_rm_rf(tmp_dirs[i]);
                free(tmp_dirs[i]);
        }
        free(tmp_dirs);
        tmp_dirs = NULL;
        n_tmp_dirs = 0;
}

char *tu_tmpdir(void)
{
        const char *base = getenv("TMPDIR");
        char **dirs, *p;

        if (asprintf(&p, "%s/hdtest.XXXXXX", base ? base : "/tmp") < 0)
                abort();
        ck_assert_ptr_nonnull(mkdtemp(p));
        dirs = realloc(tmp_dirs, (n_tmp_dirs + 1) * sizeof(*dirs));
        ck_assert_ptr_nonnull(dirs);
        if (!tmp_dirs)
                atexit(tmp_cleanup);
        tmp_dirs = dirs;
        /* the list owns a copy: callers may free what they got */
        tmp_dirs[n_tmp_dirs] = strdup(p);
        ck_assert_ptr_nonnull(tmp_dirs[n_tmp_dirs]);
        n_tmp_dirs++;
        return p;
}

int tu_run(char *const argv[], char **out)
{
        int pfd[2];
        pid_t pid;
        char *buf = NULL;
        size_t len = 0, cap = 0;
        int st;

        ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int nul = open("/dev/null", O_RDONLY);
                dup2(nul, 0);
                dup2(pfd[1], 1);
                dup2(pfd[1], 2);
                execvp(argv[0], argv);
                _exit(127);
        }
        close(pfd[1]);
        for (;;) {
                if (len + 4096 + 1 > cap) {
                        cap = cap ? cap * 2 : 8192;
                        buf = realloc(buf, cap);
                        ck_assert_ptr_nonnull(buf);
                }
                ssize_t n = read(pfd[0], buf + len, cap - len - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        close(pfd[0]);
        buf[len] = '\0';
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (out)
                *out = buf;
        else
                free(buf);
        if (WIFEXITED(st))
                return WEXITSTATUS(st);
        return 128 + WTERMSIG(st);
}

void tu_write_file(const char *path, const void *buf, size_t len)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
        close(fd);
}

char *tu_read_file(const char *path, size_t *lenp)
{
        FILE *f = fopen(path, "re");
        char *buf = NULL;
        size_t len = 0;

        if (!f)
                return NULL;
        buf = malloc(1);
        for (;;) {
                char chunk[8192];
                size_t n = fread(chunk, 1, sizeof(chunk), f);
                if (n == 0)
                        break;
                buf = realloc(buf, len + n + 1);
                memcpy(buf + len, chunk, n);
                len += n;
        }
        fclose(f);
        buf[len] = '\0';
        if (lenp)
                *lenp = len;
        return buf;
}

int tu_fail_calloc;

void *__wrap_calloc(size_t n, size_t size)
{
        if (tu_fail_calloc > 0 && --tu_fail_calloc == 0) {
                errno = ENOMEM;
                return NULL;
        }
        return __real_calloc(n, size);
}
