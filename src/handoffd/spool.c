/* The spool: its state directories and the agents' directories (opened
 * relative to held fds, refused when a link or group-writable), listing,
 * look-ups in the replay memory ids/, and the status record of system
 * errors.  Every change on disk is the storage layer's (store/store.h);
 * the spool decides nothing and calls no module above it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agents.h"
#include "files.h"
#include "layout.h"
#include "lock.h"
#include "log.h"
#include "spool.h"

const char *const spool_dir_names[_SD_MAX] = {
        [SD_TMP] = "tmp",
        [SD_HANDOFF] = "handoff",
        [SD_CLAIMED] = "claimed",
        [SD_ARCHIVE] = "archive",
        [SD_REJECTED] = "rejected",
        [SD_IDS] = "ids",
        [SD_BATON] = "baton",
        [SD_OUTBOX] = "outbox",
        [SD_SPENT] = "spent",
        [SD_QUOTA] = "quota",
        [SD_CANCEL] = "cancel",
};


int spool_error(struct spool *sp, int err, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        int n;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        n = snprintf(sp->st.last_error, sizeof(sp->st.last_error), "%.*s",
                     (int)sizeof(sp->st.last_error) - 1, msg);
        if (err && n >= 0 && (size_t)n < sizeof(sp->st.last_error))
                snprintf(sp->st.last_error + n, sizeof(sp->st.last_error) - (size_t)n,
                         ": %s", strerror(err < 0 ? -err : err));
        sp->st.last_error_usec = hd_now_usec();
        sp->st.errors++;
        return log_error_errno(err, "%s", msg);
}

static void agents_close(struct spool *sp)
{
        for (size_t i = 0; i < sp->n_agents; i++)
                agent_rt_close(&sp->agents[i]);
        free(sp->agents);
        sp->agents = NULL;
        sp->n_agents = 0;
}

/* Open every agent of cfg, and say why each other one is out of service
 * in unserved (replaced).  On failure the agents in use stay as they
 * were. */
static int agents_open(struct spool *sp, struct config *cfg, struct dict *unserved)
{
        struct dict why;
        struct agent_rt *a;
        struct stat st;
        size_t n;
        int r;

        if (fstat(sp->fd[SD_HANDOFF], &st) < 0)
                return log_error_errno(errno, "Cannot stat '%s/handoff'", cfg->spool_dir);
        dict_init(&why, sizeof(struct unserved_entry));
        r = agents_open_all(cfg, st.st_gid, false, &why, &a, &n, NULL);
        if (r < 0) {
                dict_clear(&why);
                return r;
        }
        agents_close(sp);
        sp->agents = a;
        sp->n_agents = n;
        dict_clear(unserved);
        *unserved = why;        /* no entry points back at its table */
        return 0;
}

int spool_check(struct config *cfg, struct agents_count *ret)
{
        _cleanup_close_ int root = -1, hd = -1;
        struct agent_rt *a;
        struct stat st;
        gid_t shared;
        size_t n;
        int r;

        /* The spool's group: that of handoff/, or the one the start would
         * give it (the spool's if setgid, else ours). */
        r = open_dir_look(AT_FDCWD, cfg->spool_dir, &root);
        if (r == -ELOOP || r == -ENOTDIR)
                return log_error_errno(r, "Cannot open spool '%s'", cfg->spool_dir);
        if (r == 0)
                r = open_dir_look(root, spool_dir_names[SD_HANDOFF], &hd);
        if (r == 0 && fstat(hd, &st) == 0)
                shared = st.st_gid;
        else if (root >= 0 && fstat(root, &st) == 0 && (st.st_mode & S_ISGID))
                shared = st.st_gid;
        else
                shared = getegid();
        return agents_open_all(cfg, shared, true, NULL, &a, &n, ret);
}

static bool dir_is_empty_at(int dirfd)
{
        struct dirent *de;
        bool empty = true;
        DIR *d = opendir_at(dirfd);

        if (!d)
                return false;
        while (empty && (de = readdir(d)))
                empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
        closedir(d);
        return empty;
}

