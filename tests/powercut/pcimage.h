/* The image of powercutfs (powercutfs.c's header gives the model): what a
 * disk would hold after a power cut, kept in memory beside the backing
 * directory.  One record per inode; a sync copies what it makes durable
 * into its record; the cut writes the image beside BACKING and swaps it
 * in.  Called with powercutfs's one lock held (not thread-safe). */
#ifndef PCIMAGE_H
#define PCIMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* BACKING, open and by name; the root directory's record. */
extern int root_fd;
extern char *backing;
extern size_t root_rec;
/* Set once the image is written: every operation fails from then on. */
extern bool cut_done;
/* The counters that reading .powercut gives. */
extern size_t n_recs;
extern unsigned long n_fsync, n_fsyncdir, n_ops;

/* The record of a live inode, made when the image has none yet. */
size_t rec_of(const struct stat *st);
/* A new inode got this number (or will, at rel relative to BACKING):
 * whatever the image holds under the old record stays there, the new file
 * gets a record of its own. */
void live_forget(ino_t ino);
void forget_at(const char *rel);
/* fsync of a file (fd): its bytes and attributes as they are now. */
int sync_file(int fd);
/* fsync of a directory: its entries as they are now; initial (at mount):
 * everything under it, bytes too. */
int sync_dir(int dfd, bool initial);
/* The cut: the image written beside BACKING and swapped in; cut_done. */
int do_cut(void);

#endif
