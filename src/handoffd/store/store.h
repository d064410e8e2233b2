/* The spool's storage layer: the one module that changes the spool on
 * disk.  It owns every name and sidecar, link-versus-rename, what is
 * dirty and the sync rounds; the modules above it ask for operations on
 * an item (take it from handoff/, archive it with its outcome, reject it
 * with its reason, write a sidecar) and never move, link or unlink a
 * spool file themselves.  The protocol, each operation's steps and syncs
 * and what a crash between them leaves, is in handoffd(8), "Durability
 * and crash windows".
 *
 *   store.c       what is dirty, the sync rounds, the names that leave
 *                 handoff/ once their other link is synced, spent/
 *   store_move.c  the moves: take, archive, reject, and what a power cut
 *                 leaves beside one
 *   store_side.c  sidecars, temp names, ids/, the agents' directories
 *   store_doc.c   the sidecars' documents as structs (store_doc.h): their
 *                 keys are spelled there alone
 *   store_outbox.c outbox/: an item's copy, the take's note of the
 *                 producer's file, the archive that carries it to ids/
 *
 * Each returns 0 or -errno, the outcome through a pointer. */
#ifndef HD_STORE_H
#define HD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "spool.h"

struct agent_rt;

/* dir changed (a name made or removed in it): synced by the next
 * store_flush(), in its round. */
void store_dirty(struct spool *sp, enum spool_dir dir);
/* The same for an agent's handoffs/ (synced with round 0). */
void store_dirty_agent(struct agent_rt *a);

/* fsync every dirty directory, in rounds: what a move goes to before
 * what it leaves (tmp/, archive/, rejected/, ids/, spent/ ... and the
 * agents' handoffs/; then claimed/ and outbox/; then handoff/, after the
 * names that wait for their other link's sync have left it).  A failed
 * fsync stays dirty, holds the rounds after it, and is tried again with
 * back-off (1 s doubling to 60 s), logged once when it first fails and
 * once when it succeeds again.  0 or the first -errno. */
int store_flush(struct spool *sp);
/* fd, a file just written in dir unsynced, is synced by the next
 * store_flush() before any directory (fsync_many_at(): the files of a
 * loop turn share the device's flushes, not one fsync each inline); fd is
 * taken over.  The caller flushes in the same loop turn, before anything
 * outside the spool (an ack, a publish) relies on the file.  With fsync
 * off, or SPOOL_LATER_MAX waiting, it is synced now.  fd -1: nothing.
 * 0 or -errno (a sync done now failed). */
int store_sync_later(struct spool *sp, enum spool_dir dir, int fd);
/* dir synced now (fsync on), after the dirty directories that moves out
 * of it go to: a sync of claimed/ never makes a move's removal durable
 * before its arrival.  0 or -errno. */
int store_sync_dir(struct spool *sp, enum spool_dir dir);

/* Is handoff/name (st) an item a move took already, whose name leaves
 * handoff/ at the next store_flush()? */
bool store_leaving(struct spool *sp, const char *name, const struct stat *st);
/* How many such names wait. */
size_t store_leaving_count(const struct spool *sp);

/* Remove files from spent/ (producers' files of claims, moved there by
 * store_drop_source()) for about budget_usec: 0 with *ret_more true when
 * some are left, false when spent/ is empty but for what cannot be
 * removed (skipped, logged once); -errno when spent/ cannot be listed. */
int store_reap_spent(struct spool *sp, int64_t budget_usec, bool *ret_more);

/* Remove files from spent/ (producers' files of claims, moved there by
 * store_drop_source()) for about budget_usec: 0 with *ret_more true when
 * some are left, false when spent/ is empty but for what cannot be
 * removed (skipped, logged once); -errno when spent/ cannot be listed. */
int store_reap_spent(struct spool *sp, int64_t budget_usec, bool *ret_more);

/* handoff/NAME (a file with more than one link) is one inode with a
 * link the daemon made, where it made it: spent/INODE (a claim's file),
 * rejected/NAME or NAME~N (a rejection), or a file the daemon keeps
 * already, whose other names these are (spool_kept): the handoff/ name
 * goes (the other link synced first with fsync = yes); a power cut's
 * leftover logged as such, a file's further names with one line for the
 * lot.  Nowhere else is looked at: a hard-link flood must cost a few
 * look-ups a name, not a listing.  True when it went. */
