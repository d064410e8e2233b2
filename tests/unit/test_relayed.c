/* What the relay's inbound parsed of the messages it wrote
 * (src/handoffd/relayed.c): the intake takes that parse only for the
 * very bytes it was made of, and checks every file itself; the table
 * stays within its bounds. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "daemonfx.h"
#include "files.h"
#include "intake.h"
#include "relayed.h"
#include "store.h"
#include "testutil.h"

/* The bytes of handoff/name, and relayed_put() of them with their parse
 * (doc: that parse, or the caller's in its place; taken). */
static void put_relayed(struct fx *f, const char *name, json_t *doc)
{
        hd_limits lim = { .max_size = f->cfg->max_file_size, .max_depth = HD_DEFAULT_MAX_DEPTH };
        struct canon_src src;
        json_t *parsed = NULL;
        hd_verdict v;
        char *buf = NULL;
        size_t len;
        int fd = openat(f->sp->fd[SD_HANDOFF], name, O_RDONLY | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(read_all(fd, 1 << 20, 0, &buf, &len), 0);
        close(fd);
        ck_assert_int_eq(canon_src_parse(buf, len, &lim, &parsed, &src, &v), 0);
        if (doc) {
                json_decref(parsed);
                parsed = doc;
        }
        relayed_put(&f->p.relayed, name, buf, len, parsed, &src);
        free(buf);
}

/* handoff/name, a signed handoff id for alice, as the inbound writes it:
 * the file and its table entry. */
static void drop_relayed(struct fx *f, const char *name, const char *id)
{
        fx_put_doc(f->sp->fd[SD_HANDOFF], name, fx_doc(id, "alice", 10, 600, f->k));
        put_relayed(f, name, NULL);
}

/* The same bytes: the intake takes the inbound's document and does not
 * parse the file.  Shown with a document that differs from the bytes
 * (for an agent not served here), which only a taken parse can give:
 * the file is left, not claimed; the entry is gone after. */
START_TEST(test_relayed_parse_is_taken_for_the_same_bytes)
{
        struct fx f;

        fx_open(&f);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "r1.json", fx_doc("rel-1", "alice", 10, 600, f.k));
        put_relayed(&f, "r1.json", fx_doc("rel-1", "nobody", 10, 600, f.k));
        ck_assert_uint_eq(dict_count(&f.p.relayed.items), 1);
        ck_assert_int_eq(fx_decide(&f, "r1.json"), IO_LEFT);
        ck_assert_uint_eq(dict_count(&f.p.relayed.items), 0);
        ck_assert_uint_eq(f.p.relayed.bytes, 0);
        /* its parse taken once: the next look parses the file (alice's) */
        foreign_clear(&f.p.foreign);
        ck_assert_int_eq(fx_decide(&f, "r1.json"), IO_CLAIMED);

        /* and with the document its bytes give, it is claimed as any file */
        drop_relayed(&f, "r2.json", "rel-2");
        ck_assert_int_eq(fx_decide(&f, "r2.json"), IO_CLAIMED);
        ck_assert(fx_there(f.sp->fd[SD_CLAIMED], "", "rel-2", ".json"));
        ck_assert_uint_eq(dict_count(&f.p.relayed.items), 0);
        fx_close(&f);
}
END_TEST

/* Other bytes under the name (a file swapped in, or written over, after
 * the inbound wrote it): parsed and verified as they are.  A change to a
 * signed field fails the MAC, whatever the inbound parsed; the entry is
 * dropped. */
START_TEST(test_relayed_other_bytes_are_parsed_and_verified)
{
        struct fx f;

        fx_open(&f);
        drop_relayed(&f, "s1.json", "swap-1");
        json_t *d = fx_doc("swap-1", "alice", 10, 600, f.k);
        json_object_set_new(d, "task", json_string("something else"));
        ck_assert_int_eq(unlinkat(f.sp->fd[SD_HANDOFF], "s1.json", 0), 0);
        fx_put_doc(f.sp->fd[SD_HANDOFF], "s1.json", d);
        fx_assert_rejected(&f, "s1.json", fx_decide(&f, "s1.json"), "bad_mac");
        ck_assert_uint_eq(dict_count(&f.p.relayed.items), 0);

        /* the same length, one byte other: parsed too */
        drop_relayed(&f, "s2.json", "swap-2");
        struct relayed_entry *e = dict_get(&f.p.relayed.items, "s2.json");
        ck_assert_ptr_nonnull(e);
        char *x = strstr(e->buf, "swap-2");
        ck_assert_ptr_nonnull(x);
        x[5] = '3';                     /* the entry says swap-3: the file does not */
        ck_assert_int_eq(fx_decide(&f, "s2.json"), IO_CLAIMED);
        ck_assert(fx_there(f.sp->fd[SD_CLAIMED], "", "swap-2", ".json"));
        ck_assert(!fx_there(f.sp->fd[SD_CLAIMED], "", "swap-3", ".json"));
        fx_close(&f);
}
END_TEST

