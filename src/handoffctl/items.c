/* Reading a spool for handoffctl; see items.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoffctl.h"
#include "items.h"
#include "util.h"

const char *const items_states[4] = { "handoff", "claimed", "archive", "rejected" };

int ctl_config(const char *path, struct config **ret)
{
        char *err = NULL;
        int r;

        r = config_load(path ? path : CONFIG_DEFAULT_PATH, false, ret, &err);
        if (r < 0) {
                ctl_fail(CTL_EXIT_USAGE, "%s", err ? err : strerror(-r));
                free(err);
                return CTL_EXIT_USAGE;
        }
        return 0;
}

static bool has_suffix(const char *s, const char *suf)
{
        size_t l = strlen(s), m = strlen(suf);
        return l > m && !strcmp(s + l - m, suf);
}

static void copy_str(json_t *dst, const char *k, const json_t *src, const char *sk)
{
        const char *s = json_string_value(json_object_get(src, sk));
        if (s)
                json_object_set_new(dst, k, json_string(s));
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

static json_t *item_new(int dirfd, const char *dir, const char *state, const char *name,
                        int64_t now)
{
        _cleanup_json_ json_t *doc = NULL, *side = NULL;
        char path[PATH_MAX + NAME_MAX + 2], sname[NAME_MAX + 16], at[HD_TIME_MAX];
        struct stat st;
        hd_verdict v;
        json_t *it;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return NULL;
        it = json_object();
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        int64_t t = (int64_t)st.st_ctim.tv_sec * 1000000LL + st.st_ctim.tv_nsec / 1000;
        hd_time_format(t, at, sizeof(at));
        json_object_set_new(it, "state", json_string(state));
        json_object_set_new(it, "name", name_json(name));
        json_object_set_new(it, "path", name_json(path));
        json_object_set_new(it, "at", json_string(at));
        json_object_set_new(it, "age_s", json_integer((now - t) / 1000000));
        if (S_ISREG(st.st_mode) && hd_load_at(dirfd, name, NULL, &doc, &v) == 0) {
                copy_str(it, "handoff_id", doc, "handoff_id");
                copy_str(it, "from_agent", doc, "from_agent");
                copy_str(it, "to_agent", doc, "to_agent");
                copy_str(it, "expires_at", doc, "expires_at");
        }
        if (!strcmp(state, "archive"))
                snprintf(sname, sizeof(sname), "%s.outcome", name);
        else if (!strcmp(state, "rejected"))
                snprintf(sname, sizeof(sname), "%s.reason", name);
        else if (!strcmp(state, "claimed") && has_suffix(name, ".json"))
                snprintf(sname, sizeof(sname), "%.*s.delivered", (int)(strlen(name) - 5), name);
        else
                sname[0] = '\0';
        if (sname[0] && hd_load_at(dirfd, sname, NULL, &side, &v) == 0) {
                copy_str(it, "outcome", side, "outcome");
                copy_str(it, "reason", side, "reason");
                copy_str(it, "detail", side, "detail");
                copy_str(it, "accepted_at", side, "accepted_at");
                copy_str(it, "archived_at", side, "archived_at");
                copy_str(it, "relayed_to", side, "relayed_to");
                if (!json_object_get(it, "handoff_id"))
                        copy_str(it, "handoff_id", side, "handoff_id");
        }
        return it;
}

int items_list(const char *spool_dir, const char *state, json_t **ret)
{
        char dir[PATH_MAX];
        struct dirent *de;
        json_t *arr;
        int64_t now = hd_now_usec();
        DIR *d;
        int fd;

        if (xsnprintf(dir, sizeof(dir), "%s/%s", spool_dir, state) < 0)
                return -ENAMETOOLONG;
        arr = json_array();
        if (!arr)
                return -ENOMEM;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT) {
                        *ret = arr;
                        return 0;
                }
                json_decref(arr);
                return -errno;
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
                /* Sidecars and markers describe items; they are not items. */
                if ((!strcmp(state, "archive") && has_suffix(n, ".outcome")) ||
                    (!strcmp(state, "rejected") && has_suffix(n, ".reason")) ||
                    (!strcmp(state, "claimed") && has_suffix(n, ".delivered")))
                        continue;
                json_t *it = item_new(dirfd(d), dir, state, n, now);
                if (it)
                        json_array_append_new(arr, it);
        }
        closedir(d);
        *ret = arr;
        return 0;
}
