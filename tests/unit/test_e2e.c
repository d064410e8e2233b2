/* End-to-end suites: every tests/e2e/test_*.py, run with python3 against the
 * real binaries of this build, one Check test each (own process, timeout).
 * The scripts print what they did; on failure the tail of their output is
 * the assertion message. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#define MAX_SCRIPTS 512
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
        while ((de = readdir(d))) {
                size_t l = strlen(de->d_name);
                if (strncmp(de->d_name, "test_", 5) != 0 || l < 4 ||
                    strcmp(de->d_name + l - 3, ".py") != 0)
                        continue;
                /* A script left out would pass unseen: the run stops. */
                if (n_scripts == MAX_SCRIPTS) {
                        fprintf(stderr, "e2e: more than %d scripts in %s: raise MAX_SCRIPTS\n",
                                MAX_SCRIPTS, dir);
                        exit(EXIT_FAILURE);
                }
                scripts[n_scripts++] = strdup(de->d_name);
        }
        closedir(d);
        qsort(scripts, (size_t)n_scripts, sizeof(char *), cmp_str);
}

/* The run's tally: each script's process appends "P name" or "F name"
 * (a script killed by its timeout appends nothing); the tcase's teardown,
 * in the runner's own process after the last script, prints one line. */
static char tally_path[4096];

static void tally_add(char mark, const char *name)
{
        char line[300];
        int fd = open(tally_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        int n = snprintf(line, sizeof(line), "%c %s\n", mark, name);

        if (fd < 0)
                return;
        if (n > 0 && write(fd, line, (size_t)n) != n)
                fprintf(stderr, "e2e: cannot write %s\n", tally_path);
        close(fd);
}

static void tally_setup(void)
{
        const char *t = getenv("TMPDIR");

        snprintf(tally_path, sizeof(tally_path), "%s/e2e-tally.%ld", t && *t ? t : "/tmp",
                 (long)getpid());
        unlink(tally_path);
}

static void tally_teardown(void)
{
        char line[300], failed[2048] = "";
        int pass = 0, fail = 0;
        const char *only = getenv("HD_E2E");
        int run = 0;
        FILE *f = fopen(tally_path, "re");

        for (int i = 0; i < n_scripts; i++)
                run += !only || strstr(scripts[i], only);
        while (f && fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = '\0';
                if (line[0] == 'P') {
                        pass++;
                } else {
                        fail++;
                        if (strlen(failed) + strlen(line) + 3 < sizeof(failed))
                                strcat(strcat(failed, " "), line + 2);
                }
        }
        if (f)
                fclose(f);
        unlink(tally_path);
        /* one not counted was killed (timeout or crash): a failure */
        if (pass + fail < run) {
                strcat(failed, " (and the ones that timed out)");
                fail = run - pass;
        }
        fprintf(stderr, "e2e: %d passed, %d failed%s%s\n", pass, fail,
                fail ? ":" : "", failed);
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
                tally_add('F', scripts[_i]);
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
        tally_add('P', scripts[_i]);
}
END_TEST

Suite *suite_e2e(void);
Suite *suite_e2e(void)
{
        Suite *s = suite_create("e2e");
        TCase *tc = tcase_create("scripts");

        discover();
        tcase_set_timeout(tc, 600);
        tcase_add_unchecked_fixture(tc, tally_setup, tally_teardown);
        if (n_scripts > 0)
                tcase_add_loop_test(tc, test_e2e_script, 0, n_scripts);
        suite_add_tcase(s, tc);
        return s;
}
