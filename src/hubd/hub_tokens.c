/* Bearer tokens: token_dir holds one AGENT.token per sender, its first
 * line the token; a token speaks for that one agent.  Files are checked
 * like secret keys (regular, no symlink, nothing for others, not group
 * writable).  Only a SHA-256 of each token is kept; a presented token is
 * hashed and compared with every stored one in constant time. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff.h"
#include "hub.h"
#include "util.h"

#define TOKEN_MIN_LEN 16
#define TOKEN_MAX_LEN 4096
#define TOKENS_MAX 4096

struct hub_token {
        char agent[64 + 1];
        unsigned char hash[crypto_hash_sha256_BYTES];
};

struct hub_tokens {
        size_t n;
        struct hub_token t[];
};

int hub_path_resolve(const char *spec, char *buf, size_t n)
{
        const char *dir;

        if (strncmp(spec, "credential:", 11))
                return xsnprintf(buf, n, "%s", spec) < 0 ? -ENAMETOOLONG : 0;
        dir = getenv("CREDENTIALS_DIRECTORY");
        if (!dir || !*dir || !hd_name_safe(spec + 11))
                return -ENOENT;
        return xsnprintf(buf, n, "%s/%s", dir, spec + 11) < 0 ? -ENAMETOOLONG : 0;
}

/* One AGENT.token: its first line, checked. */
static int token_read(int dirfd, const char *name, struct hub_token *tok,
                      char *err, size_t errlen)
{
        _cleanup_close_ int fd = -1;
        char buf[TOKEN_MAX_LEN + 2];
        struct stat st;
        ssize_t n;
        size_t len;

        fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                int r = -errno;
                snprintf(err, errlen, "token file '%s': %s", name, strerror(-r));
                return r;
        }
        if (!S_ISREG(st.st_mode)) {
                snprintf(err, errlen, "token file '%s' is not a regular file", name);
                return -EINVAL;
        }
        if (st.st_mode & 0027) {
                snprintf(err, errlen, "token file '%s' has mode %04o: it must not be "
                         "writable by its group or readable by others (0640 or 0600)",
                         name, (unsigned)(st.st_mode & 07777));
                return -EPERM;
        }
        n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0) {
                int r = -errno;
                snprintf(err, errlen, "token file '%s': %s", name, strerror(-r));
                return r;
        }
        buf[n] = '\0';
        len = strcspn(buf, "\r\n");
        while (len > 0 && (buf[len - 1] == ' ' || buf[len - 1] == '\t'))
                len--;
        if (len < TOKEN_MIN_LEN || len > TOKEN_MAX_LEN) {
                sodium_memzero(buf, sizeof(buf));
                snprintf(err, errlen, "token file '%s': the token must be %d to %d "
                         "characters on the first line", name, TOKEN_MIN_LEN,
                         TOKEN_MAX_LEN);
                return -EINVAL;
        }
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] >= 0x7f) {
                        sodium_memzero(buf, sizeof(buf));
                        snprintf(err, errlen, "token file '%s': the token must be "
                                 "printable ASCII without spaces", name);
                        return -EINVAL;
                }
        crypto_hash_sha256(tok->hash, (const unsigned char *)buf, len);
        sodium_memzero(buf, sizeof(buf));
        return 0;
}

int hub_tokens_load(const char *dir, struct hub_tokens **ret, char *err,
                    size_t errlen)
{
        _cleanup_free_ struct hub_tokens *t = NULL;
        struct dirent *de;
        DIR *d;
        int fd, r = 0;

        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                snprintf(err, errlen, "[hub] token_dir %s: %s", dir, strerror(-r));
                return r;
        }
        d = fdopendir(fd);
        if (!d) {
                r = -errno;
                close(fd);
                snprintf(err, errlen, "[hub] token_dir %s: %s", dir, strerror(-r));
                return r;
        }
        t = calloc(1, sizeof(*t) + TOKENS_MAX * sizeof(struct hub_token));
        if (!t) {
                closedir(d);
                return -ENOMEM;
        }
        while ((errno = 0, de = readdir(d))) {
                const char *name = de->d_name;
                size_t len = strlen(name);
                struct hub_token *tok;

                if (name[0] == '.' || len <= 6 || strcmp(name + len - 6, ".token"))
                        continue;
                if (t->n >= TOKENS_MAX) {
                        snprintf(err, errlen, "[hub] token_dir %s: more than %d tokens",
                                 dir, TOKENS_MAX);
                        r = -E2BIG;
                        break;
                }
                tok = &t->t[t->n];
                if (len - 6 >= sizeof(tok->agent)) {
                        snprintf(err, errlen, "token file '%s': not AGENT.token", name);
                        r = -EINVAL;
                        break;
                }
                memcpy(tok->agent, name, len - 6);
                tok->agent[len - 6] = '\0';
                if (!hd_agent_valid(tok->agent)) {
                        snprintf(err, errlen, "token file '%s': '%s' is not a valid agent name",
                                 name, tok->agent);
                        r = -EINVAL;
                        break;
                }
                r = token_read(dirfd(d), name, tok, err, errlen);
                if (r < 0)
                        break;
                t->n++;
        }
        if (r == 0 && errno) {
                r = -errno;
                snprintf(err, errlen, "[hub] token_dir %s: %s", dir, strerror(-r));
        }
        closedir(d);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(t);
        return 0;
}

void hub_tokens_free(struct hub_tokens *t)
{
        if (!t)
                return;
        sodium_memzero(t->t, t->n * sizeof(t->t[0]));
        free(t);
}

size_t hub_tokens_count(const struct hub_tokens *t)
{
        return t ? t->n : 0;
}

const char *hub_tokens_agent(const struct hub_tokens *t, const char *token,
                             size_t len)
{
        unsigned char h[crypto_hash_sha256_BYTES];
        const char *found = NULL;

        if (!t || len == 0 || len > TOKEN_MAX_LEN)
                return NULL;
        crypto_hash_sha256(h, (const unsigned char *)token, len);
        /* every entry is compared: how long this takes says nothing about
         * which token, or how much of one, matched */
        for (size_t i = 0; i < t->n; i++) {
                int eq = sodium_memcmp(h, t->t[i].hash, sizeof(h)) == 0;
                if (eq)
                        found = t->t[i].agent;
        }
        sodium_memzero(h, sizeof(h));
        return found;
}
