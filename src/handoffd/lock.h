/* Coordination between handoffd processes on one spool: byte-range locks
 * (open file description locks, F_OFD_SETLK) on one file, SPOOL/.lock,
 * mode 0600, that only the daemon's user can open.  No lock is ever taken
 * on a file or directory a group member can open (they could hold it and
 * freeze or starve the daemon), none ever blocks, and no file is created
 * per item. */
#ifndef HD_LOCK_H
#define HD_LOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Byte 0: shared by every running daemon; exclusive means "alone". */
#define LOCK_OFF_RUNNING 0
/* Byte 1: Baton sessions in baton/ (one patch applied at a time). */
#define LOCK_OFF_BATON   1
/* Byte 2: the relay, held by the one daemon on the spool that runs it:
 * receipts/journal is one daemon's (a start rewrites it whole). */
#define LOCK_OFF_RELAY   2

/* Open (create) dirfd/.lock: a regular file of ours, mode 0600. */
int lock_open(int dirfd, int *ret_fd);

/* The byte standing for a handoff_id (claim to archive), or for a file of
 * handoff/ being decided (its inode).  Two keys may share a byte: that
 * only makes one wait for the other. */
uint64_t lock_off_id(const char *handoff_id);
uint64_t lock_off_inode(dev_t dev, ino_t ino);
/* The byte of an agent's inbox count (quota.c): held while one claim is
 * checked against the limits and counted. */
uint64_t lock_off_quota(const char *agent);

/* Take byte off, exclusive or shared, without waiting: 0, -EAGAIN when
 * another daemon holds it, other -errno. */
int lock_try(int fd, uint64_t off, bool exclusive);
void lock_release(int fd, uint64_t off);
/* Take an id's byte (lock_off_id()) exclusively for an intake batch: 0,
 * -EAGAIN when another daemon holds it, other -errno.  A daemon alone on
 * the spool (no other holds LOCK_OFF_RUNNING) takes every id byte at once,
 * with its first claim of a batch, and keeps them over the batches of a
 * burst, until lock_idle(): the other claims, and any lock_try() or
 * lock_release() of an id byte meanwhile, then need no system call.  The
 * first claim of each batch looks whether it is still alone (one
 * F_OFD_GETLK) and, when not, lets them go.  A daemon that starts
 * meanwhile finds each id byte held until then, as it would find the one
 * being claimed.  With another daemon about, each id alone. */
int lock_try_claim(int fd, uint64_t off);
/* The end of an intake batch, the one thing that holds id bytes across
 * calls: those it took one by one (took) go in one call (a burst of N
 * claims releases with 1 fcntl, not N); the whole region, taken while
 * alone, stays. */
void lock_batch_end(int fd, bool took);
/* Whether the whole id region is held, and letting go of it: the daemon
 * does so IDS_KEEP_MS after a batch took it (daemon.c), and before the
 * lock fd is closed. */
bool lock_ids_held(int fd);
void lock_idle(int fd);

#endif
