/* Consume a bootstrap, agent side: of two consumers exactly one gets it.
 * The file is taken by renaming it to a private dot-name first (the daemon
 * and other consumers ignore dot-names), read, then deleted.  Freshness is
 * checked before taking, so a stale bootstrap is left for the sweeper.
 *
 * Proof of origin: a bootstrap carries the signed handoff it was made from
 * (member "handoff").  With keys the consumer verifies it, so a file
 * planted in the directory (or copied from another agent's) is refused,
 * and what it returns is rebuilt from the verified handoff. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff.h"
#include "files.h"
#include "layout.h"
#include "payload.h"
#include "util.h"

#define CONSUME_SKEW_USEC (30 * 1000000LL)
#define CONSUME_DEFAULT_WINDOW 300

static int64_t opts_window(const hd_consume_opts *o)
{
        return o->resume_window_s > 0 ? o->resume_window_s : CONSUME_DEFAULT_WINDOW;
}

/* The checks that need no key.  0 fresh, -ESTALE stale, -EBADMSG (v)
 * not a usable bootstrap. */
static int consume_check(const json_t *b, const char *name, const hd_consume_opts *o,
                         int64_t now, int64_t *ret_at, hd_verdict *v)
{
        const char *at = json_string_value(json_object_get(b, "accepted_at"));
        const char *src = json_string_value(json_object_get(b, "source"));
        const char *ctx = json_string_value(json_object_get(b, "resume_context"));
        const char *id = json_string_value(json_object_get(b, "handoff_id"));
        char want[NAME_MAX + 1];
        int64_t t;

        if (!src || strcmp(src, "voice_handoff") || !ctx || !*ctx)
                return verdict(v, HD_R_MISSING_FIELD, "%s: no source voice_handoff or no resume_context", name);
        /* As the real consumer: protocol_version 1 (1.0 compares equal
         * there too); another version is a format this reader does not know. */
        if (!json_is_number(json_object_get(b, "protocol_version")) ||
            json_number_value(json_object_get(b, "protocol_version")) != 1.0)
                return verdict(v, HD_R_BAD_VERSION, "%s: protocol_version is not 1", name);
        /* Missing or invalid accepted_at is a refusal, never "fresh". */
        if (!at || hd_time_parse(at, &t) < 0)
                return verdict(v, HD_R_BAD_TIMESTAMP, "%s: no valid accepted_at", name);
        /* A bootstrap is found under its handoff_id's name and no other:
         * one moved or copied to another name is not what it claims. */
        if (!id || !hd_id_valid(id))
                return verdict(v, HD_R_BAD_ID, "%s: no valid handoff_id", name);
        if (hd_bootstrap_name(id, want, sizeof(want)) < 0 || strcmp(want, name))
                return verdict(v, HD_R_BAD_ID, "%s: its handoff_id '%s' belongs under %s", name, id, want);
        if (ret_at)
                *ret_at = t;
        if (now - t > opts_window(o) * 1000000LL || t - now > CONSUME_SKEW_USEC)
                return -ESTALE;
        return 0;
}

/* The proof of origin, when o has keys: on success *ret is the bootstrap
 * rebuilt from the verified handoff. */
static int bootstrap_prove(const json_t *b, const char *name, const hd_consume_opts *o,
                           json_t **ret, hd_verdict *v)
{
        const json_t *h = json_object_get(b, "handoff");
        const char *to, *ptype;
        _cleanup_json_ json_t *shown = NULL;
        int64_t at;
        int r;

        if (!o->lookup) {
                *ret = json_incref((json_t *)b);
                return 0;
        }
        if (!json_is_object(h))
                return verdict(v, HD_R_MISSING_FIELD, "%s: carries no proof of origin (member handoff)", name);
        if (hd_time_parse(json_string_value(json_object_get(b, "accepted_at")), &at) < 0)
                return verdict(v, HD_R_BAD_TIMESTAMP, "%s: no valid accepted_at", name);
        /* Fresh when the daemon accepted it, as the daemon checked then. */
        hd_policy pol = o->policy;
        if (pol.max_window_s <= 0 && pol.max_clock_skew_s <= 0)
                pol.max_clock_skew_s = HD_DEFAULT_MAX_CLOCK_SKEW;
        r = hd_verify(h, o->lookup, o->userdata, &pol, NULL, at, v);
        if (r < 0)
                return r;
        if (!json_equal(json_object_get(h, "handoff_id"), json_object_get(b, "handoff_id")))
                return verdict(v, HD_R_BAD_ID, "%s: its handoff names another handoff_id", name);
        to = json_string_value(json_object_get(h, "to_agent"));
        if (o->agent && (!to || strcmp(to, o->agent)))
                return verdict(v, HD_R_BAD_AGENT, "%s: addressed to %s, not to %s", name,
                               to && hd_agent_valid(to) ? to : "(invalid)", o->agent);
        /* A Baton agent is shown the session's whole baton, which only the
         * daemon knows; everything else comes from the signed handoff. */
        ptype = json_string_value(json_object_get(h, "payload_type"));
        if (payload_type_session_store(ptype) && json_object_get(b, "payload")) {
                shown = json_deep_copy(h);
                if (!shown || json_object_set(shown, "payload", json_object_get(b, "payload")) < 0)
                        return -ENOMEM;
        }
        return hd_bootstrap_build_shown(h, shown, at, 0, ret);
}

/* Load the bootstrap name, check it and prove it: *ret_b the file as it
 * is, *ret the bootstrap rebuilt from the verified handoff. */
