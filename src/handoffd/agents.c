/* An agent's directories (see agents.h): opened, checked and, when
 * they are not safe, the agent taken out of service alone. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "agents.h"
#include "dict.h"
#include "files.h"
#include "log.h"

/* The parts of a POSIX access ACL (the system.posix_acl_access xattr,
 * format of linux/posix_acl_xattr.h) that matter here. */
#define ACL_XATTR_VERSION 2
#define ACL_TAG_GROUP 0x08
#define ACL_TAG_MASK  0x10

struct acl_entry {
        uint16_t tag, perm;
        uint32_t id;
};

/* Does an ACL entry of fd give group gid write access? */
static bool acl_group_writes(int fd, gid_t gid)
{
        unsigned char buf[4 + 64 * sizeof(struct acl_entry)];
        bool named = false, mask = true;
        uint32_t ver;
        ssize_t n;

        n = fgetxattr(fd, "system.posix_acl_access", buf, sizeof(buf));
        if (n < 4)
                return n < 0 && errno == ERANGE;        /* an ACL this big: suspect */
        memcpy(&ver, buf, 4);
        if (le32toh(ver) != ACL_XATTR_VERSION)
                return true;
        for (size_t o = 4; o + sizeof(struct acl_entry) <= (size_t)n; o += sizeof(struct acl_entry)) {
                struct acl_entry e;
                memcpy(&e, buf + o, sizeof(e));
                if (le16toh(e.tag) == ACL_TAG_GROUP && le32toh(e.id) == gid &&
                    (le16toh(e.perm) & 2))
                        named = true;
                if (le16toh(e.tag) == ACL_TAG_MASK && !(le16toh(e.perm) & 2))
                        mask = false;
        }
        return named && mask;
}

/* Only the daemon and the agent may write an agent's state_dir and its
 * handoffs/: anyone else could plant a bootstrap, take one, or swap the
 * directory for a link.  Refused: writable by others, or writable by the
 * spool's shared group (the group of handoff/, which every producer is
 * in), through the mode or a POSIX ACL.  NULL when fine, else why not. */
static const char *agent_dir_unsafe(int fd, gid_t shared)
{
        struct stat st;

        if (fstat(fd, &st) < 0)
                return "cannot be inspected";
        if (st.st_mode & S_IWOTH)
                return "is writable by others";
        if ((st.st_mode & S_IWGRP) && st.st_gid == shared)
                return "is writable by the spool's group";
        if (acl_group_writes(fd, shared))
                return "is writable by the spool's group through an ACL";
        return NULL;
}

/* A handoffs/ made 0700 (in the spool's group) is the daemon's user's
 * alone: is the agent of state_dir (fd) someone else, who then cannot
 * consume?  The config names no user; state_dir does when its owner is
 * not the daemon's user, or when a group that is neither the daemon's nor
 * the spool's may enter it (the agent's group, its setgid bit
 * forgotten).  Otherwise nobody but the daemon's user is named: make
 * run's demo, a first try where everything runs as root.  0 when not,
 * else the uid or gid that names the other into *ret_id, 'u' or 'g'. */
static char agent_dir_other(int fd, gid_t shared, unsigned *ret_id)
{
        struct stat st;

        if (fstat(fd, &st) < 0)
                return 0;
        if (st.st_uid != geteuid()) {
                *ret_id = st.st_uid;
                return 'u';
        }
        if ((st.st_mode & S_IXGRP) && st.st_gid != getegid() && st.st_gid != shared) {
                *ret_id = st.st_gid;
                return 'g';
        }
        return 0;
}

/* A handoffs/ of mode 0700 that the agent of state_dir (fd) cannot use:
 * said once, a warning; else why 0700 is fine, info.  would: handoffd -n,
 * before the start creates it. */
