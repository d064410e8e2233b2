/* End-to-end suites: every tests/e2e/test_*.py, run with python3 against the
 * real binaries of this build.
 *
 * The scripts are independent (each makes its own temp dirs, sockets and
 * ports), so the tcase's set-up runs them as a pool of HD_E2E_JOBS processes
 * (default: 2 per CPU; they wait on fsync and on their daemons more than
 * they compute), longest first as the last run timed them.  A script whose
 * head has a line "# e2e: alone" (it measures time or load, or cuts power)
 * runs after the pool, with nothing beside it.  Each script then is one
 * Check test that reports its result: a failure prints the script's whole
 * output once.
 *
 * Exit 77 is a skip, with a line "skipped: needs TOOL: why" (hdtest.skip);
 * "skipped part: needs TOOL: why" is a part of a script skipped.  A skip
 * for want of a TOOL that the dependency list ($HD_DEPS, mk/build-deps)
 * names is a failure: `make check` installs that list first. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "e2e_tally.h"
#include "testutil.h"

#define EXIT_SKIP 77

enum outcome { NOT_RUN, PASSED, FAILED, SKIPPED };

struct script {
        char *name;
        int alone;              /* runs with no other script beside it */
        double guess;           /* seconds it took last time, for the order */
        pid_t pid;              /* while running; its process group too */
        double t0, secs;
        int status;             /* exit code, or 128+signal */
        int timed_out;
        enum outcome outcome;
        char why[512];          /* a failure's or a skip's one line */
};

static struct script *scripts;
static int n_scripts;
static double pool_secs;
static int pool_jobs;

static double now(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_name(const void *a, const void *b)
{
        return strcmp(((const struct script *)a)->name, ((const struct script *)b)->name);
}

/* "# e2e: alone" among the first lines of the script. */
static int marked_alone(const char *dir, const char *name)
{
        char path[4096 + 260], head[4096];
        size_t n;
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "re");
        if (!f)
                return 0;
        n = fread(head, 1, sizeof(head) - 1, f);
        fclose(f);
        head[n] = '\0';
        return strstr(head, "\n# e2e: alone") != NULL;
}

static void discover(void)
{
        char dir[4096];
        DIR *d;
        struct dirent *de;
        int cap = 0;

        snprintf(dir, sizeof(dir), "%s/tests/e2e", tu_src_dir());
        d = opendir(dir);
        if (!d)
                return;
        while ((de = readdir(d))) {
                size_t l = strlen(de->d_name);
                if (strncmp(de->d_name, "test_", 5) != 0 || l < 4 ||
                    strcmp(de->d_name + l - 3, ".py") != 0)
                        continue;
                if (n_scripts == cap) {
                        cap = cap ? cap * 2 : 128;
                        scripts = realloc(scripts, (size_t)cap * sizeof(*scripts));
                        if (!scripts)
                                abort();
                }
                scripts[n_scripts] = (struct script){ .name = strdup(de->d_name) };
                if (!scripts[n_scripts].name)
                        abort();
                scripts[n_scripts].alone = marked_alone(dir, de->d_name);
                n_scripts++;
        }
        closedir(d);
        qsort(scripts, (size_t)n_scripts, sizeof(*scripts), cmp_name);
}

/* $HD_E2E: the scripts whose name contains one of its words (all without). */
static int selected(const struct script *s)
{
        const char *only = getenv("HD_E2E");
        char word[256];
        int n;

        if (!only)
                return 1;
        while (sscanf(only, " %255[^ ,]%n", word, &n) == 1) {
                if (strstr(s->name, word))
                        return 1;
                only += n;
                only += strspn(only, " ,");
        }
        return 0;
}

/* $HD_E2E_LOGS, or the build's tests/logs/: each script's whole output. */
static const char *logs_dir(void)
{
        static char dir[4096];
        const char *s = getenv("HD_E2E_LOGS");

        if (s && *s)
                return s;
        snprintf(dir, sizeof(dir), "%s/tests/logs", tu_build_dir());
        return dir;
}

static void log_path(char *buf, size_t len, const char *name)
{
        snprintf(buf, len, "%.3800s/%.250s.log", logs_dir(), name);
}

/* Each script's seconds of the last run: the slow ones start first, so
 * that the pool does not end waiting on one long script. */