int spool_open(struct config *cfg, struct dict *unserved, struct spool **ret)
{
        struct spool *sp;
        int r;

        sp = calloc(1, sizeof(*sp));
        if (!sp)
                return -ENOMEM;
        sp->root_fd = sp->lock_fd = -1;
        for (int i = 0; i < _SD_MAX; i++)
                sp->fd[i] = -1;
        dict_init(&sp->leaving, sizeof(struct leaving_entry));
        dict_init(&sp->spent.skipped, 0);
        sp->cfg = cfg;
        sp->st.started_usec = hd_now_usec();
        r = open_dir_at(AT_FDCWD, cfg->spool_dir, 0750, &sp->root_fd, NULL);
        if (r < 0) {
                log_error_errno(r, "Cannot open spool '%s'", cfg->spool_dir);
                goto fail;
        }
        r = lock_open(sp->root_fd, &sp->lock_fd);
        if (r < 0) {
                log_error_errno(r, "Cannot open '%s/.lock'", cfg->spool_dir);
                goto fail;
        }
        for (int i = 0; i < _SD_MAX; i++) {
                /* Producers (group members) create files in tmp/ and
                 * handoff/, senders their cancel requests in cancel/;
                 * setgid keeps the spool's group on them, sticky keeps
                 * one producer from deleting another's (the daemon owns
                 * the directory, so it may still move them).  The same
                 * modes as systemd/handoffd.tmpfiles. */
                mode_t m = (i == SD_TMP || i == SD_HANDOFF || i == SD_CANCEL) ? 03770 :
                           (i == SD_SPENT || i == SD_QUOTA) ? 0700 : 0750;
                r = open_dir_at(sp->root_fd, spool_dir_names[i], m, &sp->fd[i], NULL);
                if (r < 0) {
                        log_error_errno(r, "Cannot open '%s/%s'", cfg->spool_dir,
                                        spool_dir_names[i]);
                        goto fail;
                }
        }
        r = agents_open(sp, cfg, unserved);
        if (r < 0)
                goto fail;
        /* What spent/ holds from before: reaped once the loop runs. */
        sp->spent.waiting = !dir_is_empty_at(sp->fd[SD_SPENT]);
        *ret = sp;
        return 0;
fail:
        spool_close(sp);
        return r;
}

int spool_set_config(struct spool *sp, struct config *cfg, struct dict *unserved)
{
        int r = agents_open(sp, cfg, unserved);
        if (r < 0)
                return r;
        sp->cfg = cfg;
        return 0;
}

void spool_close(struct spool *sp)
{
        if (!sp)
                return;
        agents_close(sp);
        for (size_t i = 0; i < sp->later.n; i++)
                close(sp->later.fd[i]);
        for (int i = 0; i < _SD_MAX; i++)
                if (sp->fd[i] >= 0)
                        close(sp->fd[i]);
        if (sp->root_fd >= 0)
                close(sp->root_fd);
        if (sp->lock_fd >= 0) {
                lock_idle(sp->lock_fd);         /* its state is the fd number's */
                close(sp->lock_fd);
        }
        dict_clear(&sp->leaving);
        dict_clear(&sp->spent.skipped);
        free(sp);
}

struct agent_rt *spool_agent(struct spool *sp, const char *name)
{
        if (!name)
                return NULL;
        for (size_t i = 0; i < sp->n_agents; i++)
                if (!strcmp(sp->agents[i].cfg->name, name))
                        return &sp->agents[i];
        return NULL;
}


bool spool_exists_at(int dirfd, const char *name)
{
        struct stat st;

        return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int spool_list(struct spool *sp, enum spool_dir d, json_t *set)
{
        struct dirent *de;
        DIR *dir;

        dir = opendir_at(sp->fd[d]);
        if (!dir)
                return -errno;
        while ((de = readdir(dir)))
                if (de->d_name[0] != '.')
                        json_object_set_new_nocheck(set, de->d_name, json_null());
        closedir(dir);
        return 0;
}


bool spool_id_remembered(struct spool *sp, const char *id)
{
        struct stat st;

        return fstatat(sp->fd[SD_IDS], id, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

bool spool_id_claimed(struct spool *sp, const char *id)
{
        char claimed[NAME_MAX + 1];
        struct stat st;

        if (xsnprintf(claimed, sizeof(claimed), "%s.json", id) < 0)
                return false;
        return fstatat(sp->fd[SD_CLAIMED], claimed, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

bool spool_id_seen(struct spool *sp, const char *id)
{
        return spool_id_remembered(sp, id) || spool_id_claimed(sp, id);
}
