/* Keys: the three kinds (HMAC secret, Ed25519 secret, Ed25519 public), key
 * files with ssh-like permission checks, key lines, generation, and wiping.
 * Secrets live in sodium_malloc'ed memory (guard pages, mlock'ed where
 * allowed, zeroed on free) and every temporary copy is wiped before it is
 * released.
 *
 * Key lines (one per line, single spaces, base64 standard with padding):
 *     ed25519 <32-byte public key> <kid>
 *     ed25519-secret <32-byte seed> <kid>
 * Any other key file is an HMAC secret: its bytes minus one newline. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "handoff.h"
#include "key.h"
#include "util.h"

#define KEY_PUB_TAG "ed25519 "
#define KEY_SEC_TAG "ed25519-secret "
#define KEY_B64_LEN 44          /* 32 bytes: public key or seed */
/* A public key file lists at most HD_PUBKEYS_MAX lines of ~120 bytes, with
 * room for comments; a secret is far shorter. */
#define KEY_FILE_MAX (16 * 1024)

_Static_assert(sodium_base64_ENCODED_LEN(crypto_sign_PUBLICKEYBYTES,
               sodium_base64_VARIANT_ORIGINAL) == KEY_B64_LEN + 1,
               "a 32-byte key is 44 base64 chars");
_Static_assert(sizeof(KEY_SEC_TAG) + KEY_B64_LEN + 1 + HD_KID_MAX + 2 <= HD_KEY_LINE_MAX,
               "the longest key line fits HD_KEY_LINE_MAX");

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
        utf8_fix(err);
}

bool key_b64_decode(const char *s, size_t slen, unsigned char *out, size_t n)
{
        char again[128];
        const char *end = NULL;
        size_t enc = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
        size_t bin_len = 0;

        if (enc > sizeof(again) || slen != enc - 1)
                return false;
        if (sodium_base642bin(out, n, s, slen, NULL, &bin_len, &end,
                              sodium_base64_VARIANT_ORIGINAL) != 0)
                return false;
        if (bin_len != n || end != s + slen)
                return false;
        sodium_bin2base64(again, sizeof(again), out, n, sodium_base64_VARIANT_ORIGINAL);
        return memcmp(again, s, slen) == 0;
}