static int peek(int dirfd, const char *name, const hd_consume_opts *o, int64_t now,
                json_t **ret_b, json_t **ret, hd_verdict *v)
{
        _cleanup_json_ json_t *b = NULL;
        hd_limits lim = { .max_size = o->max_size };
        int r;

        r = load_at_linked(dirfd, name, &lim, &b, v);
        if (r < 0)
                return r;
        r = consume_check(b, name, o, now, NULL, v);
        if (r < 0)
                return r;
        r = bootstrap_prove(b, name, o, ret, v);
        if (r < 0)
                return r;
        if (ret_b)
                *ret_b = TAKE_PTR(b);
        return 0;
}

static int take(int dirfd, const char *name, const hd_consume_opts *o, int64_t now,
                json_t **ret, hd_verdict *v)
{
        _cleanup_json_ json_t *b = NULL, *mine = NULL, *out = NULL;
        hd_limits lim = { .max_size = o->max_size };
        char priv[NAME_MAX + 1], rnd[9];
        int r;

        r = peek(dirfd, name, o, now, &b, &out, v);
        if (r < 0)
                return r;
        if (random_hex(rnd, 4) < 0)
                return -EIO;
        r = layout_consume_name((int)getpid(), rnd, name, priv, sizeof(priv));
        if (r < 0)
                return r;
        if (renameat(dirfd, name, dirfd, priv) < 0)
                return -errno;  /* ENOENT: another consumer won */
        /* What was checked is what was taken: a file swapped in between
         * is checked again, and put back when it fails. */
        r = load_at_linked(dirfd, priv, &lim, &mine, v);
        if (r == 0 && !json_equal(mine, b)) {
                json_decref(TAKE_PTR(out));
                r = consume_check(mine, name, o, now, NULL, v);
                if (r == 0)
                        r = bootstrap_prove(mine, name, o, &out, v);
                if (r < 0) {
                        (void)move_noreplace(dirfd, priv, dirfd, name);
                        return r;
                }
        }
        if (r == 0 && unlinkat(dirfd, priv, 0) < 0)
                r = -errno;
        if (r < 0)
                return r;
        *ret = TAKE_PTR(out);
        return 0;
}

struct cand {
        char *name;
        int64_t at;
};

static int cand_cmp(const void *a, const void *b)
{
        const struct cand *x = a, *y = b;
        if (x->at != y->at)
                return x->at < y->at ? -1 : 1;
        return strcmp(x->name, y->name);
}

int hd_consume_with(int dirfd, const char *handoff_id, const hd_consume_opts *o,
                    int64_t now, json_t **ret, hd_verdict *v)
{
        struct cand *c = NULL;
        size_t n = 0, cap = 0;
        hd_verdict refused = { .reason = HD_OK };
        struct dirent *de;
        DIR *d;
        int r;

        if (!o || !ret)
                return -EINVAL;
        if (handoff_id) {
                char name[NAME_MAX + 1];
                if (!hd_id_valid(handoff_id))
                        return -EINVAL;
                r = hd_bootstrap_name(handoff_id, name, sizeof(name));
                if (r < 0)
                        return r;
                return take(dirfd, name, o, now, ret, v);
        }

        d = opendir_at(dirfd);
        if (!d)
                return -errno;
        /* The order from names and mtimes only (the daemon writes each
         * bootstrap at its accepted_at): reading and checking every waiting
         * one to pick one made a consume cost the whole inbox (issue 24.9).
         * Only the one taken is read and proved; if it fails, the next. */
        while ((de = readdir(d))) {
                size_t l = strlen(de->d_name);
                struct stat st;

                if (de->d_name[0] == '.' || l < 6 ||
                    strcmp(de->d_name + l - 5, ".json"))
                        continue;
                if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode))
                        continue;
                if (n == cap) {
                        struct cand *t = realloc(c, (cap = cap ? cap * 2 : 16) * sizeof(*c));
                        if (!t) {
                                r = -ENOMEM;
                                goto out;
                        }
                        c = t;
                }
                c[n].name = strdup(de->d_name);
                c[n].at = (int64_t)st.st_mtim.tv_sec * 1000000LL + st.st_mtim.tv_nsec / 1000;
                if (!c[n].name) {
                        r = -ENOMEM;
                        goto out;
                }
                n++;
        }
        if (n > 1)
                qsort(c, n, sizeof(*c), cand_cmp);
        r = -ENOENT;
        for (size_t i = 0; i < n && r < 0; i++) {
                hd_verdict tv = { .reason = HD_OK };
                r = take(dirfd, c[i].name, o, now, ret, &tv);
                if (r == -EBADMSG && refused.reason == HD_OK)
                        refused = tv;
                if (r < 0 && r != -ENOENT && r != -ESTALE && r != -EBADMSG)
                        break;
        }
        if (r == -ESTALE || r == -EBADMSG)
                r = -ENOENT;
        /* Nothing taken but something refused: say what. */
        if (r == -ENOENT && refused.reason != HD_OK) {
                if (v)
                        *v = refused;
                r = -EBADMSG;
        }
out:
        for (size_t i = 0; i < n; i++)
                free(c[i].name);
        free(c);
        closedir(d);
        return r;
}

int hd_consume_peek(int dirfd, const char *name, const hd_consume_opts *o,
                    int64_t now, json_t **ret, hd_verdict *v)
{
        if (!o || !name || !ret)
                return -EINVAL;
        return peek(dirfd, name, o, now, NULL, ret, v);
}

int hd_consume(int dirfd, const char *handoff_id, int64_t window_s,
               int64_t now, json_t **ret)
{
        hd_consume_opts o = { .resume_window_s = window_s };
        hd_verdict v;
        int r;

        r = hd_consume_with(dirfd, handoff_id, &o, now, ret, &v);
        /* Without keys only a malformed file is refused; the oldest-first
         * scan never reported those. */
        return r == -EBADMSG && !handoff_id ? -ENOENT : r;
}
