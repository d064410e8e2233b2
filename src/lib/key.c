/* Keys: loading a key file with ssh-like permission checks, keys from
 * memory, and wiping them.  Key bytes live in sodium_malloc'ed memory
 * (guard pages, mlock'ed where allowed, zeroed on free) and every temporary
 * copy is wiped before it is released. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff.h"
#include "key.h"
#include "util.h"

/* sodium_init() is idempotent and thread-safe; it returns 1 when already
 * done, -1 only when no usable randomness exists. */
static int key_sodium_init(void)
{
        return sodium_init() < 0 ? -EIO : 0;
}

_printf_(3, 4) static void key_err(char *err, size_t errlen, const char *fmt, ...)
{
        va_list ap;

        if (!err || errlen == 0)
                return;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
}

int hd_key_from_bytes(const void *bytes, size_t len, hd_key **ret)
{
        hd_key *k;
        int r;

        if (!ret || (!bytes && len > 0))
                return -EINVAL;
        if (len < HD_KEY_MIN_LEN || len > HD_KEY_MAX_LEN)
                return -EINVAL;
        r = key_sodium_init();
        if (r < 0)
                return r;
        k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        k->bytes = sodium_malloc(len);
        if (!k->bytes) {
                free(k);
                return -ENOMEM;
        }
        memcpy(k->bytes, bytes, len);
        k->len = len;
        *ret = k;
        return 0;
}

void hd_key_free(hd_key *k)
{
        if (!k)
                return;
        if (k->bytes) {
                /* sodium_free zeroes too; wiping here keeps the promise
                 * independent of that implementation detail. */
                sodium_memzero(k->bytes, k->len);
                sodium_free(k->bytes);
        }
        sodium_memzero(k, sizeof(*k));
        free(k);
}

/* Read the whole of fd into buf (at most cap bytes); returns the count. */
static ssize_t key_read_all(int fd, unsigned char *buf, size_t cap)
{
        size_t len = 0;

        while (len < cap) {
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        return (ssize_t)len;
}

int hd_key_load(const char *path, hd_key **ret, char *err, size_t errlen)
{
        _cleanup_close_ int fd = -1;
        unsigned char *buf = NULL;
        /* Room for the longest key, its newline and one byte more, so that
         * an over-long file is seen as such rather than cut short. */
        const size_t cap = HD_KEY_MAX_LEN + 2;
        struct stat st;
        ssize_t n;
        size_t len;
        int r;

        key_err(err, errlen, "%s", "");
        if (!path || !ret)
                return -EINVAL;
        r = key_sodium_init();
        if (r < 0) {
                key_err(err, errlen, "key file '%s': libsodium failed to initialise", path);
                return r;
        }

        /* O_NONBLOCK: opening a FIFO must not wait for a writer; fstat
         * then refuses it as not a regular file. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
                r = -errno;
                if (r == -ELOOP)
                        key_err(err, errlen, "key file '%s' is a symbolic link: "
                                "name the file itself", path);
                else
                        key_err(err, errlen, "key file '%s': %s", path, strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                key_err(err, errlen, "key file '%s': %s", path, strerror(-r));
                return r;
        }
        if (!S_ISREG(st.st_mode)) {
                key_err(err, errlen, "key file '%s' is not a regular file", path);
                return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        }
        /* As ssh does for private keys.  Any bit for others counts (even
         * execute), group may read but not write. */
        if (st.st_mode & 0027) {
                key_err(err, errlen, "key file '%s' has mode %04o: it must not be "
                        "accessible by others or writable by group (chmod 600 or 640)",
                        path, (unsigned)(st.st_mode & 07777));
                return -EPERM;
        }
        if (st.st_size > (off_t)(HD_KEY_MAX_LEN + 1)) {
                key_err(err, errlen, "key file '%s' holds %lld bytes; at most %d are allowed",
                        path, (long long)st.st_size, HD_KEY_MAX_LEN);
                return -EINVAL;
        }

        buf = sodium_malloc(cap);
        if (!buf) {
                key_err(err, errlen, "key file '%s': out of memory", path);
                return -ENOMEM;
        }
        n = key_read_all(fd, buf, cap);
        if (n < 0) {
                r = (int)n;
                key_err(err, errlen, "key file '%s': %s", path, strerror(-r));
                goto out;
        }
        len = (size_t)n;
        if (len > 0 && buf[len - 1] == '\n')
                len--;
        if (len < HD_KEY_MIN_LEN) {
                key_err(err, errlen, "key file '%s' holds %zu bytes; at least %d are needed",
                        path, len, HD_KEY_MIN_LEN);
                r = -EINVAL;
                goto out;
        }
        if (len > HD_KEY_MAX_LEN) {
                key_err(err, errlen, "key file '%s' holds more than %d bytes",
                        path, HD_KEY_MAX_LEN);
                r = -EINVAL;
                goto out;
        }
        r = hd_key_from_bytes(buf, len, ret);
        if (r < 0)
                key_err(err, errlen, "key file '%s': %s", path, strerror(-r));
out:
        sodium_memzero(buf, cap);
        sodium_free(buf);
        return r;
}