static void agent_say_private(struct agent_rt *a, int fd, gid_t shared, bool would)
{
        const char *dir = a->cfg->state_dir;
        unsigned id = 0;
        char other = agent_dir_other(fd, shared, &id);

        if (!other) {
                if (!would)
                        log_info("Created '%s/handoffs' with mode 0700: agent %s consumes as the "
                                 "daemon's user (nothing of '%s' names another user)",
                                 dir, a->cfg->name, dir);
                return;
        }
        a->warned = true;
        log_warning("%s '%s/handoffs' with mode 0700: agent %s cannot consume from it unless it "
                    "runs as the daemon's user, and '%s' %s %u; give it and its handoffs/ the "
                    "agent's own group, mode 2770 (handoffd(8), AGENTS' DIRECTORIES)",
                    would ? "The start would create" : "Created", dir, a->cfg->name, dir,
                    other == 'u' ? "is owned by uid" : "may be entered by gid", id);
}

void agent_rt_close(struct agent_rt *a)
{
        if (a->state_fd >= 0)
                close(a->state_fd);
        if (a->handoffs_fd >= 0)
                close(a->handoffs_fd);
        a->state_fd = a->handoffs_fd = -1;
}

/* Out of service: log why, keep it for status (struct parts unserved) and -n. */
static int agent_unserved(struct agent_rt *a, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
static int agent_unserved(struct agent_rt *a, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(a->unserved, sizeof(a->unserved), fmt, ap);
        va_end(ap);
        log_error("Not serving agent %s: %s; its handoffs wait in handoff/ until it is "
                  "fixed and handoffd reloads (see handoffd(8))", a->cfg->name, a->unserved);
        agent_rt_close(a);
        return 1;
}

/* handoffd -n run by a user who cannot reach an agent's directory: not
 * the start's verdict (the daemon's user may), a warning; 1, not
 * inspected. */
static int agent_not_inspected(struct agent_rt *a, const char *what)
{
        log_warning("Cannot inspect %s of agent %s as this user (permission denied): run "
                    "handoffd -n as root or as the daemon's user", what, a->cfg->name);
        agent_rt_close(a);
        return 1;
}

/* What became of opening one of a's directories (what: "state_dir 'DIR'"
 * or "'DIR/handoffs'"), r from open_dir_at() or open_dir_look() (not
 * -ENOENT with look, which the caller decides): 0 it is open, else as
 * agent_open() returns. */
static int agent_dir_opened(struct agent_rt *a, const char *what, int r, bool look)
{
        if (look && r == -EACCES)
                return agent_not_inspected(a, what);
        if (r == -ELOOP || r == -ENOTDIR)
                return agent_unserved(a, "%s is a symbolic link or not a directory", what);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return agent_unserved(a, "cannot open %s: %s", what, strerror(-r));
        return 0;
}

/* The directory fd of a (what, as agent_dir_opened() names it) may be
 * written by the daemon and the agent alone: 0, else out of service (1). */
static int agent_dir_safe(struct agent_rt *a, const char *what, int fd, gid_t shared)
{
        const char *why = agent_dir_unsafe(fd, shared);

        if (why)
                return agent_unserved(a, "refusing %s: it %s (only the daemon and the agent "
                                      "may write it)", what, why);
        return 0;
}

/* Open one agent's state_dir and handoffs/; with look (handoffd -n),
 * only those that exist, creating nothing.  This decides whether the
 * agent is served: 0 it is; 1 it is out of service (a link, no directory
 * where one belongs, one others may write, one we cannot open: its
 * handoffs wait in handoff/ as for an agent served elsewhere, the other
 * agents and the daemon go on), the reason in a->unserved, or with look
 * this user cannot reach it; -ENOMEM. */
static int agent_open(struct agent_rt *a, gid_t shared, bool look)
{
        const char *dir = a->cfg->state_dir;
        struct stat st;
        bool created = false, sd_created = false;
        char what[PATH_MAX + 32];
        int r;

        a->unserved[0] = '\0';
        a->warned = false;
        r = look ? open_dir_look(AT_FDCWD, dir, &a->state_fd)
                 : open_dir_at(AT_FDCWD, dir, 0750, &a->state_fd, &sd_created);
        if (look && r == -ENOENT)
                return 0;       /* the start creates it */
        snprintf(what, sizeof(what), "state_dir '%s'", dir);
        r = agent_dir_opened(a, what, r, look);
        if (r != 0)
                return r;
        /* Made here in the spool's group (no setgid parent of the
         * agent's own): only the daemon's user can be its agent, and the
         * mode says so. */
        if (sd_created && fstat(a->state_fd, &st) == 0 && st.st_gid == shared &&
            fchmod(a->state_fd, 0700) < 0)
                return agent_unserved(a, "cannot set the mode of '%s': %s", dir, strerror(errno));
        r = agent_dir_safe(a, what, a->state_fd, shared);
        if (r != 0)
                return r;
        /* Created here, it can only be the agent's if it inherits a group
         * other than the spool's (setgid state_dir of the agent's group):
         * else it stays the daemon's until set up (handoffd(8)). */
        r = look ? open_dir_look(a->state_fd, "handoffs", &a->handoffs_fd)
                 : open_dir_at(a->state_fd, "handoffs", 0700, &a->handoffs_fd, &created);
        if (look && r == -ENOENT) {
                /* the start creates it in state_dir's group if setgid,
                 * else in ours (open_dir_at()) */
                if (fstat(a->state_fd, &st) == 0 &&
                    ((st.st_mode & S_ISGID) ? st.st_gid : getegid()) == shared)
                        agent_say_private(a, a->state_fd, shared, true);
                return 0;
        }
        snprintf(what, sizeof(what), "'%s/handoffs'", dir);
        r = agent_dir_opened(a, what, r, look);
        if (r != 0)
                return r;
        if (created && fstat(a->handoffs_fd, &st) == 0) {
                if (st.st_gid != shared && fchmod(a->handoffs_fd, 02770) < 0)
                        return agent_unserved(a, "cannot set the mode of '%s/handoffs': %s",
                                              dir, strerror(errno));
                if (st.st_gid == shared)
                        agent_say_private(a, a->state_fd, shared, false);
        }
        return agent_dir_safe(a, what, a->handoffs_fd, shared);
}

/* Open every agent of cfg (with look, only inspect them).  An agent out
 * of service (agent_open()) is left out and, with unserved, remembered
 * there (name -> why); *ret_count counts each kind.  Only a failure of
 * the daemon itself (-ENOMEM) fails the whole call.  The one place this
 * is decided: spool_open(), a reload and handoffd -n (spool_check()) all
 * follow it. */
int agents_open_all(struct config *cfg, gid_t shared, bool look, struct dict *unserved,
                    struct agent_rt **ret, size_t *ret_n, struct agents_count *ret_count)
{
        struct agent_rt *a = calloc(cfg->n_agents ? cfg->n_agents : 1, sizeof(*a));
        struct agents_count count = { 0 };
        size_t n = 0;
        int r = 0;

        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < cfg->n_agents; i++) {
                a[n].cfg = &cfg->agents[i];
                a[n].state_fd = a[n].handoffs_fd = a[n].wd = -1;
                r = agent_open(&a[n], shared, look);
                if (r > 0) {
                        if (a[n].unserved[0]) {
                                struct unserved_entry *u = NULL;
                                if (unserved &&
                                    !(u = dict_put(unserved, a[n].cfg->name, NULL))) {
                                        r = -ENOMEM;
                                        break;
                                }
                                if (u)
                                        snprintf(u->why, sizeof(u->why), "%s", a[n].unserved);
                                count.unserved++;
                        } else {
                                count.warnings++;
                        }
                        r = 0;
                        continue;
                }
                n++;
                if (r < 0)
                        break;
                count.served++;
                count.warnings += a[n - 1].warned;
        }
        if (r < 0 || look) {
                for (size_t i = 0; i < n; i++)
                        agent_rt_close(&a[i]);
                free(a);
                a = NULL;
                n = 0;
        }
        if (r < 0)
                return r;
        *ret = a;
        *ret_n = n;
        if (ret_count)
                *ret_count = count;
        return 0;
}
