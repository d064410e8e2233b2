/* The keys handoffd.conf names: a path or "credential:NAME" resolved and
 * loaded, HMAC slots refused anything else, public keys per agent and from
 * [keys] pubkey_dir, their kids checked for clashes; the keys a consumer
 * can read; and config_key_lookup(), what a document's kid and from_agent
 * are verified with. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "config_err.h"
#include "config_keys.h"
#include "util.h"

/* "credential:NAME" -> $CREDENTIALS_DIRECTORY/NAME (systemd LoadCredential=). */
static int key_path_resolve(const char *spec, char *buf, size_t n)
{
        const char *dir;

        if (strncmp(spec, "credential:", 11))
                return xsnprintf(buf, n, "%s", spec) < 0 ? -ENAMETOOLONG : 0;
        if (!hd_name_safe(spec + 11))
                return -EINVAL;
        dir = getenv("CREDENTIALS_DIRECTORY");
        if (!dir || !*dir)
                return -ENXIO;
        return xsnprintf(buf, n, "%s/%s", dir, spec + 11) < 0 ? -ENAMETOOLONG : 0;
}

static int key_load(const char *spec, hd_key **ret, char **err)
{
        char path[PATH_MAX], msg[512];
        int r;

        r = key_path_resolve(spec, path, sizeof(path));
        if (r == -ENXIO) {
                if (asprintf(err, "%s: $CREDENTIALS_DIRECTORY is not set", spec) < 0)
                        *err = NULL;
                return r;
        }
        if (r < 0) {
                if (asprintf(err, "%s: not a usable key path", spec) < 0)
                        *err = NULL;
                return r;
        }
        msg[0] = '\0';
        r = hd_key_load(path, ret, msg, sizeof(msg));
        if (r < 0 && asprintf(err, "%s", msg[0] ? msg : strerror(-r)) < 0)
                *err = NULL;
        return r;
}

/* The HMAC slots ([keys] default and NAME, [agent NAME] key) take HMAC
 * secrets only: an Ed25519 secret key never belongs to the daemon, and a
 * public key is given with pubkeys = or pubkey_dir. */
static int key_load_hmac(const char *spec, hd_key **ret, char **err)
{
        int r = key_load(spec, ret, err);

        if (r < 0)
                return r;
        if (hd_key_kind_of(*ret) == HD_KEY_HMAC)
                return 0;
        if (asprintf(err, "%s is an Ed25519 %s key: %s", spec,
                     hd_key_kind_of(*ret) == HD_KEY_ED25519_SECRET ? "secret" : "public",
                     hd_key_kind_of(*ret) == HD_KEY_ED25519_SECRET
                     ? "the daemon needs only public keys ([agent NAME] pubkeys = NAME.pub)"
                     : "give it with [agent NAME] pubkeys = or [keys] pubkey_dir") < 0)
                *err = NULL;
        hd_key_free(*ret);
        *ret = NULL;
        return -EINVAL;
}

/* The public keys of one file (dirfd/name), bound to agent. */
static int pubkeys_add(struct config *c, int dirfd, const char *name,
                       const char *agent, char **err)
{
        hd_key *keys[HD_PUBKEYS_MAX];
        hd_key **all;
        char msg[512];
        size_t n = 0;
        int r;

        r = hd_pubkeys_load_at(dirfd, name, keys, HD_PUBKEYS_MAX, &n, msg, sizeof(msg));
        if (r < 0) {
                if (asprintf(err, "%s%s", msg,
                             r == -EKEYREJECTED ? " (the daemon needs only public keys)" : "") < 0)
                        *err = NULL;
                return r;
        }
        all = c->n_pubkeys + n <= CONFIG_MAX_PUBKEYS
              ? realloc(c->pubkeys, (c->n_pubkeys + n) * sizeof(hd_key *)) : NULL;
        if (!all) {
                for (size_t i = 0; i < n; i++)
                        hd_key_free(keys[i]);
                if (c->n_pubkeys + n > CONFIG_MAX_PUBKEYS) {
                        if (asprintf(err, "more than %d public keys", CONFIG_MAX_PUBKEYS) < 0)
                                *err = NULL;
                        return -E2BIG;
                }
                return -ENOMEM;
        }
        c->pubkeys = all;
        for (size_t i = 0; i < n; i++) {
                /* agent is a valid name: the config or a file name checked */
                hd_key_set_agent(keys[i], agent);
                c->pubkeys[c->n_pubkeys++] = keys[i];
        }
        return 0;
}