bool store_drop_claim_leftover(struct spool *sp, const char *name);
/* The same for the places named by the handoff's id: outbox/<id>.json,
 * and an earlier version's claimed/<id>.json. */
bool store_drop_id_leftover(struct spool *sp, const char *name, const char *id);
/* A name in dirfd (not a dotfile) of a's inode, into found: name itself
 * when given and it is one (one look), else the first a listing finds
 * (outbox.c at start; never per handoff/ name). */
bool store_find_link(int dirfd, const char *name, const struct stat *a, char *found, size_t n);
/* An earlier version's item whose claimed/<id>.json and archive/<the
 * marker's archive_as> are one inode, because a power cut came before
 * both directories of its archiving were synced.  The archive stands;
 * the claimed/ name and the marker are removed.  True when they were. */
bool store_drop_archived_leftover(struct spool *sp, const char *id);
/* in/NAME (claimed/<id>.json) has a second link in tmp/: a producer's
 * temp name that a power cut kept beside the rename the daemon then
 * claimed (the producer's tmp/ was synced by another producer, its
 * handoff/ not).  The tmp/ one is removed.  True when it was. */
bool store_drop_tmp_twin(struct spool *sp, enum spool_dir in, const char *name);

/* Move handoff/name to rejected/ with its reason file, if the name still
 * holds was (NULL: anything) and is not a directory.  0 with *ret (may
 * be NULL): IO_REJECTED; IO_GONE if was has left the name or another
 * daemon rejected it; IO_BUSY if another daemon is rejecting it (it holds
 * the inode's lock).  -EISDIR for a directory, which stays in handoff/;
 * other -errno. */
int store_reject(struct spool *sp, const char *name, const struct spool_ino *was,
                 hd_reason reason, const char *detail, const char *handoff_id, int64_t now,
                 enum item_outcome *ret);
/* dir/src (outbox/) archived: moved to archive/ under the first free name
 * of layout_archive_name() for (at_s, from, to, id), its .outcome (buf)
 * written, and synced with fsync on, before the move; a name taken, or
 * taken by a racing mover, is passed over.  The name in name.  0 or
 * -errno (-EEXIST: no name free). */
int store_archive_from(struct spool *sp, enum spool_dir dir, const char *src, int64_t at_s,
                       const char *from, const char *to, const char *id, const char *buf,
                       size_t len, char *name, size_t n);
/* The same from another state directory (outbox/); was: for handoff/. */
int store_reject_from(struct spool *sp, enum spool_dir from, const char *name,
                      const struct spool_ino *was, hd_reason reason, const char *detail,
                      const char *handoff_id, int64_t now, enum item_outcome *ret);
/* The same for claimed/<handoff_id>.json. */
int store_reject_claimed(struct spool *sp, const char *handoff_id, hd_reason reason,
                         const char *detail, int64_t now, enum item_outcome *ret);

/* Remember handoff_id in ids/ (replay memory once it leaves claimed/). */
int store_id_mark(struct spool *sp, const char *handoff_id);
/* Is st the producer's file that ids/<id> names (an outbox item's take
 * left it in handoff/: store_outbox_archive()), unchanged since, and its
 * item archived? */
bool store_id_source_is(struct spool *sp, const char *handoff_id, const struct stat *st);
/* Is ids/<id> an archive's mark: empty, or the note of an item archived
 * as relayed ("src DEV INO" and "archived")?  Its stat in *m. */
bool store_id_archived(struct spool *sp, const char *handoff_id, struct stat *m);

/* Move handoff/name to directory `to` as dst (a claim, a rejection, to
 * outbox/): -EEXIST, -ENOENT (another took it) as a rename.  What
 * arrives must be was (NULL: any file) and no directory, or it is put
 * back: -ENOENT (was has left the name), -EISDIR (was is a directory).  With fsync
 * = yes the item is linked into `to` and leaves handoff/ only in
 * store_flush(), once `to` is synced: anyone may sync handoff/ at any
 * moment (handoffctl submit does, for its own file), and a rename's
 * removal from handoff/ made durable so before its destination was is
 * the item lost in a power cut.  A rename when no link can be made
 * (fs.protected_hardlinks and a producer's file the daemon may not
 * write, a file system without links). */
