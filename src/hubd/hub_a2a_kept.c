/* The documents the A2A side sent, kept: state_dir/a2a/AGENT/ID.json,
 * one per task, written before the drop into the spool so that a retry
 * of the same messageId is the same task and the same bytes; removed
 * when the spool refused it, pruned after HUB_A2A_KEEP. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "handoff.h"
#include "hub.h"
#include "hub_a2a.h"
#include "util.h"

static pthread_mutex_t a2a_locks[A2A_LOCKS] = {
        [0 ... A2A_LOCKS - 1] = PTHREAD_MUTEX_INITIALIZER
};

pthread_mutex_t *a2a_lock(const char *id)
{
        return &a2a_locks[fnv1a(id, strlen(id), FNV_BASIS) % A2A_LOCKS];
}

/* The directory of agent's documents; with create, made if missing. */
int a2a_kept_dir(struct hub *h, const char *agent, bool create, int *ret)
{
        _cleanup_close_ int top = -1;
        int fd;

        if (create && mkdirat(h->state_fd, A2A_DIR, 0750) < 0 && errno != EEXIST)
                return -errno;
        top = openat(h->state_fd, A2A_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0)
                return -errno;
        if (create && mkdirat(top, agent, 0750) == 0 && h->cfg->fsync) {
                int r = fsync_dir(top);
                if (r == 0)
                        r = fsync_dir(h->state_fd);
                if (r < 0)
                        return r;
        }
        fd = openat(top, agent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret = fd;
        return 0;
}

/* agent's document of id: 0 with *ret_doc (and the bytes when asked),
 * -ENOENT, or -errno. */
int a2a_kept_read(struct hub *h, const char *agent, const char *id, json_t **ret_doc,
                  char **ret_body, size_t *ret_len)
{
        const hd_limits lim = { .max_size = h->cfg->max_file_size };
        _cleanup_close_ int dfd = -1;
        _cleanup_free_ char *buf = NULL;
        char name[NAME_MAX + 1];
        size_t len;
        hd_verdict v;
        int r;

        if (!hd_id_valid(id) || xsnprintf(name, sizeof(name), "%s.json", id) < 0)
                return -ENOENT;
        r = a2a_kept_dir(h, agent, false, &dfd);
        if (r < 0)
                return r;
        r = hd_read_at(dfd, name, lim.max_size, &buf, &len, &v);
        if (r < 0)
                return r == -EBADMSG ? -EIO : r;
        r = hd_parse(buf, len, &lim, ret_doc, &v);
        if (r < 0)
                return r == -EBADMSG ? -EIO : r;
        if (ret_body) {
                *ret_body = TAKE_PTR(buf);
                *ret_len = len;
        }
        return 0;
}

int a2a_kept_write(struct hub *h, const char *agent, const char *id, const char *body,
                   size_t len)
{
        _cleanup_close_ int dfd = -1;
        char name[NAME_MAX + 1];
        int r;

        r = xsnprintf(name, sizeof(name), "%s.json", id);
        if (r >= 0)
                r = a2a_kept_dir(h, agent, true, &dfd);
        if (r < 0)
                return r;
        return hd_write_atomic(dfd, name, body, len, 0640, h->cfg->fsync);
}

void a2a_kept_remove(struct hub *h, const char *agent, const char *id)
{
        _cleanup_close_ int dfd = -1;
        char name[NAME_MAX + 1];

        if (xsnprintf(name, sizeof(name), "%s.json", id) >= 0 &&
            a2a_kept_dir(h, agent, false, &dfd) == 0)
                unlinkat(dfd, name, 0);
}

int hub_a2a_prune(struct hub *h, int64_t now_s)
{
        _cleanup_close_ int top = -1;
        struct dirent *de, *fe;
        struct stat st;
        DIR *d, *ad;
        int n = 0;

        top = openat(h->state_fd, A2A_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (top < 0)
                return errno == ENOENT ? 0 : -errno;
        d = opendir_at(top);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                int afd;

                if (de->d_name[0] == '.' || !hd_agent_valid(de->d_name))
                        continue;
                afd = openat(top, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (afd < 0)
                        continue;
                ad = fdopendir(afd);
                if (!ad) {
                        close(afd);
                        continue;
                }
                while ((fe = readdir(ad)))
                        if (fe->d_name[0] != '.' &&
                            fstatat(dirfd(ad), fe->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                            S_ISREG(st.st_mode) && st.st_mtime < now_s - HUB_A2A_KEEP &&
                            unlinkat(dirfd(ad), fe->d_name, 0) == 0)
                                n++;
                closedir(ad);
        }
        closedir(d);
        return n;
}