static int agent_pubkeys_add(struct config *c, const struct config_agent *a,
                             const char *path, char **err)
{
        char *e = NULL;
        int r = pubkeys_add(c, AT_FDCWD, path, a->name, &e);

        if (r < 0 && asprintf(err, "[agent %s] pubkeys: %s", a->name, e ? e : strerror(-r)) < 0)
                *err = NULL;
        free(e);
        return r;
}

static int cmp_strp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory of public keys (what names it, as the message says it):
 * whoever can add a file there can sign as whom the file's name says, so
 * it must not be writable by group or others (each file is held to the
 * same rule when it is read). */
static int pubdir_open(const char *what, const char *path, int *ret_fd, char **err)
{
        _cleanup_close_ int dfd = -1;
        int r;

        dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                r = -errno;
                if (asprintf(err, "%s %s: %s", what, path, strerror(-r)) < 0)
                        *err = NULL;
                return r;
        }
        r = config_pubdir_check(what, path, dfd, err);
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(dfd);
        return 0;
}

int config_pubdir_check(const char *what, const char *path, int dfd, char **err)
{
        struct stat st;
        int r;

        if (fstat(dfd, &st) < 0) {
                r = -errno;
                if (asprintf(err, "%s %s: %s", what, path, strerror(-r)) < 0)
                        *err = NULL;
                return r;
        }
        if (st.st_mode & 0022) {
                if (asprintf(err, "%s %s has mode %04o: it must not be writable by group or "
                             "others (chmod 755)", what, path, (unsigned)(st.st_mode & 07777)) < 0)
                        *err = NULL;
                return -EPERM;
        }
        return 0;
}

/* [keys] pubkey_dir: every <agent>.pub in it (pubdir_open()'s rule). */
static int pubkeys_load_dir(struct config *c, char **err)
{
        _cleanup_close_ int dfd = -1;
        char **names = NULL;
        size_t n = 0;
        struct dirent *de;
        DIR *d;
        int r = 0;

        r = pubdir_open("[keys] pubkey_dir", c->pubkey_dir, &dfd, err);
        if (r < 0)
                return r;
        d = fdopendir(fcntl(dfd, F_DUPFD_CLOEXEC, 3));
        if (!d) {
                r = -errno;
                if (asprintf(err, "[keys] pubkey_dir %s: %s", c->pubkey_dir, strerror(-r)) < 0)
                        *err = NULL;
                return r;
        }
        while ((de = readdir(d))) {
                size_t l = strlen(de->d_name);
                char **nn;

                if (de->d_name[0] == '.' || l <= 4 || strcmp(de->d_name + l - 4, ".pub"))
                        continue;
                if (n == CONFIG_MAX_PUBKEYS) {
                        r = -E2BIG;
                        if (asprintf(err, "[keys] pubkey_dir %s holds more than %d .pub files",
                                     c->pubkey_dir, CONFIG_MAX_PUBKEYS) < 0)
                                *err = NULL;
                        goto out;
                }
                nn = realloc(names, (n + 1) * sizeof(char *));
                if (!nn || !(nn[n] = strdup(de->d_name))) {
                        names = nn ? nn : names;
                        r = -ENOMEM;
                        goto out;
                }
                names = nn;
                n++;
        }
        if (n > 1)
                qsort(names, n, sizeof(char *), cmp_strp);
        for (size_t i = 0; i < n && r == 0; i++) {
                char agent[80];
                char *e = NULL;

                snprintf(agent, sizeof(agent), "%.*s", (int)(strlen(names[i]) - 4), names[i]);
                if (strlen(names[i]) - 4 >= sizeof(agent) || !hd_agent_valid(agent)) {
                        r = -EINVAL;
                        if (asprintf(err, "[keys] pubkey_dir %s: '%s' is not named "
                                     "<agent>.pub", c->pubkey_dir, names[i]) < 0)
                                *err = NULL;
                        break;
                }
                r = pubkeys_add(c, dfd, names[i], agent, &e);
                if (r < 0) {
                        if (asprintf(err, "[keys] pubkey_dir %s: %s", c->pubkey_dir,
                                     e ? e : strerror(-r)) < 0)
                                *err = NULL;
                        free(e);
                }
        }
out:
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        closedir(d);
        return r;
}

/* One kid names one key, one key has one owner, a kid is not also a
 * [keys] name, and an agent that requires signatures has a public key. */