static hd_key *key_new(hd_key_kind kind, size_t secret_len)
{
        hd_key *k = calloc(1, sizeof(*k));

        if (!k)
                return NULL;
        k->kind = kind;
        if (secret_len > 0) {
                k->bytes = sodium_malloc(secret_len);
                if (!k->bytes) {
                        free(k);
                        return NULL;
                }
                k->len = secret_len;
        }
        return k;
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
        k = key_new(HD_KEY_HMAC, len);
        if (!k)
                return -ENOMEM;
        memcpy(k->bytes, bytes, len);
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

hd_key_kind hd_key_kind_of(const hd_key *k)
{
        return k ? k->kind : 0;
}

const char *hd_key_kid(const hd_key *k)
{
        return k && k->kind != HD_KEY_HMAC ? k->kid : NULL;
}

int hd_key_set_agent(hd_key *k, const char *agent)
{
        if (!k)
                return -EINVAL;
        if (!agent) {
                k->agent[0] = '\0';
                return 0;
        }
        if (!hd_agent_valid(agent))
                return -EINVAL;
        snprintf(k->agent, sizeof(k->agent), "%s", agent);
        return 0;
}

const char *hd_key_agent(const hd_key *k)
{
        return k && k->agent[0] ? k->agent : NULL;
}

/* The default kid: the first 16 hex chars of SHA-256 of the public key. */
static void key_kid_derive(const unsigned char pk[crypto_sign_PUBLICKEYBYTES],
                           char kid[HD_KID_MAX + 1])
{
        unsigned char h[crypto_hash_sha256_BYTES];

        crypto_hash_sha256(h, pk, crypto_sign_PUBLICKEYBYTES);
        sodium_bin2hex(kid, 17, h, 8);
}

int hd_key_generate(const char *kid, hd_key **ret)
{
        hd_key *k;
        int r;

        if (!ret || (kid && !hd_agent_valid(kid)))
                return -EINVAL;
        r = key_sodium_init();
        if (r < 0)
                return r;
        k = key_new(HD_KEY_ED25519_SECRET, crypto_sign_SECRETKEYBYTES);
        if (!k)
                return -ENOMEM;
        crypto_sign_keypair(k->pk, k->bytes);
        if (kid)
                snprintf(k->kid, sizeof(k->kid), "%s", kid);
        else
                key_kid_derive(k->pk, k->kid);
        *ret = k;
        return 0;
}

int hd_key_format(const hd_key *k, bool secret, char *buf, size_t n)
{
        char b64[KEY_B64_LEN + 1];
        unsigned char seed[crypto_sign_SEEDBYTES];
        int r;

        if (!k || !buf || n < HD_KEY_LINE_MAX || k->kind == HD_KEY_HMAC)
                return -EINVAL;
        if (secret && k->kind != HD_KEY_ED25519_SECRET)
                return -EINVAL;
        if (!secret) {
                sodium_bin2base64(b64, sizeof(b64), k->pk, sizeof(k->pk),
                                  sodium_base64_VARIANT_ORIGINAL);
                return xsnprintf(buf, n, KEY_PUB_TAG "%s %s\n", b64, k->kid) < 0 ? -EINVAL : 0;
        }
        crypto_sign_ed25519_sk_to_seed(seed, k->bytes);
        sodium_bin2base64(b64, sizeof(b64), seed, sizeof(seed),
                          sodium_base64_VARIANT_ORIGINAL);
        r = xsnprintf(buf, n, KEY_SEC_TAG "%s %s\n", b64, k->kid) < 0 ? -EINVAL : 0;
        sodium_memzero(seed, sizeof(seed));
        sodium_memzero(b64, sizeof(b64));
        return r;
}

/* One key line without its newline: "TAG B64 KID". */
static int key_parse_line(const char *s, size_t len, hd_key **ret,
                          char *err, size_t errlen)
{
        unsigned char raw[crypto_sign_SEEDBYTES];
        char kid[HD_KID_MAX + 1];
        bool secret;
        const char *b64, *sp;
        size_t taglen, kidlen;
        hd_key *k;
        int r;

        if (len >= sizeof(KEY_SEC_TAG) - 1 && !memcmp(s, KEY_SEC_TAG, sizeof(KEY_SEC_TAG) - 1)) {
                secret = true;
                taglen = sizeof(KEY_SEC_TAG) - 1;
        } else if (len >= sizeof(KEY_PUB_TAG) - 1 && !memcmp(s, KEY_PUB_TAG, sizeof(KEY_PUB_TAG) - 1)) {
                secret = false;
                taglen = sizeof(KEY_PUB_TAG) - 1;
        } else {
                key_err(err, errlen, "not an Ed25519 key line (\"ed25519 KEY KID\" or "
                        "\"ed25519-secret SEED KID\")");
                return -EINVAL;
        }
        b64 = s + taglen;
        sp = memchr(b64, ' ', len - taglen);
        if (!sp || sp - b64 != KEY_B64_LEN) {
                key_err(err, errlen, "the key is not %d chars of base64 followed by a space and "
                        "the kid", KEY_B64_LEN);
                return -EINVAL;
        }
        kidlen = len - (size_t)(sp + 1 - s);
        if (kidlen == 0 || kidlen > HD_KID_MAX) {
                key_err(err, errlen, "the kid is empty or longer than %d chars", HD_KID_MAX);
                return -EINVAL;
        }
        memcpy(kid, sp + 1, kidlen);
        kid[kidlen] = '\0';
        if (strlen(kid) != kidlen || !hd_agent_valid(kid)) {
                key_err(err, errlen, "the kid '%s' is not [a-z0-9][a-z0-9_-]{0,63}", kid);
                return -EINVAL;
        }
        if (!key_b64_decode(b64, KEY_B64_LEN, raw, sizeof(raw))) {
                key_err(err, errlen, "the key is not standard base64 of 32 bytes");
                r = -EINVAL;
                goto out;
        }
        r = key_sodium_init();
        if (r < 0)
                goto out;
        k = key_new(secret ? HD_KEY_ED25519_SECRET : HD_KEY_ED25519_PUBLIC,
                    secret ? crypto_sign_SECRETKEYBYTES : 0);
        if (!k) {
                r = -ENOMEM;
                goto out;
        }
        if (secret)
                crypto_sign_seed_keypair(k->pk, k->bytes, raw);
        else
                memcpy(k->pk, raw, sizeof(k->pk));
        snprintf(k->kid, sizeof(k->kid), "%s", kid);
        *ret = k;
        r = 0;
out:
        sodium_memzero(raw, sizeof(raw));
        return r;
}

int hd_key_parse(const char *line, size_t len, hd_key **ret, char *err,
                 size_t errlen)
{
        key_err(err, errlen, "%s", "");
        if (!line || !ret)
                return -EINVAL;
        if (len > 0 && line[len - 1] == '\n')
                len--;
        if (memchr(line, '\n', len)) {
                key_err(err, errlen, "more than one line");
                return -EINVAL;
        }
        return key_parse_line(line, len, ret, err, errlen);
}

/* Open and read a key file: a regular file, not a symlink, at most
 * KEY_FILE_MAX bytes, into sodium_malloc'ed memory (it may hold a secret;
 * the caller wipes and frees it with key_file_free). */
static int key_file_read(int dirfd, const char *name, unsigned char **ret_buf,
                         size_t *ret_len, struct stat *st, char *err, size_t errlen)
{
        _cleanup_close_ int fd = -1;
        unsigned char *buf;
        ssize_t n;
        int r;

        r = key_sodium_init();
        if (r < 0) {
                key_err(err, errlen, "key file '%s': libsodium failed to initialise", name);
                return r;
        }
        /* O_NONBLOCK: opening a FIFO must not wait for a writer; fstat
         * then refuses it as not a regular file. */
        fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
                r = -errno;
                if (r == -ELOOP)
                        key_err(err, errlen, "key file '%s' is a symbolic link: "
                                "name the file itself", name);
                else
                        key_err(err, errlen, "key file '%s': %s", name, strerror(-r));
                return r;
        }
        if (fstat(fd, st) < 0) {
                r = -errno;
                key_err(err, errlen, "key file '%s': %s", name, strerror(-r));
                return r;
        }
        if (!S_ISREG(st->st_mode)) {
                key_err(err, errlen, "key file '%s' is not a regular file", name);
                return S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
        }
        if (st->st_size > KEY_FILE_MAX) {
                key_err(err, errlen, "key file '%s' holds %lld bytes; at most %d are allowed",
                        name, (long long)st->st_size, KEY_FILE_MAX);
                return -EINVAL;
        }
        /* One byte more than allowed, so that a file that grew since
         * fstat is seen as too long rather than cut short. */
        buf = sodium_malloc(KEY_FILE_MAX + 1);
        if (!buf) {
                key_err(err, errlen, "key file '%s': out of memory", name);
                return -ENOMEM;
        }
        n = read_full(fd, buf, KEY_FILE_MAX + 1);
        if (n < 0 || n > KEY_FILE_MAX) {
                r = n < 0 ? (int)n : -EINVAL;
                key_err(err, errlen, "key file '%s': %s", name,
                        n < 0 ? strerror(-r) : "grew while being read");
                sodium_memzero(buf, KEY_FILE_MAX + 1);
                sodium_free(buf);
                return r;
        }
        *ret_buf = buf;
        *ret_len = (size_t)n;
        return 0;
}