int store_take(struct spool *sp, const char *name, const struct spool_ino *was,
                   enum spool_dir to, const char *dst);
/* handoff/name, the producer's file (dev, ino), is claimed: its
 * handoff is in the daemon's record.  It leaves now, or with fsync = yes
 * in store_flush() once claimed/ is synced, and only while the name is
 * still that file.  0; -ENOENT when it left now and the name no longer
 * held that file (with fsync = yes the check comes later: 0). */
int store_drop_source(struct spool *sp, const char *name, dev_t dev, ino_t ino);
/* dir/name (a sidecar: .outcome, .reason, .result, the A2A task record)
 * written whole under a temp name and renamed in, the file synced first
 * with fsync = yes.  0 or -errno. */
int store_side_write(struct spool *sp, enum spool_dir dir, const char *name, const void *buf,
                     size_t len);
/* The same, the file synced by the next store_flush() with the others of
 * the loop turn (store_sync_later()), before any directory: as durable
 * before its name is as store_side_write()'s. */
int store_side_write_later(struct spool *sp, enum spool_dir dir, const char *name,
                           const void *buf, size_t len);
/* A note: dir/name written in place (no temp name, no rename; one there
 * already is replaced), mode 0640 as the umask leaves it, synced as
 * store_side_write_later()'s.  For a few bytes in one write whose reader
 * takes an empty or short file for none (the take's outbox/.<id>.src). */
int store_note_write_later(struct spool *sp, enum spool_dir dir, const char *name,
                           const void *buf, size_t len);
/* dir/from, a sidecar, renamed to to (an item's name found after its
 * sidecar was written).  0 or -errno. */
int store_side_rename(struct spool *sp, enum spool_dir dir, const char *from, const char *to);
/* An agent's handoffs/ (store_side.c).  name written whole, never over
 * a name there (-EEXIST), the file synced first with sync and fsync =
 * yes; with ret_st, the file's stat as written (one fstat more; zeroes
 * if that fails); with ret_fd, its descriptor, for the caller to close
 * (else closed here, and a failing close fails the write). */
int store_boot_write(struct spool *sp, struct agent_rt *a, const char *name, const void *buf,
                     size_t len, bool sync, struct stat *ret_st, int *ret_fd);
/* name removed, or renamed to `to` (a bootstrap taken as a consumer
 * takes it: .expire.NAME, .cancel.NAME; a publish); 0 or -errno
 * (-ENOENT: it is not there).  Synced in the next store_flush(), or at
 * once by store_boot_sync() (fsync = yes). */
int store_boot_remove(struct spool *sp, struct agent_rt *a, const char *name);
int store_boot_rename(struct spool *sp, struct agent_rt *a, const char *from, const char *to);
int store_boot_sync(struct spool *sp, struct agent_rt *a);
/* The claim (store_move.c): the agent's file src, the daemon's hidden
 * bootstrap built from the verified bytes, linked (or copied, where no
 * link can be made) as claimed/<id>.json, the record; with replace over
 * what is there, in one rename.  0 or -errno (-EEXIST without replace). */
int store_claim(struct spool *sp, struct agent_rt *a, const char *id, const char *src,
                bool replace, size_t max);
/* Publish: .pending.NAME renamed to NAME, the bootstrap its agent sees
 * (after the record is on disk).  0 or -errno. */
int store_publish_bootstrap(struct spool *sp, struct agent_rt *a, const char *pname,
                            const char *bname);
/* claimed/<id>.json archived as archive/name: its outcome sidecar (buf)
 * written first, the id remembered, the relay told the outcome, then the
 * move; marker (an earlier version's claimed/ marker, or NULL) removed
 * after.  *ret_moved false when the item was gone (another daemon
 * archived it).  0 or -errno. */
int store_archive(struct spool *sp, const char *id, const char *name, const char *outcome,
                  const void *buf, size_t len, const char *marker, int64_t now, bool *ret_moved);

/* The agent's own files in her handoffs/.  store_boot_note() writes a
 * note beside them, such as a refused result's; it is not synced, since
 * she may write her file again.  store_boot_drop() removes her file, or
 * a directory she made under a result's name.  0 or -errno. */
