/* Locks between daemons on one spool; see lock.h.  OFD locks belong to the
 * open file description: every lock of one daemon is its own (re-taking a
 * byte it holds succeeds), and all go when it exits or is killed. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lock.h"
#include "util.h"

#define LOCK_NAME ".lock"
/* Disjoint regions: inodes [2^60, 2^61), ids [2^61, 3 * 2^60), agents' inbox
 * counts [3 * 2^60, 2^62). */
#define REGION_BITS 60

int lock_open(int dirfd, int *ret_fd)
{
        _cleanup_close_ int fd = -1;
        struct stat st;

        fd = openat(dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
                    0600);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
                return -EPERM;
        /* Whoever else can open it can take our bytes. */
        if ((st.st_mode & 077) && fchmod(fd, 0600) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}


uint64_t lock_off_id(const char *id)
{
        uint64_t h = fnv1a(id, strlen(id), FNV_BASIS);
        return (UINT64_C(2) << REGION_BITS) | (h & ((UINT64_C(1) << REGION_BITS) - 1));
}

uint64_t lock_off_quota(const char *agent)
{
        uint64_t h = fnv1a(agent, strlen(agent), FNV_BASIS);
        return (UINT64_C(3) << REGION_BITS) | (h & ((UINT64_C(1) << REGION_BITS) - 1));
}

uint64_t lock_off_inode(dev_t dev, ino_t ino)
{
        uint64_t h = fnv1a(&dev, sizeof(dev), FNV_BASIS);
        h = fnv1a(&ino, sizeof(ino), h);
        return (UINT64_C(1) << REGION_BITS) | (h & ((UINT64_C(1) << REGION_BITS) - 1));
}

#define ID_REGION_START (UINT64_C(2) << REGION_BITS)
#define ID_REGION_LEN   (UINT64_C(1) << REGION_BITS)

/* The whole id region, taken by lock_try_claim() for an intake batch of a
 * daemon alone on its spool, kept over the batches that follow until
 * lock_idle() (daemon.c: IDS_KEEP_MS after it was taken) or the first
 * claim of a batch finds another daemon running.  The daemon is one
 * thread; the state is its one lock fd's. */
static struct {
        int fd;
        bool held;
        bool tried;     /* this batch: not again until lock_batch_end() */
} ids_all = { .fd = -1 };

static bool in_ids(int fd, uint64_t off)
{
        return ids_all.held && ids_all.fd == fd &&
               off >= ID_REGION_START && off - ID_REGION_START < ID_REGION_LEN;
}

static int lock_range(int fd, uint64_t start, uint64_t len, short type)
{
        struct flock fl = {
                .l_type = type,
                .l_whence = SEEK_SET,
                .l_start = (off_t)start,
                .l_len = (off_t)len,
        };

        if (fcntl(fd, F_OFD_SETLK, &fl) < 0)
                return errno == EACCES ? -EAGAIN : -errno;
        return 0;
}

static int lock_set(int fd, uint64_t off, short type)
{
        return lock_range(fd, off, 1, type);
}

int lock_try(int fd, uint64_t off, bool exclusive)
{
        if (in_ids(fd, off))
                return 0;
        return lock_set(fd, off, exclusive ? F_WRLCK : F_RDLCK);
}

void lock_release(int fd, uint64_t off)
{
        /* Held for the batch, which lets go of all of it at its end. */
        if (in_ids(fd, off))
                return;
        lock_set(fd, off, F_UNLCK);
}

/* No other daemon holds its running byte: we could take it exclusively. */
static bool lock_alone(int fd)
{
        struct flock fl = {
                .l_type = F_WRLCK,
                .l_whence = SEEK_SET,
                .l_start = LOCK_OFF_RUNNING,
                .l_len = 1,
        };

        return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK;
}

int lock_try_claim(int fd, uint64_t off)
{
        if (!ids_all.tried) {
                ids_all.tried = true;
                bool alone = lock_alone(fd);
                if (ids_all.held && !alone) {
                        /* another daemon came: each id alone from now */
                        (void) lock_range(fd, ID_REGION_START, ID_REGION_LEN, F_UNLCK);
                        ids_all.held = false;
                } else if (!ids_all.held && alone &&
                           lock_range(fd, ID_REGION_START, ID_REGION_LEN, F_WRLCK) == 0) {
                        ids_all.fd = fd;
                        ids_all.held = true;
                }
        }
        if (in_ids(fd, off))
                return 0;
        return lock_set(fd, off, F_WRLCK);
}

void lock_batch_end(int fd, bool took)
{
        ids_all.tried = false;
        if (took && !in_ids(fd, ID_REGION_START))
                (void) lock_range(fd, ID_REGION_START, ID_REGION_LEN, F_UNLCK);
}

void lock_idle(int fd)
{
        if (!in_ids(fd, ID_REGION_START))
                return;
        (void) lock_range(fd, ID_REGION_START, ID_REGION_LEN, F_UNLCK);
        ids_all.held = false;
        ids_all.tried = false;
}

bool lock_ids_held(int fd)
{
        return in_ids(fd, ID_REGION_START);
}
