/* TLS: the certificate chain and key handoff-hubd serves, given to
 * GnuTLS through libmicrohttpd's certificate callback so that SIGHUP can
 * load new files without closing the listening socket.  A reload swaps
 * the pair under a lock; the replaced pair is kept until exit, since a
 * handshake in another thread may still hold it (a few kB per reload). */
#include <errno.h>
#include <fcntl.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub.h"
#include "util.h"

#define TLS_MAX_CHAIN 16
#define TLS_FILE_MAX (1 << 20)

struct tls_pair {
        gnutls_pcert_st certs[TLS_MAX_CHAIN];
        unsigned n_certs;
        gnutls_privkey_t key;
        struct tls_pair *older;
};

struct hub_tls {
        char *cert_spec, *key_spec;
        pthread_mutex_t lock;
        struct tls_pair *cur;
};

static struct hub_tls *tls_global;

static void tls_pair_free(struct tls_pair *p)
{
        while (p) {
                struct tls_pair *o = p->older;
                for (unsigned i = 0; i < p->n_certs; i++)
                        gnutls_pcert_deinit(&p->certs[i]);
                if (p->key)
                        gnutls_privkey_deinit(p->key);
                free(p);
                p = o;
        }
}

/* A whole file into a gnutls datum; the key file is held to a key's modes. */
static int tls_read(const char *spec, bool secret, gnutls_datum_t *d,
                    char *err, size_t errlen)
{
        char path[4096];
        _cleanup_close_ int fd = -1;
        struct stat st;
        ssize_t n;
        int r;

        r = hub_path_resolve(spec, path, sizeof(path));
        if (r < 0) {
                snprintf(err, errlen, "%s: %s", spec, strerror(-r));
                return r;
        }
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0) {
                r = -errno;
                snprintf(err, errlen, "%s: %s", path, strerror(-r));
                return r;
        }
        if (!S_ISREG(st.st_mode) || st.st_size > TLS_FILE_MAX) {
                snprintf(err, errlen, "%s: not a regular file of at most 1M", path);
                return -EINVAL;
        }
        if (secret && (st.st_mode & 0027)) {
                snprintf(err, errlen, "%s has mode %04o: a TLS key must not be "
                         "writable by its group or readable by others",
                         path, (unsigned)(st.st_mode & 07777));
                return -EPERM;
        }
        d->data = gnutls_malloc((size_t)st.st_size + 1);
        if (!d->data)
                return -ENOMEM;
        n = read(fd, d->data, (size_t)st.st_size);
        if (n < 0) {
                r = -errno;
                gnutls_free(d->data);
                d->data = NULL;
                snprintf(err, errlen, "%s: %s", path, strerror(-r));
                return r;
        }
        d->size = (unsigned)n;
        return 0;
}

/* Whether the key is the one of the chain's first certificate: a pair
 * that is not makes every handshake fail, so it is refused at the load
 * (the start, SIGHUP, handoff-hubd -n) instead.  0 or -EINVAL. */
static int tls_pair_match(struct tls_pair *p)
{
        gnutls_pubkey_t pk = NULL;
        gnutls_datum_t a = { 0 }, b = { 0 };
        int r = -EINVAL;

        if (gnutls_pubkey_init(&pk) < 0)
                return -ENOMEM;
        if (gnutls_pubkey_import_privkey(pk, p->key, 0, 0) == 0 &&
            gnutls_pubkey_export2(pk, GNUTLS_X509_FMT_DER, &a) == 0 &&
            gnutls_pubkey_export2(p->certs[0].pubkey, GNUTLS_X509_FMT_DER, &b) == 0 &&
            a.size == b.size && !memcmp(a.data, b.data, a.size))
                r = 0;
        gnutls_free(a.data);
        gnutls_free(b.data);
        gnutls_pubkey_deinit(pk);
        return r;
}