static int pubkeys_check(struct config *c, char **err)
{
        char la[HD_KEY_LINE_MAX], lb[HD_KEY_LINE_MAX];
        /* "ed25519 " and the 44 base64 chars of the key */
        const size_t keylen = 8 + 44;

#define PFAIL(...) do { if (asprintf(err, __VA_ARGS__) < 0) *err = NULL; return -EINVAL; } while (0)
        for (size_t i = 0; i < c->n_pubkeys; i++) {
                const hd_key *a = c->pubkeys[i];

                for (size_t j = 0; j < c->n_kids; j++)
                        if (!strcmp(hd_key_kid(a), c->kid_names[j]))
                                PFAIL("kid '%s' of a public key of %s is also a [keys] name",
                                      hd_key_kid(a), hd_key_agent(a));
                if (hd_key_format(a, false, la, sizeof(la)) < 0)
                        return -EINVAL;
                for (size_t j = i + 1; j < c->n_pubkeys; j++) {
                        const hd_key *b = c->pubkeys[j];

                        if (!strcmp(hd_key_kid(a), hd_key_kid(b)))
                                PFAIL("kid '%s' names two public keys (of %s and of %s)",
                                      hd_key_kid(a), hd_key_agent(a), hd_key_agent(b));
                        if (hd_key_format(b, false, lb, sizeof(lb)) < 0)
                                return -EINVAL;
                        if (!memcmp(la, lb, keylen))
                                PFAIL("one public key is listed twice (kid '%s' of %s and "
                                      "kid '%s' of %s)", hd_key_kid(a), hd_key_agent(a),
                                      hd_key_kid(b), hd_key_agent(b));
                }
        }
        for (size_t i = 0; i < c->n_agents; i++) {
                const struct config_agent *a = &c->agents[i];
                bool found = false;

                for (size_t j = 0; j < c->n_pubkeys && !found; j++)
                        found = !strcmp(hd_key_agent(c->pubkeys[j]), a->name);
                if (a->require_sig && !found)
                        PFAIL("[agent %s] require = sig, but no public key of %s was found",
                              a->name, a->name);
        }
#undef PFAIL
        return 0;
}

int config_load_keys(struct config *c, const struct parse_state *st, char **err)
{
        char *e = NULL;
        int line, r;

        /* value: the config's string that named the file, for its line */
#define LOAD(value, fn, ...) do {                                             \
                r = fn(__VA_ARGS__, &e);                                      \
                if (r < 0) {                                                  \
                        line = config_line_of(st, value);                     \
                        if ((line > 0 ? asprintf(err, "%s:%d: %s", c->path, line, \
                                                 e ? e : strerror(-r))        \
                                      : asprintf(err, "%s: %s", c->path,      \
                                                 e ? e : strerror(-r))) < 0)  \
                                *err = NULL;                                  \
                        free(e);                                              \
                        return r;                                             \
                }                                                             \
        } while (0)
        if (c->default_key_path)
                LOAD(c->default_key_path, key_load_hmac, c->default_key_path, &c->default_key);
        for (size_t i = 0; i < c->n_kids; i++)
                LOAD(c->kid_paths[i], key_load_hmac, c->kid_paths[i], &c->kid_keys[i]);
        for (size_t i = 0; i < c->n_agents; i++) {
                struct config_agent *a = &c->agents[i];

                if (a->key_path) {
                        LOAD(a->key_path, key_load_hmac, a->key_path, &a->key);
                        /* the sender's own key speaks for it alone */
                        hd_key_set_agent(a->key, a->name);
                }
                for (size_t j = 0; j < a->n_pubkey_paths; j++)
                        LOAD(a->pubkey_paths[j], agent_pubkeys_add, c, a, a->pubkey_paths[j]);
        }
        if (c->pubkey_dir)
                LOAD(c->pubkey_dir, pubkeys_load_dir, c);
        LOAD(NULL, pubkeys_check, c);
#undef LOAD
        return 0;
}

int config_a2a_tokens_check(const struct config *c, char **err)
{
        /* handoff-a2a reads it at each request; -n and the start say now
         * whether it can. */
        for (size_t i = 0; i < c->n_remotes; i++) {
                const char *why = NULL;
                int r;

                if (!c->remotes[i].token_file)
                        continue;
                r = config_a2a_token_read(c->remotes[i].token_file, NULL, 0, &why);
                if (r < 0) {
                        if (asprintf(err, "%s: [remote %s] token_file %s: %s", c->path,
                                     c->remotes[i].name, c->remotes[i].token_file,
                                     why ? why : strerror(-r)) < 0)
                                *err = NULL;
                        return r;
                }
        }
        return 0;
}

