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
#include "util.h"

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

char *tu_path(const char *dir, const char *name)
{
        char *p;

        ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
        return p;
}

char *tu_file_in(const char *dir, const char *name, const void *buf, size_t len, mode_t mode)
{
        char *p = tu_path(dir, name);

        tu_write_file(p, buf, len);
        ck_assert_int_eq(chmod(p, mode), 0);
        return p;
}

void tu_assert_same_file(const char *a_dir, const char *b_dir, const char *rel,
                         const char *what)
{
        char *a = tu_path(a_dir, rel), *b = tu_path(b_dir, rel), *ab, *bb;
        size_t al = 0, bl = 0;

        ab = tu_read_file(a, &al);
        bb = tu_read_file(b, &bl);
        ck_assert_msg(ab && bb, "%s missing on one side", rel);
        ck_assert_msg(al == bl && memcmp(ab, bb, al) == 0,
                      "%s differs from a fresh run of %s", rel, what);
        free(ab);
        free(bb);
        free(a);
        free(b);
}

size_t tu_read_vectors(const char *dir, struct tu_vec **ret)
{
        char *p = tu_path(dir, "expected.tsv"), *buf, *line, *save = NULL;
        struct tu_vec *vs = NULL;
        size_t n = 0;

        buf = tu_read_file(p, NULL);
        ck_assert_msg(buf != NULL, "no %s", p);
        for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                vs = realloc(vs, (n + 1) * sizeof(*vs));
                ck_assert_ptr_nonnull(vs);
                ck_assert_msg(sscanf(line, "%255[^\t]\t%63[^\t]\t%63s", vs[n].file,
                                     vs[n].reason, vs[n].now) == 3, "bad line '%s'", line);
                n++;
        }
        free(buf);
        free(p);
        *ret = vs;
        return n;
}

void tu_check_vectors(int dfd, const struct tu_vec *vs, size_t n, hd_key_lookup_fn lookup,
                      void *userdata, bool *seen)
{
        for (size_t i = 0; i < n; i++) {
                int want = hd_reason_from_name(vs[i].reason);
                json_t *doc = NULL;
                hd_verdict v;
                int64_t now;
                int r;

                ck_assert_msg(want >= 0, "%s: unknown reason %s", vs[i].file, vs[i].reason);
                ck_assert_int_eq(hd_time_parse(vs[i].now, &now), 0);
                verdict_clear(&v);
                r = hd_load_at(dfd, vs[i].file, NULL, &doc, &v);
                if (r == 0) {
                        r = hd_verify(doc, lookup, userdata, NULL, NULL, now, &v);
                        json_decref(doc);
                }
                ck_assert_msg(r == 0 || r == -EBADMSG, "%s: %d", vs[i].file, r);
                ck_assert_msg((int)v.reason == want, "%s: got %s (%s), want %s", vs[i].file,
                              hd_reason_name(v.reason), v.detail, vs[i].reason);
                ck_assert_int_eq(r == 0, want == HD_OK);
                ck_assert_int_eq(strncmp(vs[i].file, "valid/", 6) == 0, want == HD_OK);
                seen[want] = true;
        }
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

char *tu_file_text(const char *dir, const char *name, const char *text, mode_t mode)
{
        return tu_file_in(dir, name, text, strlen(text), mode);
}

json_t *tu_sig_doc(const char *from)
{
        json_t *d = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:[{s:s, s:s}]}",
                              "protocol_version", 1,
                              "handoff_id", "s-0001",
                              "from_agent", from,
                              "to_agent", "zoe",
                              "reason", "transfer",
                              "initiated_at", "2026-04-21T10:15:00Z",
                              "expires_at", "2026-04-21T10:20:00Z",
                              "transcript", "role", "user", "text", "hello");
        ck_assert_ptr_nonnull(d);
        return d;
}

hd_key *tu_sig_gen(const char *kid)
{
        hd_key *k = NULL;

        ck_assert_int_eq(hd_key_generate(kid, &k), 0);
        ck_assert_int_eq(hd_key_kind_of(k), HD_KEY_ED25519_SECRET);
        return k;
}