static void times_path(char *buf, size_t len)
{
        snprintf(buf, len, "%.3800s/e2e-times", logs_dir());
}

static void times_read(void)
{
        char path[4096], name[256];
        double secs;
        FILE *f;

        times_path(path, sizeof(path));
        f = fopen(path, "re");
        for (int i = 0; i < n_scripts; i++)
                scripts[i].guess = 30;  /* new: not among the shortest */
        if (!f)
                return;
        while (fscanf(f, "%lf %255s", &secs, name) == 2)
                for (int i = 0; i < n_scripts; i++)
                        if (!strcmp(scripts[i].name, name))
                                scripts[i].guess = secs;
        fclose(f);
}

static void times_write(void)
{
        char path[4096];
        FILE *f;

        if (getenv("HD_E2E"))
                return;         /* a part of the run: keep the whole one's */
        times_path(path, sizeof(path));
        f = fopen(path, "we");
        if (!f)
                return;
        for (int i = 0; i < n_scripts; i++)
                if (scripts[i].outcome != NOT_RUN)
                        fprintf(f, "%.1f %s\n", scripts[i].secs, scripts[i].name);
        fclose(f);
}

static int env_int(const char *name, int dflt)
{
        const char *s = getenv(name);
        char *end;
        long v;

        if (!s || !*s)
                return dflt;
        v = strtol(s, &end, 10);
        return *end || v < 1 || v > 1000 ? dflt : (int)v;
}

static void start(struct script *s)
{
        char path[4096], logp[4096];

        snprintf(path, sizeof(path), "%s/tests/e2e/%s", tu_src_dir(), s->name);
        log_path(logp, sizeof(logp), s->name);
        s->t0 = now();
        s->pid = fork();
        if (s->pid < 0) {
                s->pid = 0;
                s->status = 127;
                snprintf(s->why, sizeof(s->why), "fork: %s", strerror(errno));
                return;
        }
        if (s->pid == 0) {
                char *argv[] = { "python3", "-B", path, NULL };
                int nul = open("/dev/null", O_RDONLY);
                int out = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0644);

                /* its own process group: a timeout ends the script and
                 * whatever it started, and nothing else */
                setpgid(0, 0);
                if (nul < 0 || out < 0)
                        _exit(127);
                dup2(nul, 0);
                dup2(out, 1);
                dup2(out, 2);
                execvp(argv[0], argv);
                _exit(127);
        }
        setpgid(s->pid, s->pid);
}

/* The names of the dependency list (first word of each line, # comments
 * out), one string " a b c ", or NULL without $HD_DEPS. */
static char *deps_read(void)
{
        const char *p = getenv("HD_DEPS");
        char line[1024], *all = NULL, word[256];
        size_t len = 0;
        FILE *f;

        if (!p || !*p || !(f = fopen(p, "re")))
                return NULL;
        all = strdup(" ");
        while (all && fgets(line, sizeof(line), f)) {
                line[strcspn(line, "#\n")] = '\0';
                if (sscanf(line, "%255s", word) != 1)
                        continue;
                len = strlen(all);
                all = realloc(all, len + strlen(word) + 2);
                if (all)
                        sprintf(all + len, "%s ", word);
        }
        fclose(f);
        return all;
}

/* The skip lines of the output: the first tool the dependency list names
 * into listed (a failure), the first line into s->why. */
static void skips_scan(struct script *s, const char *out, const char *deps, char *listed,
                       size_t llen)
{
        for (const char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                const char *t;
                char tool[128], key[132];

                if (!strncmp(p, "skipped: needs ", 15))
                        t = p + 15;
                else if (!strncmp(p, "skipped part: needs ", 20))
                        t = p + 20;
                else
                        continue;
                if (!s->why[0])
                        snprintf(s->why, sizeof(s->why), "%.*s", (int)strcspn(p, "\n"), p);
                if (sscanf(t, "%127[^: \n]", tool) != 1)
                        continue;
                snprintf(key, sizeof(key), " %s ", tool);
                if (deps && strstr(deps, key) && !listed[0])
                        snprintf(listed, llen, "%s", tool);
        }
}