int config_host_pubkeys_check(const struct config *c, const char *dir, int dfd, char **err)
{
        int r;

        r = config_pubdir_check("[relay] host_pubkey_dir", dir, dfd, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < c->n_remotes; i++) {
                const char *host = c->remotes[i].host;
                hd_key *keys[HD_PUBKEYS_MAX];
                char name[NAME_MAX + 1], msg[512] = "";
                size_t n = 0;
                bool seen = false;

                /* An A2A remote has no host: it sends no receipts. */
                if (!host)
                        continue;
                for (size_t j = 0; j < i && !seen; j++)
                        seen = c->remotes[j].host && !strcmp(c->remotes[j].host, host);
                if (seen)
                        continue;
                /* host is a valid name: far shorter than NAME_MAX */
                snprintf(name, sizeof(name), "%s.pub", host);
                r = hd_pubkeys_load_at(dfd, name, keys, HD_PUBKEYS_MAX, &n, msg, sizeof(msg));
                if (r < 0) {
                        if (asprintf(err, "[relay] host_pubkey_dir %s: %s (the key of host %s, "
                                     "[remote %s], which sends its receipts here)", dir,
                                     msg[0] ? msg : strerror(-r), host, c->remotes[i].name) < 0)
                                *err = NULL;
                        return r;
                }
                while (n > 0)
                        hd_key_free(keys[--n]);
        }
        return 0;
}

/* host_key signs what this host says of an item to another: an Ed25519
 * secret key, never an HMAC key (which the other host would need to hold
 * to verify, and could then forge with) nor a public key. */
static int host_key_load(const struct config *c, hd_key **ret, char **err)
{
        hd_key *k = NULL;
        char *e = NULL;
        int r;

        r = key_load(c->relay.host_key, &k, &e);
        if (r < 0) {
                if (asprintf(err, "[relay] host_key: %s", e ? e : strerror(-r)) < 0)
                        *err = NULL;
                free(e);
                return r;
        }
        if (hd_key_kind_of(k) != HD_KEY_ED25519_SECRET) {
                if (asprintf(err, "[relay] host_key %s is %s, not an Ed25519 secret key (make one "
                             "with handoffctl keygen --ed25519)", c->relay.host_key,
                             hd_key_kind_of(k) == HD_KEY_HMAC ? "an HMAC key"
                                                              : "an Ed25519 public key") < 0)
                        *err = NULL;
                hd_key_free(k);
                return -EINVAL;
        }
        *ret = k;
        return 0;
}

/* A file the NATS library reads at start ([relay] credentials, nkey_seed,
 * tls_*): a regular file this user may read.  libnats itself says only
 * "Error loading trusted certificates '...': (null)", and only at start;
 * what is in it stays libnats's to judge. */
static int relay_file_check(const char *key, const char *path, char **err)
{
        _cleanup_close_ int fd = -1;
        struct stat st;
        int r;

        if (!path)
                return 0;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0 || fstat(fd, &st) < 0) {
                r = -errno;
                if (asprintf(err, "[relay] %s %s: %s", key, path, strerror(-r)) < 0)
                        *err = NULL;
                return r;
        }
        if (!S_ISREG(st.st_mode)) {
                if (asprintf(err, "[relay] %s %s is not a regular file", key, path) < 0)
                        *err = NULL;
                return -EINVAL;
        }
        return 0;
}

int config_relay_keys(const struct config *c, hd_key **ret_key, int *ret_dfd, char **err)
{
        const struct config_relay *rl = &c->relay;
        const struct { const char *key, *path; } files[] = {
                { "credentials", rl->credentials }, { "nkey_seed", rl->nkey_seed },
                { "tls_ca", rl->tls_ca }, { "tls_cert", rl->tls_cert }, { "tls_key", rl->tls_key },
        };
        _cleanup_close_ int dfd = -1;
        hd_key *k = NULL;
        char *e = NULL;
        int r = 0;

        *err = NULL;
        for (size_t i = 0; i < ELEMENTSOF(files) && r == 0 && config_relay_on(c); i++)
                r = relay_file_check(files[i].key, files[i].path, &e);
        if (r == 0 && config_relay_on(c) && c->relay.host_key)
                r = host_key_load(c, &k, &e);
        if (r == 0 && config_relay_on(c) && c->relay.host_pubkey_dir) {
                r = pubdir_open("[relay] host_pubkey_dir", c->relay.host_pubkey_dir, &dfd, &e);
                if (r == 0)
                        r = config_host_pubkeys_check(c, c->relay.host_pubkey_dir, dfd, &e);
        }
        if (r < 0) {
                if (asprintf(err, "%s: %s", c->path, e ? e : strerror(-r)) < 0)
                        *err = NULL;
                free(e);
                hd_key_free(k);
                return r;
        }
        if (ret_key)
                *ret_key = TAKE_PTR(k);
        if (ret_dfd)
                *ret_dfd = TAKE_FD(dfd);
        hd_key_free(k);
        return 0;
}

