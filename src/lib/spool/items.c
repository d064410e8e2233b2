/* Reading a spool from outside the daemon (handoffctl, the hub); see
 * items.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "items.h"
#include "files.h"
#include "layout.h"
#include "record.h"
#include "util.h"

const char *const items_states[4] = { "handoff", "claimed", "archive", "rejected" };

/* An empty string is a field the item does not have (the daemon writes
 * accepted_at "" for an item relayed before anyone here took it): no key. */
static void copy_str(json_t *dst, const char *k, const json_t *src, const char *sk)
{
        const char *s = json_string_value(json_object_get(src, sk));
        if (s && *s)
                json_object_set_new(dst, k, json_string(s));
}

/* Open SPOOL/state (its path in dir): the fd, or -errno (-ENOENT: none). */
static int state_open(const char *spool_dir, const char *state, char dir[PATH_MAX])
{
        int fd;

        if (xsnprintf(dir, PATH_MAX, "%s/%s", spool_dir, state) < 0)
                return -ENAMETOOLONG;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* File names need not be UTF-8; JSON strings must. */
static json_t *name_json(const char *s)
{
        json_t *j = json_string(s);
        char buf[PATH_MAX];
        size_t i;

        if (j)
                return j;
        for (i = 0; s[i] && i + 1 < sizeof(buf); i++)
                buf[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
        buf[i] = '\0';
        return json_string(buf);
}

/* archive/NAME.result, the result its agent gave (the daemon's file,
 * completion.c of handoffd): {status, agent, completed_at, recorded_at,
 * text?, data?, reason?} into it as "result". */
static void result_of(int dirfd, const char *name, json_t *it)
{
        /* the agent's document, bounded, in the daemon's envelope */
        hd_limits lim = { .max_size = 2 * HD_RESULT_MAX_SIZE };
        static const char *const copy[] = { "text", "data", "reason", "completed_at", "kid" };
        _cleanup_json_ json_t *env = NULL;
        char xname[NAME_MAX + 16];
        hd_verdict v;
        json_t *res, *o;

        if (layout_suffixed(name, LAYOUT_RESULT, xname, sizeof(xname)) < 0 ||
            hd_load_at(dirfd, xname, &lim, &env, &v) < 0)
                return;
        res = json_object_get(env, "result");
        o = json_pack("{s:s, s:s, s:s}", "status",
                      json_string_value(json_object_get(env, "status")) ?: "completed", "agent",
                      json_string_value(json_object_get(env, "agent")) ?: "", "recorded_at",
                      json_string_value(json_object_get(env, "recorded_at")) ?: "");
        for (size_t i = 0; o && i < ELEMENTSOF(copy); i++) {
                json_t *x = json_object_get(res, copy[i]);
                if (x)
                        json_object_set(o, copy[i], x);
        }
        if (o)
                json_object_set_new(it, "result", o);
}

static json_t *item_new(int dirfd, const char *dir, const char *state, const char *name,
                        size_t max_read, int64_t now)
{
        _cleanup_json_ json_t *doc = NULL, *side = NULL;
        char path[PATH_MAX + NAME_MAX + 2], sname[NAME_MAX + 16], at[HD_TIME_MAX];
        struct stat st;
        hd_verdict v;
        json_t *it;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return NULL;
        if (xsnprintf(path, sizeof(path), "%s/%s", dir, name) < 0)
                return NULL;
        it = json_object();
        if (!it)
                return NULL;
        int64_t t = (int64_t)st.st_ctim.tv_sec * 1000000LL + st.st_ctim.tv_nsec / 1000;
        hd_time_format(t, at, sizeof(at));
        json_object_set_new(it, "state", json_string(state));
        json_object_set_new(it, "name", name_json(name));
        json_object_set_new(it, "path", name_json(path));
        json_object_set_new(it, "at", json_string(at));
        json_object_set_new(it, "age_s", json_integer((now - t) / 1000000));
        if (S_ISREG(st.st_mode) && max_read && (uint64_t)st.st_size > max_read)
                json_object_set_new(it, "unread", json_true());
        else if (S_ISREG(st.st_mode))
                (void) load_at_linked(dirfd, name, NULL, &doc, &v);
        int r = 0;
        if (!strcmp(state, "archive"))
                r = layout_suffixed(name, LAYOUT_OUTCOME, sname, sizeof(sname));
        else if (!strcmp(state, "rejected"))
                r = layout_suffixed(name, LAYOUT_REASON, sname, sizeof(sname));
        else if (!strcmp(state, "claimed") && layout_has_suffix(name, ".json"))
                r = xsnprintf(sname, sizeof(sname), "%.*s" LAYOUT_DELIVERED, (int)(strlen(name) - 5), name);
        else
                sname[0] = '\0';
        if (r < 0)
                sname[0] = '\0';       /* no sidecar can have that name */
        /* the item's own file: its sidecar is the daemon's note on it
         * (status counts both, as retention does) */
        json_object_set_new(it, "bytes", json_integer((json_int_t)st_bytes(&st)));
        char xname[NAME_MAX + 16];
        struct stat ss;
        if (!strcmp(state, "archive") &&
            layout_suffixed(name, LAYOUT_RESULT, xname, sizeof(xname)) == 0 &&
            fstatat(dirfd, xname, &ss, AT_SYMLINK_NOFOLLOW) == 0)
                result_of(dirfd, name, it);
        if (sname[0] && hd_load_at(dirfd, sname, NULL, &side, &v) == 0) {
                copy_str(it, "outcome", side, "outcome");
                copy_str(it, "reason", side, "reason");
                copy_str(it, "detail", side, "detail");
                copy_str(it, "accepted_at", side, "accepted_at");
                copy_str(it, "archived_at", side, "archived_at");
                copy_str(it, "relayed_to", side, "relayed_to");
                /* A receipt from the host it was relayed to (receipt.c). */
                copy_str(it, "remote_outcome", side, "remote_outcome");
                copy_str(it, "remote_host", side, "remote_host");
                copy_str(it, "remote_at", side, "remote_at");
                copy_str(it, "remote_reason", side, "remote_reason");
                copy_str(it, "remote_detail", side, "remote_detail");
                copy_str(it, "a2a_task", side, "a2a_task");     /* a2a_out.c */
                /* [agent] completes at the consume (item_act.c) */
                if (json_is_boolean(json_object_get(side, "completes")))
                        json_object_set(it, "completes", json_object_get(side, "completes"));
        }
        /* What a file in rejected/ says of itself is a producer's claim:
         * it describes the item only when the daemon authenticated it (its
         * .reason names the same id), else the file is its name alone and
         * cannot pass for another item. */
        const char *sid = json_string_value(json_object_get(side, "handoff_id"));
        const char *did = json_string_value(json_object_get(doc, "handoff_id"));
        if (doc && (strcmp(state, "rejected") || (sid && did && !strcmp(sid, did)))) {
                copy_str(it, "handoff_id", doc, "handoff_id");
                copy_str(it, "from_agent", doc, "from_agent");
                copy_str(it, "to_agent", doc, "to_agent");
                copy_str(it, "expires_at", doc, "expires_at");
                /* A record (claimed/, archive/) says when it was claimed. */
                if (record_form(doc) && !json_object_get(it, "accepted_at"))
                        copy_str(it, "accepted_at", doc, "accepted_at");
        }
        if (!json_object_get(it, "handoff_id"))
                copy_str(it, "handoff_id", side, "handoff_id");
        /* The record (the agent's bootstrap, its private group's) may be
         * closed to the reader where the outcome, the daemon's file in
         * the spool's group, is not: it names both ends too. */
        const char *sfrom = json_string_value(json_object_get(side, "from_agent"));
        const char *sto = json_string_value(json_object_get(side, "to_agent"));
        if (!strcmp(state, "archive") && !json_object_get(it, "from_agent") &&
            sfrom && *sfrom && sto && *sto) {
                json_object_set_new(it, "from_agent", json_string(sfrom));
                json_object_set_new(it, "to_agent", json_string(sto));
        }
        return it;
}

int items_list(const char *spool_dir, const char *state, size_t max_read, json_t **ret)
{
        char dir[PATH_MAX];
        struct dirent *de;
        json_t *arr;
        int64_t now = hd_now_usec();
        DIR *d;
        int fd;

        arr = json_array();
        if (!arr)
                return -ENOMEM;
        fd = state_open(spool_dir, state, dir);
        if (fd == -ENOENT) {
                *ret = arr;
                return 0;
        }
        if (fd < 0) {
                json_decref(arr);
                return fd;
        }
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                json_decref(arr);
                return -errno;
        }
        while ((de = readdir(d))) {
                const char *n = de->d_name;
                if (n[0] == '.')
                        continue;
                /* Sidecars and markers describe items; they are not items.
                 * In archive/ and rejected/ one without its item (a file a
                 * producer named so, rejected under that name) is one, and
                 * is counted, as retention counts it. */
                if (!strcmp(state, "claimed") && layout_has_suffix(n, LAYOUT_DELIVERED))
                        continue;
                const char *suf = !strcmp(state, "archive") ? LAYOUT_OUTCOME :
                                  !strcmp(state, "rejected") ? LAYOUT_REASON : NULL;
                if (suf && layout_is_sidecar_at(dirfd(d), n, suf))
                        continue;
                json_t *it = item_new(dirfd(d), dir, state, n, max_read, now);
                if (it)
                        json_array_append_new(arr, it);
        }
        closedir(d);
        *ret = arr;
        return 0;
}

int items_count(const char *spool_dir, const char *state, size_t *ret_n,
                uint64_t *ret_bytes, json_t *ages)
{
        int64_t now = hd_now_usec();
        const char *suf = !strcmp(state, "archive") ? LAYOUT_OUTCOME :
                          !strcmp(state, "rejected") ? LAYOUT_REASON : NULL;
        char dir[PATH_MAX];
        struct dirent *de;
        uint64_t bytes = 0;
        size_t n = 0;
        DIR *d;
        int fd;

        fd = state_open(spool_dir, state, dir);
        if (fd < 0) {
                if (fd != -ENOENT)
                        return fd;
                *ret_n = 0;
                *ret_bytes = 0;
                return 0;
        }
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        while ((de = readdir(d))) {
                const char *nm = de->d_name;
                struct stat st;

                if (nm[0] == '.' || fstatat(dirfd(d), nm, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                bytes += st_bytes(&st);  /* sidecars too: what retention bounds */
                /* the same items as items_list() */
                if (!strcmp(state, "claimed") && layout_has_suffix(nm, LAYOUT_DELIVERED))
                        continue;
                if (suf && layout_is_sidecar_at(dirfd(d), nm, suf))
                        continue;
                n++;
                if (ages) {
                        int64_t t = (int64_t)st.st_ctim.tv_sec * 1000000LL + st.st_ctim.tv_nsec / 1000;
                        json_array_append_new(ages, json_pack("[I, I]", (json_int_t)st.st_ino,
                                                              (json_int_t)((now - t) / 1000000)));
                }
        }
        closedir(d);
        *ret_n = n;
        *ret_bytes = bytes;
        return 0;
}

const char *const items_find_states[5] = { "handoff", "outbox", "claimed", "archive", "rejected" };

/* What rejected/NAME.reason says: the id it names (authenticated) and
 * the reason, copied into id/reason (empty when absent). */
static void reason_of(int dirfd, const char *name, char *id, size_t idn,
                      char *reason, size_t rn)
{
        _cleanup_json_ json_t *side = NULL;
        hd_limits lim = { .max_size = 65536 };
        char sname[NAME_MAX + 16];
        hd_verdict v;

        id[0] = reason[0] = '\0';
        if (layout_suffixed(name, LAYOUT_REASON, sname, sizeof(sname)) < 0 ||
            hd_load_at(dirfd, sname, &lim, &side, &v) < 0)
                return;
        snprintf(id, idn, "%s", json_string_value(json_object_get(side, "handoff_id")) ?: "");
        snprintf(reason, rn, "%s", json_string_value(json_object_get(side, "reason")) ?: "");
}

static int match_at(int dirfd, const char *dir, const char *state, const char *name,
                    const char *id, int64_t now, json_t **ret)
{
        char want[NAME_MAX + 1], sid[256], reason[64];
        const char *got;
        json_t *it;
        int rank;

        if (name[0] == '.' || xsnprintf(want, sizeof(want), "%s.json", id) < 0)
                return ITEMS_NONE;
        if (!strcmp(state, "claimed")) {
                if (strcmp(name, want))
                        return ITEMS_NONE;
                rank = ITEMS_CLAIMED;
        } else if (!strcmp(state, "archive")) {
                if (!layout_archive_is(name, id))
                        return ITEMS_NONE;
                rank = ITEMS_ARCHIVED;
        } else if (!strcmp(state, "rejected")) {
                if (layout_has_suffix(name, LAYOUT_REASON))
                        return ITEMS_NONE;
                /* Only an authenticated rejection names its id; a file
                 * rejected before that counts by its name alone. */
                reason_of(dirfd, name, sid, sizeof(sid), reason, sizeof(reason));
                if (sid[0]) {
                        if (strcmp(sid, id) || !strcmp(reason, "duplicate_id"))
                                return ITEMS_NONE;
                        rank = ITEMS_REJECTED;
                } else {
                        if (layout_base_len(name) != strlen(want) || strncmp(name, want, strlen(want)))
                                return ITEMS_NONE;
                        rank = ITEMS_REJECTED_BY_NAME;
                }
        } else {
                /* Any name: the id inside counts.  Parse only a file named
                 * for it or whose bytes hold it, never every file. */
                if (layout_base_len(name) != strlen(want) || strncmp(name, want, strlen(want))) {
                        _cleanup_free_ char *buf = NULL;
                        size_t len;
                        hd_verdict v;
                        if (hd_read_at(dirfd, name, 0, &buf, &len, &v) < 0 ||
                            !memmem(buf, len, id, strlen(id)))
                                return ITEMS_NONE;
                }
                rank = ITEMS_PENDING;
        }
        it = item_new(dirfd, dir, state, name, 0, now);
        if (!it)
                return ITEMS_NONE;      /* gone meanwhile */
        got = json_string_value(json_object_get(it, "handoff_id"));
        /* pending files may have any name: the one inside counts */
        if ((rank == ITEMS_ARCHIVED || rank == ITEMS_PENDING) && (!got || strcmp(got, id))) {
                json_decref(it);
                return ITEMS_NONE;
        }
        if (rank == ITEMS_REJECTED_BY_NAME || rank == ITEMS_REJECTED)
                json_object_set_new(it, "handoff_id", json_string(id));
        json_object_set_new(it, "status", json_string(items_status(it)));
        *ret = it;
        return rank;
}

int items_match(const char *spool_dir, const char *state, const char *name,
                const char *handoff_id, json_t **ret)
{
        _cleanup_close_ int fd = -1;
        char dir[PATH_MAX];

        if (!hd_id_valid(handoff_id))
                return -EINVAL;
        fd = state_open(spool_dir, state, dir);
        if (fd < 0)
                return fd == -ENOENT ? ITEMS_NONE : fd;
        return match_at(fd, dir, state, name, handoff_id, hd_now_usec(), ret);
}

/* Keep it (of rank r) if it says more than the best so far; else drop it. */
static void keep_best(json_t **best, int *best_rank, json_t *it, int r)
{
        if (r > *best_rank) {
                json_decref(*best);
                *best = it;
                *best_rank = r;
        } else {
                json_decref(it);
        }
}

int items_find(const char *spool_dir, const char *handoff_id, json_t **ret)
{
        _cleanup_json_ json_t *best = NULL;
        int64_t now = hd_now_usec();
        int best_rank = ITEMS_NONE;
        char dir[PATH_MAX];

        if (!hd_id_valid(handoff_id))
                return -EINVAL;
        /* The states where the name tells first: a pending file (any
         * name, read to know) is looked for only when none says more. */
        static const char *const order[] = { "claimed", "archive", "rejected", "handoff", "outbox" };
        for (size_t i = 0; i < ELEMENTSOF(order); i++) {
                const char *state = order[i];
                struct dirent *de;

                if (best_rank > ITEMS_PENDING && (!strcmp(state, "handoff") || !strcmp(state, "outbox")))
                        break;
                DIR *d;
                int fd;

                fd = state_open(spool_dir, state, dir);
                if (fd == -ENOENT)
                        continue;
                if (fd < 0)
                        return fd;
                /* claimed/ holds one name an id can have: no listing */
                if (!strcmp(state, "claimed")) {
                        char name[NAME_MAX + 1];
                        json_t *it = NULL;
                        int r = ITEMS_NONE;
                        if (xsnprintf(name, sizeof(name), "%s.json", handoff_id) >= 0)
                                r = match_at(fd, dir, state, name, handoff_id, now, &it);
                        close(fd);
                        keep_best(&best, &best_rank, it, r);
                        continue;
                }
                d = fdopendir(fd);
                if (!d) {
                        close(fd);
                        return -errno;
                }
                while ((de = readdir(d))) {
                        json_t *it = NULL;
                        int r = match_at(dirfd(d), dir, state, de->d_name, handoff_id, now, &it);
                        keep_best(&best, &best_rank, it, r);
                }
                closedir(d);
        }
        if (!best)
                return -ENOENT;
        *ret = TAKE_PTR(best);
        return best_rank;
}

const char *items_status(const json_t *item)
{
        const char *state = json_string_value(json_object_get(item, "state"));
        const char *outcome = json_string_value(json_object_get(item, "outcome"));

        if (!state)
                return "unknown";
        if (!strcmp(state, "claimed"))
                return "claimed";
        if (!strcmp(state, "archive"))
                return outcome && *outcome ? outcome : "archived";
        if (!strcmp(state, "rejected"))
                return "rejected";
        return "pending";
}