static int tls_pair_load(const char *cert, const char *key,
                         struct tls_pair **ret, char *err, size_t errlen)
{
        gnutls_datum_t c = { 0 }, k = { 0 };
        struct tls_pair *p;
        int r;

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        r = tls_read(cert, false, &c, err, errlen);
        if (r == 0)
                r = tls_read(key, true, &k, err, errlen);
        if (r < 0)
                goto fail;
        p->n_certs = TLS_MAX_CHAIN;
        r = gnutls_pcert_list_import_x509_raw(p->certs, &p->n_certs, &c,
                                              GNUTLS_X509_FMT_PEM, 0);
        if (r < 0 || p->n_certs == 0) {
                p->n_certs = 0;
                snprintf(err, errlen, "%s: no certificate: %s", cert,
                         r < 0 ? gnutls_strerror(r) : "empty");
                r = -EINVAL;
                goto fail;
        }
        r = gnutls_privkey_init(&p->key);
        if (r == 0)
                r = gnutls_privkey_import_x509_raw(p->key, &k, GNUTLS_X509_FMT_PEM,
                                                   NULL, 0);
        if (r < 0) {
                snprintf(err, errlen, "%s: no private key: %s", key, gnutls_strerror(r));
                r = -EINVAL;
                goto fail;
        }
        r = tls_pair_match(p);
        if (r < 0) {
                snprintf(err, errlen, "%s is not the key of %s%s", key, cert,
                         r == -ENOMEM ? ": out of memory" : "");
                goto fail;
        }
        gnutls_free(c.data);
        if (k.data)
                gnutls_memset(k.data, 0, k.size);
        gnutls_free(k.data);
        *ret = p;
        return 0;
fail:
        gnutls_free(c.data);
        if (k.data)
                gnutls_memset(k.data, 0, k.size);
        gnutls_free(k.data);
        tls_pair_free(p);
        return r;
}

int hub_tls_load(const char *cert, const char *key, struct hub_tls **ret,
                 char *err, size_t errlen)
{
        struct hub_tls *t;
        int r;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->cert_spec = strdup(cert);
        t->key_spec = strdup(key);
        pthread_mutex_init(&t->lock, NULL);
        if (!t->cert_spec || !t->key_spec) {
                r = -ENOMEM;
                goto fail;
        }
        r = tls_pair_load(cert, key, &t->cur, err, errlen);
        if (r < 0)
                goto fail;
        *ret = t;
        return 0;
fail:
        free(t->cert_spec);
        free(t->key_spec);
        free(t);
        return r;
}

int hub_tls_reload(struct hub_tls *t, char *err, size_t errlen)
{
        struct tls_pair *p;
        int r;

        r = tls_pair_load(t->cert_spec, t->key_spec, &p, err, errlen);
        if (r < 0)
                return r;
        pthread_mutex_lock(&t->lock);
        p->older = t->cur;
        t->cur = p;
        pthread_mutex_unlock(&t->lock);
        return 0;
}

void hub_tls_set_global(struct hub_tls *t)
{
        tls_global = t;
}

static int tls_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn,
                        int nreqs, const gnutls_pk_algorithm_t *pk_algos,
                        int pk_algos_length, gnutls_pcert_st **pcert,
                        unsigned int *pcert_length, gnutls_privkey_t *privkey)
{
        struct hub_tls *t = tls_global;

        if (!t)
                return -1;
        pthread_mutex_lock(&t->lock);
        *pcert = t->cur->certs;
        *pcert_length = t->cur->n_certs;
        *privkey = t->cur->key;
        pthread_mutex_unlock(&t->lock);
        return 0;
}

void *hub_tls_callback(void)
{
        return (void *)&tls_retrieve;
}

void hub_tls_free(struct hub_tls *t)
{
        if (!t)
                return;
        tls_pair_free(t->cur);
        pthread_mutex_destroy(&t->lock);
        free(t->cert_spec);
        free(t->key_spec);
        free(t);
}
