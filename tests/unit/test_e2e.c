/* End-to-end suites: every tests/e2e/test_*.py, run with python3 against the
 * real binaries of this build, one Check test each (own process, timeout).
 * The scripts print what they did; on failure the tail of their output is
 * the assertion message. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

#define MAX_SCRIPTS 128
static char *scripts[MAX_SCRIPTS];
static int n_scripts;

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void discover(void)
{
        char dir[4096];
        DIR *d;
        struct dirent *de;

        snprintf(dir, sizeof(dir), "%s/tests/e2e", tu_src_dir());
        d = opendir(dir);
        if (!d)
                return;
        while ((de = readdir(d)) && n_scripts < MAX_SCRIPTS) {
                size_t l = strlen(de->d_name);
                if (strncmp(de->d_name, "test_", 5) != 0 || l < 4 ||
                    strcmp(de->d_name + l - 3, ".py") != 0)
                        continue;
                scripts[n_scripts++] = strdup(de->d_name);
        }
        closedir(d);
        qsort(scripts, (size_t)n_scripts, sizeof(char *), cmp_str);
}

START_TEST(test_e2e_script)
{
        char path[4096], *out = NULL;
        const char *only = getenv("HD_E2E");
        int r;

        if (only && !strstr(scripts[_i], only))
                return;
        snprintf(path, sizeof(path), "%s/tests/e2e/%s", tu_src_dir(),
                 scripts[_i]);
        char *argv[] = { "python3", "-B", path, NULL };
        r = tu_run(argv, &out);
        if (r != 0) {
                size_t l = strlen(out);
                const char *tail = l > 3000 ? out + l - 3000 : out;
                fprintf(stderr, "---- %s (exit %d) ----\n%s\n", scripts[_i],
                        r, out);
                ck_abort_msg("%s exited %d: ...%s", scripts[_i], r, tail);
        }
        /* The figures: the script's last lines (its summary and "ok"),
         * and the whole output kept in the build dir. */
        char logp[4096];
        snprintf(logp, sizeof(logp), "%s/tests/logs", tu_build_dir());
        mkdir(logp, 0755);
        snprintf(logp, sizeof(logp), "%s/tests/logs/%s.log", tu_build_dir(), scripts[_i]);
        tu_write_file(logp, out, strlen(out));
        const char *end = out + strlen(out), *p = end;
        int lines = 0;
        while (p > out && lines < 3)
                if (*--p == '\n' && p + 1 < end)
                        lines++;
        if (*p == '\n')
                p++;
        fprintf(stderr, "%s:\n", scripts[_i]);
        for (const char *q = p; q < end;) {
                const char *nl = memchr(q, '\n', (size_t)(end - q));
                size_t n = nl ? (size_t)(nl - q) : (size_t)(end - q);
                if (n && strncmp(q, "handoffd[", 9))
                        fprintf(stderr, "    %.*s\n", (int)(n > 300 ? 300 : n), q);
                q += n + 1;
        }
        free(out);
}
END_TEST

Suite *suite_e2e(void);
Suite *suite_e2e(void)
{
        Suite *s = suite_create("e2e");
        TCase *tc = tcase_create("scripts");

        discover();
        tcase_set_timeout(tc, 600);
        if (n_scripts > 0)
                tcase_add_loop_test(tc, test_e2e_script, 0, n_scripts);
        suite_add_tcase(s, tc);
        return s;
}