/* The keys this user may read, each failure skipped (a consumer reads the
 * keys that verify what it is sent, seldom every key of the host).  An
 * agent's own key that is not loaded stays NULL: config_key_lookup() then
 * answers with the default key, so a caller must treat a sender with
 * key_path set and no key as having no key.  Returns how many loaded. */
int config_load_keys_readable(struct config *c)
{
        char *e = NULL;
        size_t n = 0;

#define TRY(fn, ...) do {                                                     \
                if (fn(__VA_ARGS__, &e) == 0)                                 \
                        n++;                                                  \
                free(e);                                                      \
                e = NULL;                                                     \
        } while (0)
        if (c->default_key_path)
                TRY(key_load_hmac, c->default_key_path, &c->default_key);
        for (size_t i = 0; i < c->n_kids; i++)
                TRY(key_load_hmac, c->kid_paths[i], &c->kid_keys[i]);
        for (size_t i = 0; i < c->n_agents; i++) {
                struct config_agent *a = &c->agents[i];

                if (a->key_path) {
                        TRY(key_load_hmac, a->key_path, &a->key);
                        if (a->key)
                                hd_key_set_agent(a->key, a->name);
                }
                for (size_t j = 0; j < a->n_pubkey_paths; j++)
                        TRY(agent_pubkeys_add, c, a, a->pubkey_paths[j]);
        }
        if (c->pubkey_dir)
                TRY(pubkeys_load_dir, c);
#undef TRY
        n = c->default_key ? 1 : 0;
        for (size_t i = 0; i < c->n_kids; i++)
                n += c->kid_keys[i] != NULL;
        for (size_t i = 0; i < c->n_agents; i++)
                n += c->agents[i].key != NULL;
        return (int)(n + c->n_pubkeys);
}

static const hd_key *config_pubkey(const struct config *c, const char *kid,
                                   const char *agent)
{
        for (size_t i = 0; i < c->n_pubkeys; i++)
                if (kid ? !strcmp(hd_key_kid(c->pubkeys[i]), kid)
                        : !strcmp(hd_key_agent(c->pubkeys[i]), agent))
                        return c->pubkeys[i];
        return NULL;
}

const hd_key *config_key_lookup(void *cfg, const char *kid,
                                const char *from_agent)
{
        const struct config *c = cfg;
        const struct config_agent *a = config_agent(c, from_agent);
        const hd_key *k;

        /* A public key answers for its kid; hd_auth_check then holds it
         * to the agent it belongs to (key_agent_mismatch). */
        if (kid && (k = config_pubkey(c, kid, NULL)))
                return k;
        /* What follows are the HMAC keys: none for a sender that must
         * sign, whose public key makes hmac signature_required. */
        if (a && a->require_sig)
                return config_pubkey(c, NULL, a->name);
        if (kid) {
                /* A shared key: hd_auth_check refuses it for a sender with
                 * a key of its own, which it learns by asking without kid. */
                for (size_t i = 0; i < c->n_kids; i++)
                        if (!strcmp(c->kid_names[i], kid))
                                return c->kid_keys[i];
                return NULL;    /* a kid we do not hold: unknown_key */
        }
        if (a && a->key)
                return a->key;
        return c->default_key;
}

bool config_key_own(const struct config *c, const char *kid, const char *from_agent)
{
        const hd_key *k;

        if (!from_agent)
                return false;
        /* An own key is bound to its agent (config_load_keys()); a shared
         * one to nobody. */
        k = config_key_lookup((void *)c, kid, from_agent);
        return k && hd_key_agent(k) && !strcmp(hd_key_agent(k), from_agent);
}