static void key_file_free(unsigned char *buf)
{
        if (buf) {
                sodium_memzero(buf, KEY_FILE_MAX + 1);
                sodium_free(buf);
        }
}

/* As ssh does for private keys: any bit for others counts (even execute),
 * group may read but not write. */
static int key_mode_secret(const char *name, const struct stat *st, char *err, size_t errlen)
{
        if (!(st->st_mode & 0027))
                return 0;
        key_err(err, errlen, "key file '%s' has mode %04o: it must not be "
                "accessible by others or writable by group (chmod 600 or 640)",
                name, (unsigned)(st->st_mode & 07777));
        return -EPERM;
}

/* A public key may be read by anyone; whoever may write it may sign. */
static int key_mode_public(const char *name, const struct stat *st, char *err, size_t errlen)
{
        if (!(st->st_mode & 0022))
                return 0;
        key_err(err, errlen, "public key file '%s' has mode %04o: it must not be "
                "writable by group or others (chmod 644)",
                name, (unsigned)(st->st_mode & 07777));
        return -EPERM;
}

static bool key_is_ed25519(const unsigned char *buf, size_t len)
{
        return len >= 7 && !memcmp(buf, "ed25519", 7) && (len == 7 || buf[7] == ' ' ||
                                                          buf[7] == '-' || buf[7] == '\n');
}

