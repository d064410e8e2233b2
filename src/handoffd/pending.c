/* The names in handoff/ waiting for a decision (watch.c queues them from
 * inotify and the rescans, and takes a chunk a loop turn), a queue per
 * owner of the file, the owners taking turns.  A file's owner (st_uid) is
 * the one thing about it that a member of the spool's group cannot
 * choose: first in, first out, one member's flood of junk delayed every
 * other sender's handoffs by the whole flood; in turns, by one file.  No
 * key buys a turn: the owner is known before the file is read.
 *
 * Every file handoff-hubd drops is the hub's user's: its tokens shared one
 * turn, and one token's flood delayed every other token's handoffs.  The
 * hub names the token's agent in an extended attribute of each file it
 * drops (user.handoff.sender); an owner alone may set one on a file of
 * its mode, so it is trusted for the hub's user's files only, and there
 * the turn is the owner's and the sender's.  The hub's user is the owner
 * of [hub] state_dir, the directory the hub makes its own.
 *
 * An owner holds at most PENDING_OWNER_MAX names: what does not fit stays
 * in handoff/ and a later rescan brings it (pending_left_out()), so a
 * flood costs memory for its first names only, and inotify is always
 * read (another sender's name is never stuck behind the flood's events
 * in the kernel's queue).
 *
 * The look that tells a name's owner may be its decision's open: the
 * file opened (as decide.c opens it) and its fstat, kept with the name
 * (pending_add_look()), so that it costs no system call of its own.  Each
 * such name holds a descriptor: at most held_max of them are queued so
 * (the daemon's bound, below its descriptor limit); the others are
 * looked at with an fstatat, and opened when decided.  A name that an
 * event names again loses its look: what its decision reads is then what
 * the name holds by then, as for a name queued without one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "config.h"

#include "dict.h"
#include "pending.h"

struct pending_owner {
        uid_t uid;
        char sender[PENDING_SENDER_MAX + 1];    /* "" but for the hub's files */
        size_t queued;          /* names in q */
        size_t refs;            /* names in q and taken */
        TAILQ_HEAD(, pending_name) q;
        TAILQ_ENTRY(pending_owner) turn;        /* while queued > 0 */
        TAILQ_ENTRY(pending_owner) all;
};

struct pending {
        struct dict names;      /* every name queued or taken: its pending_name */
        size_t queued;
        size_t held, held_max;  /* names with a look (pending_add_look()), their bound */
        bool left_out;
        TAILQ_HEAD(, pending_owner) turns;      /* the next turn first */
        TAILQ_HEAD(, pending_owner) owners;     /* with a name queued or taken */
        uid_t hub_uid;                          /* (uid_t)-1: none */
};

int pending_new(struct pending **ret)
{
        struct pending *p = calloc(1, sizeof(*p));

        if (!p)
                return -ENOMEM;
        dict_init(&p->names, sizeof(struct pending_name *));
        p->hub_uid = (uid_t)-1;
        TAILQ_INIT(&p->turns);
        TAILQ_INIT(&p->owners);
        *ret = p;
        return 0;
}

void pending_free(struct pending *p)
{
        struct pending_owner *o;
        struct pending_name *n;

        if (!p)
                return;
        /* Taken names are their taker's to give back first. */
        while ((o = TAILQ_FIRST(&p->owners))) {
                while ((n = TAILQ_FIRST(&o->q))) {
                        TAILQ_REMOVE(&o->q, n, link);
                        if (n->look.fd >= 0)
                                close(n->look.fd);
                        free(n);
                }
                TAILQ_REMOVE(&p->owners, o, all);
                free(o);
        }
        dict_clear(&p->names);
        free(p);
}

size_t pending_size(const struct pending *p)
{
        return p->queued;
}

void pending_hub_user(struct pending *p, const char *statedir)
{
        struct stat st;

        p->hub_uid = stat(statedir ? statedir : CONFIG_HUB_STATE_DIR_DEFAULT, &st) == 0 &&
                     S_ISDIR(st.st_mode) ? st.st_uid : (uid_t)-1;
}

/* The value read into sender (n bytes, or n < 0: none) as a name,
 * nothing else: it is compared, never printed. */
static void sender_set(char *sender, ssize_t n)
{
        sender[n > 0 ? n : 0] = '\0';
        if (strlen(sender) != (size_t)(n > 0 ? n : 0))
                sender[0] = '\0';
}

void pending_sender(const struct pending *p, int dirfd, const char *name, uid_t uid,
                    char *sender)
{
        char path[64 + PENDING_SENDER_MAX + 256];

        sender[0] = '\0';
        if (uid == (uid_t)-1 || uid != p->hub_uid ||
            snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dirfd, name) >= (int)sizeof(path))
                return;
        sender_set(sender, lgetxattr(path, PENDING_SENDER_XATTR, sender, PENDING_SENDER_MAX));
}

void pending_sender_fd(const struct pending *p, int fd, uid_t uid, char *sender)
{
        sender[0] = '\0';
        if (uid == (uid_t)-1 || uid != p->hub_uid)
                return;
        sender_set(sender, fgetxattr(fd, PENDING_SENDER_XATTR, sender, PENDING_SENDER_MAX));
}

static struct pending_owner *owner_get(struct pending *p, uid_t uid, const char *sender)
{
        struct pending_owner *o;