int store_boot_note(struct spool *sp, struct agent_rt *a, const char *name, const void *buf,
                    size_t len);
int store_boot_drop(struct spool *sp, struct agent_rt *a, const char *name);

/* quota/ (quota.c's counts, links of an anchor; never synced: recounted
 * after a start), names relative to quota/.  0 or -errno. */
int store_count_link(struct spool *sp, const char *anchor, const char *name);
int store_count_remove(struct spool *sp, const char *name);

/* cancel/ (the senders' requests): name answered, renamed to answer
 * (NULL: removed unanswered); a name nobody took forgotten (dir: a
 * directory a sender made).  0 or -errno. */
int store_cancel_answer(struct spool *sp, const char *name, const char *answer);
int store_cancel_forget(struct spool *sp, const char *name, bool dir);

/* Retention: dir/name (an archived or rejected item, a sidecar) pruned;
 * no sync owed (one a power cut brings back is pruned again).  0 or
 * -errno. */
int store_prune(struct spool *sp, enum spool_dir dir, const char *name);

/* The relay's inbound: write tmp/PREFIX.NAME.RAND (synced with fsync =
 * yes) and rename it to handoff/NAME.  Intake then verifies it like any
 * producer's file.  1 when written, 0 when NAME is there already, or
 * -errno. */
int store_put_handoff(struct spool *sp, const char *prefix, const char *name, const void *data,
                      size_t len);

/* The relay's receipts/ (its fd): the journal written whole over name
 * (the file and the directory synced with sync), and a name there
 * removed (dir: a directory).  0 or -errno. */
int store_journal_replace(int dir_fd, const char *name, const void *data, size_t len, bool sync);
int store_journal_remove(int dir_fd, const char *name, bool dir);

/* At start: the daemon's own temp files (".NAME.XXXXXX" of write_atomic())
 * a crash left in claimed/, archive/, rejected/, ids/, baton/ and the
 * agents' handoffs/; sole false (another daemon runs on the spool): only
 * those a minute old. */
void store_remove_temps(struct spool *sp, bool sole);
/* intake.c's burst sync of the agents' handoffs/ (with the names it
 * made): true when a's was dirty, and it is no longer. */
bool store_agent_take_dirty(struct agent_rt *a);

/* Remove dir/name, a file of the daemon's (a marker, a sidecar, what
 * retention or a power cut's recovery removes).  0 or -errno. */
int store_remove(struct spool *sp, enum spool_dir dir, const char *name);

/* outbox/<id>.json's documents are at most this big. */
#define STORE_OUTBOX_MAX(sp) (2 * (sp)->cfg->max_file_size + 65536)

/* Take handoff/name into outbox/ as dst, for a remote agent.  buf holds
 * the canonical bytes of doc, which verified.  The name must still hold
 * was, and a regular file.  The take's note of that file is written
 * first, then the copy, never over an existing name.  The producer's file
 * leaves handoff/ once outbox/ is synced.
 *
 * 0 on success.  -EEXIST if dst holds another copy.  -ENOENT if the name
 * no longer holds was, or (with *ret_leftover) if dst is this take's own
 * copy left by a crash: then the producer's file goes as its leftover.
 * -EISDIR, or other -errno. */
int store_outbox_take(struct spool *sp, const char *name, const struct stat *was,
                      const char *handoff_id, const json_t *doc, const char *buf, size_t len,
                      const char *dst, bool *ret_leftover);
/* outbox/name parsed (within STORE_OUTBOX_MAX) into *ret, and when it
 * entered outbox/ (its ctime; now when that cannot be read). */
int store_outbox_load(struct spool *sp, const char *name, int64_t now, json_t **ret,
                      hd_verdict *vd, int64_t *ret_at);
/* outbox/<id>.json archived (as store_archive_from(), buf its .outcome),
 * its id remembered in ids/ with the take's note of the producer's file
 * (src: the file it names, as the take saw it; NULL: the note is read),
 * and the note removed. */
int store_outbox_archive(struct spool *sp, const char *handoff_id, int64_t at_s,
                         const char *from, const char *to, const char *buf, size_t len,
                         const struct spool_ino *src, char *name, size_t n);
/* The take's notes whose item is no longer in outbox/: removed. */
void store_outbox_sweep(struct spool *sp);

#endif