int hd_key_load(const char *path, hd_key **ret, char *err, size_t errlen)
{
        unsigned char *buf = NULL;
        char lerr[200];
        struct stat st;
        size_t len;
        int r;

        key_err(err, errlen, "%s", "");
        if (!path || !ret)
                return -EINVAL;
        r = key_file_read(AT_FDCWD, path, &buf, &len, &st, err, errlen);
        if (r < 0)
                return r;
        if (len > 0 && buf[len - 1] == '\n')
                len--;

        if (key_is_ed25519(buf, len)) {
                bool secret = len >= sizeof(KEY_SEC_TAG) - 1 &&
                              !memcmp(buf, KEY_SEC_TAG, sizeof(KEY_SEC_TAG) - 1);

                r = secret ? key_mode_secret(path, &st, err, errlen)
                           : key_mode_public(path, &st, err, errlen);
                if (r < 0)
                        goto out;
                if (memchr(buf, '\n', len)) {
                        key_err(err, errlen, "key file '%s' holds more than one line: one key "
                                "per key file (a list of public keys is for pubkeys =)", path);
                        r = -EINVAL;
                        goto out;
                }
                r = key_parse_line((const char *)buf, len, ret, lerr, sizeof(lerr));
                if (r < 0)
                        key_err(err, errlen, "key file '%s': %s", path, lerr);
                goto out;
        }

        r = key_mode_secret(path, &st, err, errlen);
        if (r < 0)
                goto out;
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
        key_file_free(buf);
        return r;
}

int hd_pubkeys_load_at(int dirfd, const char *name, hd_key **keys, size_t max,
                       size_t *ret_n, char *err, size_t errlen)
{
        unsigned char *buf = NULL;
        char lerr[200];
        struct stat st;
        size_t len, n = 0, lineno = 0;
        int r;

        key_err(err, errlen, "%s", "");
        if (!name || !keys || !ret_n || max == 0 || max > HD_PUBKEYS_MAX)
                return -EINVAL;
        r = key_file_read(dirfd, name, &buf, &len, &st, err, errlen);
        if (r < 0)
                return r;
        r = key_mode_public(name, &st, err, errlen);
        if (r < 0)
                goto fail;

        for (size_t pos = 0; pos < len;) {
                const char *line = (const char *)buf + pos;
                const char *nl = memchr(line, '\n', len - pos);
                size_t llen = nl ? (size_t)(nl - line) : len - pos;

                pos += llen + 1;
                lineno++;
                if (llen == 0 || line[0] == '#')
                        continue;
                if (llen >= sizeof(KEY_SEC_TAG) - 1 &&
                    !memcmp(line, KEY_SEC_TAG, sizeof(KEY_SEC_TAG) - 1)) {
                        key_err(err, errlen, "'%s' line %zu is a secret key: a public key "
                                "file lists public keys only", name, lineno);
                        r = -EKEYREJECTED;
                        goto fail;
                }
                if (n == max) {
                        key_err(err, errlen, "'%s' lists more than %zu keys", name, max);
                        r = -E2BIG;
                        goto fail;
                }
                r = key_parse_line(line, llen, &keys[n], lerr, sizeof(lerr));
                if (r == 0 && keys[n]->kind != HD_KEY_ED25519_PUBLIC) {
                        snprintf(lerr, sizeof(lerr), "not a public key");
                        hd_key_free(keys[n]);
                        r = -EINVAL;
                }
                if (r < 0) {
                        key_err(err, errlen, "'%s' line %zu: %s", name, lineno, lerr);
                        goto fail;
                }
                n++;
        }
        if (n == 0) {
                key_err(err, errlen, "'%s' lists no public key", name);
                r = -EINVAL;
                goto fail;
        }
        key_file_free(buf);
        *ret_n = n;
        return 0;
fail:
        while (n > 0)
                hd_key_free(keys[--n]);
        key_file_free(buf);
        return r;
}