static void judge(struct script *s, int st, const char *deps)
{
        char logp[4096], listed[128] = "";
        char *out;

        s->secs = now() - s->t0;
        s->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        log_path(logp, sizeof(logp), s->name);
        out = tu_read_file(logp, NULL);
        skips_scan(s, out, deps, listed, sizeof(listed));
        free(out);
        if (s->timed_out) {
                s->outcome = FAILED;
                snprintf(s->why, sizeof(s->why), "timed out after %.0fs", s->secs);
        } else if (s->status == EXIT_SKIP && !s->why[0]) {
                s->outcome = FAILED;
                snprintf(s->why, sizeof(s->why),
                         "exit 77 (skip) without a line \"skipped: needs TOOL: why\"");
        } else if ((s->status == 0 || s->status == EXIT_SKIP) && listed[0]) {
                s->outcome = FAILED;
                snprintf(s->why, sizeof(s->why),
                         "skipped for want of %s, which $HD_DEPS (mk/build-deps) installs", listed);
        } else if (s->status == EXIT_SKIP) {
                s->outcome = SKIPPED;
        } else if (s->status == 0) {
                s->outcome = PASSED;
        } else {
                s->outcome = FAILED;
                snprintf(s->why, sizeof(s->why), "exit %d", s->status);
        }
}

/* Runs the scripts of idx[0..n) with at most jobs at a time; each ends
 * within timeout seconds (SIGTERM, then SIGKILL 10s later). */
static void pool_run(int *idx, int n, int jobs, int timeout, const char *deps)
{
        static const char *mark[] = { "", "PASS", "FAIL", "SKIP" };
        int next = 0, running = 0, done = 0, total = 0;

        for (int i = 0; i < n_scripts; i++)
                total += selected(&scripts[i]);
        for (int i = 0; i < n_scripts; i++)
                done += scripts[i].outcome != NOT_RUN;
        while (next < n || running > 0) {
                int reaped = 0;

                while (running < jobs && next < n) {
                        start(&scripts[idx[next++]]);
                        running += scripts[idx[next - 1]].pid > 0;
                }
                for (int k = 0; k < next; k++) {
                        struct script *s = &scripts[idx[k]];
                        int st;

                        if (s->pid <= 0)
                                continue;
                        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
                                kill(-s->pid, SIGKILL); /* what it left running */
                                s->pid = 0;
                                running--;
                                reaped++;
                                judge(s, st, deps);
                                fprintf(stderr, "e2e: %s %6.1fs %s%s%s [%d/%d]\n",
                                        mark[s->outcome], s->secs, s->name,
                                        s->why[0] ? ": " : "", s->why, ++done, total);
                                continue;
                        }
                        double age = now() - s->t0;
                        if (!s->timed_out && age > timeout) {
                                s->timed_out = 1;
                                kill(-s->pid, SIGTERM);
                        } else if (s->timed_out && age > timeout + 10) {
                                kill(-s->pid, SIGKILL);
                        }
                }
                if (!reaped)
                        usleep(50 * 1000);
        }
}

