/* Sidecars and small files of the daemon's own beside the items: the
 * .outcome, .reason and .result files, the A2A task record, the replay
 * memory ids/; each written under a temp name and renamed over
 * (write_atomic()), synced with fsync = yes before anything that names
 * it.  Steps: handoffd(8), "Durability and crash windows". */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "files.h"
#include "store.h"
#include "store_int.h"

int store_side_write(struct spool *sp, enum spool_dir dir, const char *name, const void *buf,
                     size_t len)
{
        int r = write_atomic(sp->fd[dir], name, buf, len, 0640,
                             sp->cfg->fsync ? WRITE_SYNC_FILE : 0);

        if (r == 0)
                store_dirty(sp, dir);
        return r;
}

int store_id_mark(struct spool *sp, const char *id)
{
        int fd;

        if (!id || !hd_id_valid(id))
                return 0;
        fd = openat(sp->fd[SD_IDS], id,
                    O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0640);
        if (fd < 0)
                return -errno;
        close(fd);
        store_dirty(sp, SD_IDS);
        return 0;
}
