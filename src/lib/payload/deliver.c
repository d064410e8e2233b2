/* Delivery profiles beside the bootstrap: the Vox contract file and the
 * ACT handoff directory inside an agent's state_dir.  Every open is
 * relative to the state_dir fd and refuses symlinks, so nothing is ever
 * written outside it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "deliver.h"
#include "files.h"
#include "handoff.h"
#include "payload_act.h"
#include "util.h"

#define VOXIGNORE_MAX     (64 * 1024)
#define VOXIGNORE_LINE    ".vox/handoffs/"
#define ACT_NAME_LEN      15            /* YYYY-MM-DD-HHmm */
#define ACT_MAX_SEQ       9999
#define ACT_SCAN_MAX      4096

/* mkdir name below parentfd (fine if it exists) and open it, refusing a
 * symlink in its place. */
static int deliver_dir(int parentfd, const char *name, int *ret)
{
        int fd;

        if (mkdirat(parentfd, name, 0750) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(parentfd, name,
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ELOOP ? -ENOTDIR : -errno;
        *ret = fd;
        return 0;
}

static int deliver_subdir(int state_dirfd, const char *top, int *ret)
{
        _cleanup_close_ int tfd = -1;
        int r;

        r = deliver_dir(state_dirfd, top, &tfd);
        if (r < 0)
                return r;
        return deliver_dir(tfd, "handoffs", ret);
}

/* Make sure .voxignore lists .vox/handoffs/, keeping what else it says. */
static int deliver_voxignore(int state_dirfd, bool do_fsync)
{
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        struct stat st;
        const char *s;
        int r;

        fd = openat(state_dirfd, ".voxignore",
                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT)
                return -errno;
        if (fd >= 0) {
                if (fstat(fd, &st) < 0)
                        return -errno;
                if (!S_ISREG(st.st_mode))
                        return -EINVAL;
                /* Room for our line and a newline after what is there. */
                r = read_all(fd, VOXIGNORE_MAX, sizeof(VOXIGNORE_LINE) + 1, &buf, &len);
                if (r < 0)
                        return r;
        } else {
                buf = malloc(sizeof(VOXIGNORE_LINE) + 2);
                if (!buf)
                        return -ENOMEM;
        }
        buf[len] = '\0';
        for (s = buf; *s;) {
                size_t n = strcspn(s, "\n");
                if ((n == strlen(VOXIGNORE_LINE) || n == strlen(VOXIGNORE_LINE) - 1) &&
                    !strncmp(s, VOXIGNORE_LINE, n))
                        return 0;
                s += n;
                if (*s)
                        s++;
        }
        if (len > 0 && buf[len - 1] != '\n')
                buf[len++] = '\n';
        memcpy(buf + len, VOXIGNORE_LINE "\n", sizeof(VOXIGNORE_LINE));
        len += sizeof(VOXIGNORE_LINE);
        return hd_write_atomic(state_dirfd, ".voxignore", buf, len, 0644,
                               do_fsync);
}

int deliver_vox(int state_dirfd, const json_t *p, const hd_deliver_opts *o,
                int64_t now_usec)
{
        _cleanup_close_ int hfd = -1;
        _cleanup_free_ char *buf = NULL;
        const char *session = json_string_value(json_object_get(p, "session_id"));
        char name[160];
        int r;

        if (!session || !hd_id_valid(session))
                return -EINVAL;
        r = xsnprintf(name, sizeof(name), "%s.json", session);
        if (r < 0)
                return r;
        r = deliver_subdir(state_dirfd, ".vox", &hfd);
        if (r < 0)
                return r;
        buf = json_dumps(p, JSON_INDENT(2) | JSON_SORT_KEYS);
        if (!buf)
                return -ENOMEM;
        r = hd_write_atomic(hfd, name, buf, strlen(buf), 0640, o->do_fsync);
        if (r < 0)
                return r;
        return deliver_voxignore(state_dirfd, o->do_fsync);
}

/* Our file names: YYYY-MM-DD-HHmm[-N].(xml|md); N orders two in a minute. */
static bool act_name_parse(const char *s, char stem[static ACT_NAME_LEN + 1],
                           unsigned *ret_seq)
{
        static const char pat[] = "dddd-dd-dd-dddd";
        unsigned seq = 1;
        const char *e;

        for (int i = 0; i < ACT_NAME_LEN; i++)
                if (pat[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != '-')
                        return false;
        e = s + ACT_NAME_LEN;
        if (*e == '-') {
                char *end;
                if (e[1] < '1' || e[1] > '9')
                        return false;
                seq = (unsigned)strtoul(e + 1, &end, 10);
                if (seq < 2 || seq > ACT_MAX_SEQ)
                        return false;
                e = end;
        }
        if (strcmp(e, ".xml") && strcmp(e, ".md"))
                return false;
        memcpy(stem, s, ACT_NAME_LEN);
        stem[ACT_NAME_LEN] = '\0';
        *ret_seq = seq;
        return true;
}

struct act_entry {
        char name[32];
        char stem[ACT_NAME_LEN + 1];
        unsigned seq;
};

static int act_entry_cmp(const void *a, const void *b)
{
        const struct act_entry *x = a, *y = b;
        int c = strcmp(x->stem, y->stem);

        if (c)
                return c;
        return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Keep the newest max of our files; others in the directory are left. */
static int act_retain(int hfd, unsigned max)
{
        struct act_entry *v = NULL;
        struct dirent *de;
        size_t n = 0, i;
        DIR *d;
        int r = 0;

        d = opendir_at(hfd);
        if (!d)
                return -errno;
        rewinddir(d);
        v = calloc(ACT_SCAN_MAX, sizeof(*v));
        if (!v) {
                closedir(d);
                return -ENOMEM;
        }
        while ((de = readdir(d)) && n < ACT_SCAN_MAX) {
                if (strlen(de->d_name) >= sizeof(v[n].name) ||
                    !act_name_parse(de->d_name, v[n].stem, &v[n].seq))
                        continue;
                strcpy(v[n].name, de->d_name);
                n++;
        }
        closedir(d);
        qsort(v, n, sizeof(*v), act_entry_cmp);
        for (i = 0; n > max && i < n - max; i++)
                if (unlinkat(hfd, v[i].name, 0) < 0 && errno != ENOENT && r == 0)
                        r = -errno;
        free(v);
        return r;
}

/* One past the highest sequence number of stem's files in hfd. */
static int act_next_seq(int hfd, const char *stem, unsigned *ret)
{
        char s[ACT_NAME_LEN + 1];
        struct dirent *de;
        unsigned max = 0, seq;
        DIR *d;

        d = opendir_at(hfd);
        if (!d)
                return -errno;
        while ((de = readdir(d)))
                if (act_name_parse(de->d_name, s, &seq) && !strcmp(s, stem) && seq > max)
                        max = seq;
        closedir(d);
        if (max >= ACT_MAX_SEQ)
                return -EEXIST;
        *ret = max + 1;
        return 0;
}

/* latest.<ext> -> name, replaced atomically. */
static int act_latest(int hfd, const char *name, const char *ext)
{
        char tmp[64], latest[32], rnd[17];
        int r;

        r = random_hex(rnd, 8);
        if (r < 0)
                return r;
        if (xsnprintf(tmp, sizeof(tmp), ".latest.%s", rnd) < 0 ||
            xsnprintf(latest, sizeof(latest), "latest.%s", ext) < 0)
                return -ENAMETOOLONG;
        if (symlinkat(name, hfd, tmp) < 0)
                return -errno;
        if (renameat(hfd, tmp, hfd, latest) < 0) {
                r = -errno;
                unlinkat(hfd, tmp, 0);
                return r;
        }
        return 0;
}

int deliver_act(int state_dirfd, const json_t *p,
                const hd_deliver_opts *o, int64_t now_usec)
{
        _cleanup_close_ int hfd = -1;
        _cleanup_free_ char *conv = NULL;
        struct act_doc d = {};
        const char *ext, *text;
        char name[32], stem[ACT_NAME_LEN + 1];
        unsigned seq = 0;
        struct tm tm;
        time_t t;
        bool md;
        int r;

        if (!o->act_format || !strcmp(o->act_format, "xml"))
                md = false;
        else if (!strcmp(o->act_format, "md"))
                md = true;
        else
                return -EINVAL;
        ext = md ? "md" : "xml";
        if (!json_is_string(p))
                return -EINVAL;
        r = act_parse(json_string_value(p), json_string_length(p), &d, NULL);
        if (r < 0)
                return r;
        if (d.markdown == md) {
                text = json_string_value(p);    /* as the producer wrote it */
        } else {
                r = md ? act_to_md(&d, 1, &conv) : act_to_xml(&d, &conv);
                text = conv;
        }
        act_doc_done(&d);
        if (r < 0)
                return r;

        t = (time_t)(now_usec / 1000000);
        if (!gmtime_r(&t, &tm))
                return -EINVAL;
        if (strftime(stem, sizeof(stem), "%Y-%m-%d-%H%M", &tm) != ACT_NAME_LEN)
                return -ERANGE;
        r = deliver_subdir(state_dirfd, ".act", &hfd);
        if (r < 0)
                return r;
        /* Two handoffs in one minute both stay: the second gets -2.  The
         * number only grows (one past the highest there): retention
         * removes the lowest, so a freed low number would be the oldest
         * name and the next file would be removed at once. */
        r = act_next_seq(hfd, stem, &seq);
        if (r < 0)
                return r;
        r = seq == 1 ? xsnprintf(name, sizeof(name), "%s.%s", stem, ext)
                     : xsnprintf(name, sizeof(name), "%s-%u.%s", stem, seq, ext);
        if (r < 0)
                return r;
        r = hd_write_atomic(hfd, name, text, strlen(text), 0640, o->do_fsync);
        if (r < 0)
                return r;
        r = act_latest(hfd, name, ext);
        if (r < 0)
                return r;
        r = act_retain(hfd, o->act_max_files ? o->act_max_files : 5);
        if (r < 0)
                return r;
        return o->do_fsync ? fsync_dir(hfd) : 0;
}