static int cmp_guess(const void *a, const void *b)
{
        double x = scripts[*(const int *)a].guess, y = scripts[*(const int *)b].guess;

        return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

static void e2e_setup(void)
{
        char logp[4096];
        int *idx = calloc((size_t)n_scripts + 1, sizeof(int)), n = 0, a = 0;
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        int timeout = env_int("HD_E2E_TIMEOUT", 900);
        char *deps = deps_read();
        double t0 = now();

        if (!idx)
                abort();
        pool_jobs = env_int("HD_E2E_JOBS", cpus > 0 ? 2 * (int)cpus : 2);
        snprintf(logp, sizeof(logp), "%s/tests", tu_build_dir());
        mkdir(logp, 0755);
        mkdir(logs_dir(), 0755);
        times_read();
        /* the pool first, longest first; then the ones that run alone */
        for (int i = 0; i < n_scripts; i++)
                if (selected(&scripts[i]) && !scripts[i].alone)
                        idx[n++] = i;
        qsort(idx, (size_t)n, sizeof(int), cmp_guess);
        fprintf(stderr, "e2e: %d scripts, %d at a time (HD_E2E_JOBS), then the ones marked alone\n",
                n, pool_jobs);
        pool_run(idx, n, pool_jobs, timeout, deps);
        for (int i = 0; i < n_scripts; i++)
                if (selected(&scripts[i]) && scripts[i].alone)
                        idx[a++] = i;
        pool_run(idx, a, 1, timeout, deps);
        pool_secs = now() - t0;
        times_write();
        free(deps);
        free(idx);
}

static int cmp_secs(const void *a, const void *b)
{
        double x = scripts[*(const int *)a].secs, y = scripts[*(const int *)b].secs;

        return x < y ? 1 : x > y ? -1 : 0;
}

/* The tally, in the runner's process after the last script's test. */
static void e2e_teardown(void)
{
        int count[4] = { 0 }, *idx = calloc((size_t)n_scripts + 1, sizeof(int)), n = 0;

        if (!idx)
                abort();
        for (int i = 0; i < n_scripts; i++) {
                count[scripts[i].outcome]++;
                if (scripts[i].outcome != NOT_RUN)
                        idx[n++] = i;
        }
        qsort(idx, (size_t)n, sizeof(int), cmp_secs);
        fprintf(stderr, "e2e: %.0fs with %d jobs; the slowest:", pool_secs, pool_jobs);
        for (int k = 0; k < n && k < 8; k++)
                fprintf(stderr, "%s %s %.0fs", k ? "," : "", scripts[idx[k]].name,
                        scripts[idx[k]].secs);
        fputc('\n', stderr);
        for (int i = 0; i < n_scripts; i++)
                if (scripts[i].outcome == FAILED || scripts[i].outcome == SKIPPED)
                        fprintf(stderr, "e2e: %s %s: %s\n",
                                scripts[i].outcome == FAILED ? "failed" : "skipped",
                                scripts[i].name, scripts[i].why);
        fprintf(stderr, "e2e: %d passed, %d failed, %d skipped\n", count[PASSED],
                count[FAILED], count[SKIPPED]);
        /* for the runner's one last line (tests/check_main.c): this runs
         * in a child of Check's, which shares no memory with it */
        char tally[4096];
        const char *root = getenv("TMPDIR");
        if (root && snprintf(tally, sizeof(tally), "%s/" E2E_TALLY, root) < (int)sizeof(tally)) {
                FILE *f = fopen(tally, "we");
                if (f) {
                        fprintf(f, "%d %d %d\n", count[PASSED], count[FAILED], count[SKIPPED]);
                        fclose(f);
                }
        }
        free(idx);
}

/* The script's own lines at the end of its output (its summary and "ok"). */
static void print_summary(const struct script *s, const char *out)
{
        const char *end = out + strlen(out), *p = end;
        int lines = 0;

        while (p > out && lines < 3)
                if (*--p == '\n' && p + 1 < end)
                        lines++;
        if (*p == '\n')
                p++;
        fprintf(stderr, "%s (%.1fs%s):\n", s->name, s->secs,
                s->outcome == SKIPPED ? ", skipped" : "");
        for (const char *q = p; q < end;) {
                const char *nl = memchr(q, '\n', (size_t)(end - q));
                size_t n = nl ? (size_t)(nl - q) : (size_t)(end - q);
                if (n && strncmp(q, "handoffd[", 9))
                        fprintf(stderr, "    %.*s\n", (int)(n > 300 ? 300 : n), q);
                q += n + 1;
        }
}

START_TEST(test_e2e_script)
{
        const struct script *s = &scripts[_i];
        char logp[4096], *out;

        if (!selected(s))
                return;
        ck_assert_msg(s->outcome != NOT_RUN, "%s did not run", s->name);
        log_path(logp, sizeof(logp), s->name);
        out = tu_read_file(logp, NULL);
        if (s->outcome == FAILED) {
                fprintf(stderr, "---- %s: %s (%.1fs) ----\n%s---- end of %s ----\n", s->name,
                        s->why, s->secs, out ? out : "(no output)\n", s->name);
                free(out);
                ck_abort_msg("%s: %s (its output above, and in %s)", s->name, s->why, logp);
        }
        print_summary(s, out ? out : "");
        free(out);
}
END_TEST

Suite *suite_e2e(void);
Suite *suite_e2e(void)
{
        Suite *s = suite_create("e2e");
        TCase *tc = tcase_create("scripts");

        discover();
        tcase_add_unchecked_fixture(tc, e2e_setup, e2e_teardown);
        if (n_scripts > 0)
                tcase_add_loop_test(tc, test_e2e_script, 0, n_scripts);
        suite_add_tcase(s, tc);
        return s;
}
