/* The names in handoff/ waiting for a decision: a queue per owner of the
 * file, the owners taking turns; see pending.c. */
#ifndef HD_PENDING_H
#define HD_PENDING_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Names an owner may have queued; more are left for a later rescan
 * (pending_left_out()). */
#define PENDING_OWNER_MAX 1024

/* Names queued with their file open (pending_add_look()), at most; the
 * daemon sets its own bound below this (pending_hold_max()). */
#define PENDING_LOOKS_MAX PENDING_OWNER_MAX

struct pending;
struct pending_owner;

/* The file a name held when it was queued, opened then (fd; -1: not
 * opened), and its fstat: the look that told its owner is its decision's
 * open too (decide.c takes the fd). */
struct pending_look {
        int fd;
        struct stat st;
};

/* A name taken to be decided: pending_put_back() or pending_done(). */
struct pending_name {
        TAILQ_ENTRY(pending_name) link;
        struct pending_owner *owner;
        struct pending_look look;
        bool held;              /* counted in the names queued with a look */
        char name[];
};

int pending_new(struct pending **ret);
void pending_free(struct pending *p);

/* Names queued (not those taken and not yet done). */
size_t pending_size(const struct pending *p);

/* The sender a file of handoff-hubd's names (PENDING_SENDER_XATTR, set
 * by the hub on the files it drops for a token), at most this long. */
#define PENDING_SENDER_XATTR "user.handoff.sender"
#define PENDING_SENDER_MAX 64

/* The hub's user: the owner of [hub] state_dir (statedir; NULL: the
 * default), looked at again at each rescan; (uid_t)-1 when none. */
void pending_hub_user(struct pending *p, const char *statedir);
/* The sender of dirfd/name when uid is the hub's and it names one, into
 * sender (PENDING_SENDER_MAX + 1 bytes); "" otherwise. */
void pending_sender(const struct pending *p, int dirfd, const char *name, uid_t uid,
                    char *sender);
/* The same for the file open as fd. */
void pending_sender_fd(const struct pending *p, int fd, uid_t uid, char *sender);

/* name, a file in handoff/ of owner uid (and, for the hub's files, of
 * sender: "" for every other), at the end of its owner's queue; an owner
 * that had none queued has the next turn.  0 (also when it is queued
 * already); -ENOBUFS (its owner has PENDING_OWNER_MAX queued) or -ENOMEM:
 * it is left out (pending_left_out()). */
int pending_add(struct pending *p, const char *name, uid_t uid, const char *sender);

/* The same with the file open (look: its fd and fstat), which the queue
 * owns from now on: closed when the name is done, or at once when it is
 * left out or queued already.  A name queued again (a new event for it:
 * written, renamed over, its mode changed) loses its look: its decision
 * opens it anew.  0, -ENOBUFS or -ENOMEM as pending_add(). */
int pending_add_look(struct pending *p, const char *name, uid_t uid, const char *sender,
                     const struct pending_look *look);

/* An event names it again: true if it is queued already, and then it
 * has lost its look (its decision opens it anew); false if not queued. */
bool pending_again(struct pending *p, const char *name);
/* Written and closed in place (IN_CLOSE_WRITE): true if it is queued
 * already, and then its look stays with the file's stat read anew (a
 * move onto the name comes as IN_MOVED_TO, pending_again()); false if
 * not queued. */
bool pending_rewritten(struct pending *p, const char *name);
/* Is it queued (or taken)?  Its look stays. */
bool pending_queued(const struct pending *p, const char *name);

/* Names may be queued with a look while fewer than max are (0: none;
 * at most PENDING_LOOKS_MAX): each holds a descriptor. */
void pending_hold_max(struct pending *p, size_t max);
bool pending_may_hold(const struct pending *p);

/* Up to max names into out, one of each owner in turn (an owner whose
 * name is taken goes to the end of the turns). */
size_t pending_take(struct pending *p, struct pending_name **out, size_t max);

/* A taken name not decided after all: first in its owner's queue, and its
 * owner's turn next.  Names of one take put back last first keep their
 * order and their owners' turns. */
void pending_put_back(struct pending *p, struct pending_name *n);

/* A taken name decided: forgotten (queued again by pending_add()). */
void pending_done(struct pending *p, struct pending_name *n);

/* Was a name left out (-ENOBUFS) since the last rescan began?  Then
 * another one finds it. */
bool pending_left_out(const struct pending *p);
/* A rescan of handoff/ begins: it sees what was left out until now. */
void pending_rescan(struct pending *p);

#endif
