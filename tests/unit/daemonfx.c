/* See daemonfx.h. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "daemonfx.h"
#include "intake.h"
#include "lifecycle.h"
#include "log.h"
#include "testutil.h"

#define HEXKEY "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define OTHERKEY "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

void fx_open(struct fx *f)
{
        char *conf, *key, *pub, *text, *err = NULL;
        char line[HD_KEY_LINE_MAX];

        memset(f, 0, sizeof(*f));
        /* the decisions are asserted, not read: stderr keeps errors only */
        log_set_max_priority(LOG_ERR);
        f->root = tu_tmpdir();
        ck_assert_int_ge(asprintf(&key, "%s/key", f->root), 0);
        tu_write_file(key, HEXKEY "\n", strlen(HEXKEY) + 1);
        ck_assert_int_eq(hd_key_generate("carol-1", &f->carol), 0);
        ck_assert_int_eq(hd_key_format(f->carol, false, line, sizeof(line)), 0);
        ck_assert_int_ge(asprintf(&pub, "%s/carol.pub", f->root), 0);
        tu_write_file(pub, line, strlen(line));
        ck_assert_int_ge(asprintf(&text,
                                  "[spool]\ndir = %s/spool\nfsync = no\n"
                                  "[keys]\ndefault = %s\n"
                                  "[control]\nsocket = %s/c.sock\n"
                                  "[agent alice]\nstate_dir = %s/alice\n"
                                  "[agent carol]\nstate_dir = %s/carol\nrequire = sig\n"
                                  "pubkeys = %s\n",
                                  f->root, key, f->root, f->root, f->root, pub), 0);
        ck_assert_int_ge(asprintf(&conf, "%s/h.conf", f->root), 0);
        tu_write_file(conf, text, strlen(text));
        ck_assert_int_eq(config_load(conf, true, &f->cfg, &err), 0);
        ck_assert_ptr_null(err);
        ck_assert_int_eq(daemon_parts_open(f->cfg, &f->p), 0);
        f->sp = f->p.sp;
        f->alice = spool_agent(f->sp, "alice");
        ck_assert_ptr_nonnull(f->alice);
        ck_assert_int_eq(hd_key_from_bytes(HEXKEY, strlen(HEXKEY), &f->k), 0);
        ck_assert_int_eq(hd_key_from_bytes(OTHERKEY, strlen(OTHERKEY), &f->other), 0);
        free(text);
        free(conf);
        free(key);
        free(pub);
}

void fx_close(struct fx *f)
{
        daemon_parts_close(&f->p);
        config_free(f->cfg);
        hd_key_free(f->k);
        hd_key_free(f->other);
        hd_key_free(f->carol);
        free(f->root);
}

json_t *fx_doc(const char *id, const char *to, int64_t age_s, int64_t ttl_s, const hd_key *k)
{
        char at[HD_TIME_MAX], ex[HD_TIME_MAX];
        int64_t now = hd_now_usec();
        json_t *h;

        hd_time_format(now - age_s * 1000000LL, at, sizeof(at));
        hd_time_format(now + ttl_s * 1000000LL, ex, sizeof(ex));
        h = json_pack("{s:i,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:[]}", "protocol_version", 1,
                      "handoff_id", id, "caller_hash", "0123456789abcdef", "from_agent", "bob",
                      "to_agent", to, "reason", "review", "initiated_at", at, "expires_at", ex,
                      "transcript");
        ck_assert_ptr_nonnull(h);
        if (k)
                ck_assert_int_eq(hd_sign(h, k), 0);
        return h;
}

void fx_put_doc(int dirfd, const char *name, json_t *doc)
{
        char *s = json_dumps(doc, JSON_COMPACT);

        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(hd_write_atomic(dirfd, name, s, strlen(s), 0640, false), 0);
        free(s);
        json_decref(doc);
}

void fx_put(int dirfd, const char *prefix, const char *name, const char *suffix,
            const char *text)
{
        char n[400];

        snprintf(n, sizeof(n), "%s%s%s", prefix, name, suffix);
        ck_assert_int_eq(hd_write_atomic(dirfd, n, text, strlen(text), 0640, false), 0);
}

bool fx_there(int dirfd, const char *prefix, const char *name, const char *suffix)
{
        char n[400];

        snprintf(n, sizeof(n), "%s%s%s", prefix, name, suffix);
        return faccessat(dirfd, n, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Decide one name (one batch of one: a batch always decides its first). */
int fx_decide(struct fx *f, const char *name)
{
        char *names[1] = { (char *)name };
        int out = -1;

        ck_assert_int_eq(intake_batch(&f->p, names, 1, hd_now_usec(), &out), 0);
        return out;
}

/* The reason rejected/<name>.reason gives, or "" (static). */
const char *fx_reason_of(struct fx *f, const char *name)
{
        static char r[64];
        char side[400];
        json_t *o = NULL;
        hd_verdict v;

        r[0] = '\0';
        snprintf(side, sizeof(side), "%s.reason", name);
        if (hd_load_at(f->sp->fd[SD_REJECTED], side, NULL, &o, &v) == 0)
                snprintf(r, sizeof(r), "%s", json_string_value(json_object_get(o, "reason")) ?: "");
        json_decref(o);
        return r;
}

/* name decided as rejected: in rejected/ as as (its name made printable). */
void fx_assert_rejected_as(struct fx *f, const char *name, const char *as, int out,
                           const char *reason)
{
        ck_assert_int_eq(out, IO_REJECTED);
        ck_assert_msg(!fx_there(f->sp->fd[SD_HANDOFF], "", name, ""), "%s still in handoff/", name);
        ck_assert_msg(fx_there(f->sp->fd[SD_REJECTED], "", as, ""), "%s not in rejected/", as);
        ck_assert_str_eq(fx_reason_of(f, as), reason);
}

void fx_assert_rejected(struct fx *f, const char *name, int out, const char *reason)
{
        fx_assert_rejected_as(f, name, name, out, reason);
}

/* Make dirfd/name look written `age_s` seconds ago. */
void fx_age(int dirfd, const char *name, int64_t age_s)
{
        struct timespec ts[2];

        clock_gettime(CLOCK_REALTIME, &ts[0]);
        ts[0].tv_sec -= age_s;
        ts[1] = ts[0];
        ck_assert_int_eq(utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW), 0);
}

/* A handoff from `from` to `to`, fresh, not signed. */
json_t *fx_doc_from(const char *id, const char *from, const char *to)
{
        json_t *d = fx_doc(id, to, 10, 600, NULL);

        json_object_set_new(d, "from_agent", json_string(from));
        return d;
}

void fx_put_too_large(struct fx *f)
{
        size_t n = HD_DEFAULT_MAX_SIZE + 2;
        char *junk = malloc(n);

        memset(junk, '{', n - 1);
        junk[n - 1] = '\0';
        fx_put(f->sp->fd[SD_HANDOFF], "", "x.json", "", junk);
        free(junk);
}