/* A reload forgets every entry ([spool] max_file_size may be another). */
START_TEST(test_relayed_reload_forgets)
{
        struct fx f;

        fx_open(&f);
        drop_relayed(&f, "c1.json", "clr-1");
        ck_assert_int_eq(daemon_parts_set_config(&f.p, f.cfg), 0);
        ck_assert_uint_eq(dict_count(&f.p.relayed.items), 0);
        ck_assert_uint_eq(f.p.relayed.bytes, 0);
        fx_close(&f);
}
END_TEST

static void put_bytes(struct relayed *m, const char *name, size_t len)
{
        char *buf = malloc(len ? len : 1);
        struct canon_src src = { 0 };

        ck_assert_ptr_nonnull(buf);
        memset(buf, 'x', len);
        relayed_put(m, name, buf, len, json_object(), &src);
        free(buf);
}

/* At most RELAYED_MAX entries and RELAYED_MAX_BYTES, the oldest going
 * first; one message over the bytes is not kept; a name put again is
 * one entry. */
START_TEST(test_relayed_bounds)
{
        struct relayed m;
        char name[32];
        json_t *doc = NULL;
        struct canon_src src;

        relayed_init(&m);
        for (int i = 0; i < RELAYED_MAX + 10; i++) {
                snprintf(name, sizeof(name), "n%d.json", i);
                put_bytes(&m, name, 100);
        }
        ck_assert_uint_eq(dict_count(&m.items), RELAYED_MAX);
        ck_assert_uint_eq(m.bytes, (size_t)RELAYED_MAX * 100);
        ck_assert_ptr_null(dict_get(&m.items, "n9.json"));
        ck_assert_ptr_nonnull(dict_get(&m.items, "n10.json"));

        put_bytes(&m, "n10.json", 50);
        ck_assert_uint_eq(dict_count(&m.items), RELAYED_MAX);
        ck_assert_uint_eq(m.bytes, (size_t)RELAYED_MAX * 100 - 50);

        put_bytes(&m, "huge.json", RELAYED_MAX_BYTES + 1);
        ck_assert_ptr_null(dict_get(&m.items, "huge.json"));
        ck_assert_uint_eq(dict_count(&m.items), RELAYED_MAX);

        put_bytes(&m, "big.json", RELAYED_MAX_BYTES - 1000);
        ck_assert_ptr_nonnull(dict_get(&m.items, "big.json"));
        ck_assert(m.bytes <= RELAYED_MAX_BYTES);
        ck_assert_uint_lt(dict_count(&m.items), RELAYED_MAX);

        /* taken only for its own bytes */
        char *b = malloc(RELAYED_MAX_BYTES - 1000);
        ck_assert_ptr_nonnull(b);
        memset(b, 'x', RELAYED_MAX_BYTES - 1000);
        ck_assert(!relayed_take(&m, "big.json", b, RELAYED_MAX_BYTES - 1001, &doc, &src));
        ck_assert_ptr_null(dict_get(&m.items, "big.json"));
        ck_assert_ptr_null(doc);
        put_bytes(&m, "big.json", RELAYED_MAX_BYTES - 1000);
        ck_assert(relayed_take(&m, "big.json", b, RELAYED_MAX_BYTES - 1000, &doc, &src));
        ck_assert_ptr_nonnull(doc);
        ck_assert_ptr_eq(src.buf, b);
        json_decref(doc);
        free(b);

        relayed_clear(&m);
        ck_assert_uint_eq(dict_count(&m.items), 0);
        ck_assert_uint_eq(m.bytes, 0);
}
END_TEST

Suite *suite_relayed(void);
Suite *suite_relayed(void)
{
        Suite *s = suite_create("relayed");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_relayed_parse_is_taken_for_the_same_bytes);
        tcase_add_test(tc, test_relayed_other_bytes_are_parsed_and_verified);
        tcase_add_test(tc, test_relayed_reload_forgets);
        tcase_add_test(tc, test_relayed_bounds);
        suite_add_tcase(s, tc);
        return s;
}