        TAILQ_FOREACH(o, &p->owners, all)
                if (o->uid == uid && !strcmp(o->sender, sender))
                        return o;
        o = calloc(1, sizeof(*o));
        if (!o)
                return NULL;
        o->uid = uid;
        snprintf(o->sender, sizeof(o->sender), "%s", sender);
        TAILQ_INIT(&o->q);
        TAILQ_INSERT_TAIL(&p->owners, o, all);
        return o;
}

static void owner_unref(struct pending *p, struct pending_owner *o)
{
        if (--o->refs > 0)
                return;
        TAILQ_REMOVE(&p->owners, o, all);
        free(o);
}

/* o has a name queued again: its turn is the next one.  A newcomer waits
 * for the file being decided, not for a round of everyone's. */
static void turn_first(struct pending *p, struct pending_owner *o)
{
        if (o->queued > 0)
                TAILQ_REMOVE(&p->turns, o, turn);
        TAILQ_INSERT_HEAD(&p->turns, o, turn);
}

/* n's look goes: closed, no longer counted. */
static void look_drop(struct pending *p, struct pending_name *n)
{
        if (n->look.fd >= 0)
                close(n->look.fd);
        n->look.fd = -1;
        if (n->held)
                p->held--;
        n->held = false;
}

static int add(struct pending *p, const char *name, uid_t uid, const char *sender,
               const struct pending_look *look)
{
        struct pending_owner *o;
        struct pending_name *n, **e;
        size_t l = strlen(name);

        e = dict_get(&p->names, name);
        if (e) {
                /* Queued already, and the name has changed since: the
                 * decision opens it anew. */
                look_drop(p, *e);
                if (look && look->fd >= 0)
                        close(look->fd);
                return 0;
        }
        o = owner_get(p, uid, sender ? sender : "");
        if (!o)
                goto nomem;
        if (o->queued >= PENDING_OWNER_MAX) {
                p->left_out = true;
                if (look && look->fd >= 0)
                        close(look->fd);
                return -ENOBUFS;
        }
        n = malloc(sizeof(*n) + l + 1);
        if (!n)
                goto nomem;
        memcpy(n->name, name, l + 1);
        n->owner = o;
        n->look.fd = -1;
        n->held = false;
        e = dict_put(&p->names, name, NULL);
        if (!e) {
                free(n);
                goto nomem;
        }
        *e = n;
        if (look && look->fd >= 0) {
                n->look = *look;
                n->held = true;
                p->held++;
        }
        if (o->queued == 0)
                turn_first(p, o);
        TAILQ_INSERT_TAIL(&o->q, n, link);
        o->queued++;
        o->refs++;
        p->queued++;
        return 0;
nomem:
        if (o && o->refs == 0) {
                TAILQ_REMOVE(&p->owners, o, all);
                free(o);
        }
        if (look && look->fd >= 0)
                close(look->fd);
        p->left_out = true;
        return -ENOMEM;
}

int pending_add(struct pending *p, const char *name, uid_t uid, const char *sender)
{
        return add(p, name, uid, sender, NULL);
}

int pending_add_look(struct pending *p, const char *name, uid_t uid, const char *sender,
                     const struct pending_look *look)
{
        return add(p, name, uid, sender, look);
}

bool pending_again(struct pending *p, const char *name)
{
        struct pending_name **e = dict_get(&p->names, name);

        if (!e)
                return false;
        look_drop(p, *e);
        return true;
}

bool pending_rewritten(struct pending *p, const char *name)
{
        struct pending_name **e = dict_get(&p->names, name);

        if (!e)
                return false;
        if ((*e)->look.fd >= 0 && fstat((*e)->look.fd, &(*e)->look.st) < 0)
                look_drop(p, *e);
        return true;
}

bool pending_queued(const struct pending *p, const char *name)
{
        return dict_get(&p->names, name) != NULL;
}

void pending_hold_max(struct pending *p, size_t max)
{
        p->held_max = max < PENDING_LOOKS_MAX ? max : PENDING_LOOKS_MAX;
}

bool pending_may_hold(const struct pending *p)
{
        return p->held < p->held_max;
}

size_t pending_take(struct pending *p, struct pending_name **out, size_t max)
{
        struct pending_owner *o;
        struct pending_name *n;
        size_t k = 0;

        while (k < max && (o = TAILQ_FIRST(&p->turns))) {
                n = TAILQ_FIRST(&o->q);
                TAILQ_REMOVE(&o->q, n, link);
                o->queued--;
                p->queued--;
                TAILQ_REMOVE(&p->turns, o, turn);
                if (o->queued > 0)
                        TAILQ_INSERT_TAIL(&p->turns, o, turn);
                out[k++] = n;
        }
        return k;
}

void pending_put_back(struct pending *p, struct pending_name *n)
{
        struct pending_owner *o = n->owner;

        turn_first(p, o);
        TAILQ_INSERT_HEAD(&o->q, n, link);
        o->queued++;
        p->queued++;
}

void pending_done(struct pending *p, struct pending_name *n)
{
        look_drop(p, n);
        dict_del(&p->names, n->name);
        owner_unref(p, n->owner);
        free(n);
}

bool pending_left_out(const struct pending *p)
{
        return p->left_out;
}

void pending_rescan(struct pending *p)
{
        p->left_out = false;
}