hd_key *tu_sig_public_of(const hd_key *sk)
{
        char line[HD_KEY_LINE_MAX], err[200];
        hd_key *pk = NULL;

        ck_assert_int_eq(hd_key_format(sk, false, line, sizeof(line)), 0);
        ck_assert_msg(hd_key_parse(line, strlen(line), &pk, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(hd_key_kind_of(pk), HD_KEY_ED25519_PUBLIC);
        return pk;
}

const hd_key *tu_ring_lookup(void *ud, const char *kid, const char *from)
{
        const struct tu_ring *r = ud;

        if (kid) {
                for (size_t i = 0; i < r->n; i++) {
                        const char *k = hd_key_kid(r->keys[i]);
                        if (k && !strcmp(k, kid))
                                return r->keys[i];
                }
                if (!strcmp(kid, "ops"))
                        return r->def;
                return NULL;
        }
        if (from && r->own_agent && !strcmp(from, r->own_agent))
                return r->own;
        return r->def;
}

static const char hmac_test_key[] = "test key for test_verify.c, not a secret";

hd_key *tu_hmac_key(void)
{
        hd_key *k = NULL;

        ck_assert_int_eq(hd_key_from_bytes(hmac_test_key, strlen(hmac_test_key), &k), 0);
        return k;
}

json_t *tu_hmac_doc(void)
{
        json_t *d = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:[{s:s, s:s}, {s:s, s:s}]}",
                              "protocol_version", 1,
                              "handoff_id", "t-0001",
                              "caller_hash", "602cd7fbbe41688e",
                              "from_agent", "alice",
                              "to_agent", "bob",
                              "reason", "transfer",
                              "initiated_at", "2026-04-21T10:15:00Z",
                              "expires_at", "2026-04-21T10:20:00Z",
                              "transcript",
                              "role", "user", "text", "hello",
                              "role", "assistant", "text", "let me transfer you");
        ck_assert_ptr_nonnull(d);
        return d;
}

const hd_key *tu_lookup_log_cb(void *userdata, const char *kid, const char *from)
{
        struct tu_lookup_log *l = userdata;

        l->calls++;
        /* After a key named by kid, hd_auth_check asks again without kid
         * for the sender's own key: not logged over the first call. */
        if (!kid && from && l->asked_kid) {
                l->asked_kid = false;
                return l->key;
        }
        l->kid_null = kid == NULL;
        l->from_null = from == NULL;
        snprintf(l->kid, sizeof(l->kid), "%s", kid ? kid : "");
        snprintf(l->from, sizeof(l->from), "%s", from ? from : "");
        if (kid && l->only_kid && strcmp(kid, l->only_kid) != 0)
                return NULL;
        l->asked_kid = kid != NULL;
        return l->key;
}

char *tu_pl_path(const char *rel)
{
        char *p;

        ck_assert_int_ge(asprintf(&p, "%s/tests/payloads/%s", tu_src_dir(), rel), 0);
        return p;
}

char *tu_pl_read(const char *rel)
{
        char *p = tu_pl_path(rel), *s = tu_read_file(p, NULL);

        ck_assert_msg(s != NULL, "cannot read %s", p);
        free(p);
        return s;
}

json_t *tu_pl_json(const char *rel)
{
        char *s = tu_pl_read(rel);
        json_error_t e;
        json_t *j = json_loads(s, JSON_REJECT_DUPLICATES, &e);

        ck_assert_msg(j != NULL, "%s: %s", rel, e.text);
        free(s);
        return j;
}

int tu_pl_load(const char *type, const char *rel, json_t **ret, hd_verdict *v)
{
        char *p = tu_pl_path(rel);
        json_t *j = NULL;
        int r = hd_payload_load(type, p, &j, v);

        free(p);
        if (ret)
                *ret = j;
        else
                json_decref(j);
        return r;
}

json_t *tu_pl_envelope(const char *type, json_t *payload)
{
        json_t *d = json_pack("{s:s,s:s,s:s,s:O}", "from_agent", "bob",
                              "to_agent", "alice", "payload_type", type,
                              "payload", payload);
        ck_assert_ptr_nonnull(d);
        return d;
}

void tu_pl_expect_ok(const char *type, json_t *payload)
{
        json_t *d = tu_pl_envelope(type, payload);
        hd_verdict v;
        int r = hd_payload_validate(d, NULL, &v);

        ck_assert_msg(r == 0, "%s rejected: %s", type, v.detail);
        json_decref(d);
}

void tu_pl_expect_reject_doc(json_t *d, const hd_payload_opts *o, const char *detail_part)
{
        hd_verdict v;
        int r = hd_payload_validate(d, o, &v);

        ck_assert_int_eq(r, -EBADMSG);
        ck_assert_str_eq(hd_reason_name(v.reason), "payload_invalid");
        ck_assert_msg(strstr(v.detail, detail_part) != NULL,
                      "detail '%s' does not name '%s'", v.detail, detail_part);
}

void tu_pl_expect_reject(const char *type, json_t *payload, const char *detail_part)
{
        json_t *d = tu_pl_envelope(type, payload);

        tu_pl_expect_reject_doc(d, NULL, detail_part);
        json_decref(d);
}
