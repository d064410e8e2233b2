/* See daemonfx.h. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemonfx.h"
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
        ck_assert_int_eq(spool_open(f->cfg, &f->sp), 0);
        f->sp->check_item = lifecycle_check;
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
        spool_close(f->sp);
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
