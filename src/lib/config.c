/* handoffd.conf: parsing (inih), defaults, checks and key loading.  Every
 * key is in the table below; an unknown section or key is an error with its
 * line, so a typo never silently falls back to a default.  Every mistake of
 * a file is reported, each as "FILE:LINE: message"; an unknown section at
 * its header's line, once, with the known name it is closest to. */
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
#include "util.h"

/* Errors reported for one file, at most; then "... and N more". */
#define CONFIG_MAX_ERRORS 20

struct parse_state {
        struct config *c;
        /* the reader: whole lines from f, counted as inih counts them */
        FILE *f;
        char *buf;
        size_t cap;
        int line;               /* the line being parsed, from 1 */
        bool key_line;          /* it should reach the handler */
        bool handled;           /* it did */
        int section_line;       /* the header of the current section */
        bool section_reported;  /* its "unknown section" is out */
        /* the errors: "FILE:LINE: message" lines */
        char *errs;
        size_t errs_len;
        unsigned n_errs;
};

static void errs_append(struct parse_state *st, const char *entry, size_t n)
{
        char *grown = realloc(st->errs, st->errs_len + n + 1);

        if (!grown)
                return;
        memcpy(grown + st->errs_len, entry, n + 1);
        st->errs = grown;
        st->errs_len += n;
}

/* Append "FILE:LINE: message" (LINE 0: "FILE: message"). */
_printf_(3, 0) static void perr_at(struct parse_state *st, int line,
                                   const char *fmt, va_list ap)
{
        _cleanup_free_ char *msg = NULL, *entry = NULL;
        int n;

        if (++st->n_errs > CONFIG_MAX_ERRORS || vasprintf(&msg, fmt, ap) < 0)
                return;
        n = line > 0 ? asprintf(&entry, "%s%s:%d: %s", st->errs_len ? "\n" : "",
                                st->c->path, line, msg)
                     : asprintf(&entry, "%s%s: %s", st->errs_len ? "\n" : "",
                                st->c->path, msg);
        if (n >= 0)
                errs_append(st, entry, (size_t)n);
}

/* An error of the line being parsed. */
_printf_(2, 3) static int perr(struct parse_state *st, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        perr_at(st, st->line, fmt, ap);
        va_end(ap);
        return 0;       /* inih: stop treating this line as good */
}

/* An error of another line (a section's header). */
_printf_(3, 4) static int perr_line(struct parse_state *st, int line,
                                    const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        perr_at(st, line, fmt, ap);
        va_end(ap);
        return 0;
}

/* An error of the file as a whole (no line). */
_printf_(2, 3) static void cerr(struct parse_state *st, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        perr_at(st, 0, fmt, ap);
        va_end(ap);
}

static int parse_bool(const char *s, bool *ret)
{
        if (!strcmp(s, "yes") || !strcmp(s, "true") || !strcmp(s, "on") ||
            !strcmp(s, "1"))
                *ret = true;
        else if (!strcmp(s, "no") || !strcmp(s, "false") ||
                 !strcmp(s, "off") || !strcmp(s, "0"))
                *ret = false;
        else
                return -EINVAL;
        return 0;
}

/* A number with an optional one-letter unit from units[] (letter, factor). */
static int parse_unit(const char *s, const char *letters,
                      const uint64_t *factors, uint64_t max, uint64_t *ret)
{
        char *end;
        unsigned long long x;
        uint64_t f = 1;

        if (!s || !isdigit((unsigned char)*s))
                return -EINVAL;
        errno = 0;
        x = strtoull(s, &end, 10);
        if (errno)
                return -ERANGE;
        if (*end) {
                const char *p = strchr(letters, *end);
                if (!p || end[1])
                        return -EINVAL;
                f = factors[p - letters];
        }
        if (x > max / f)
                return -ERANGE;
        *ret = x * f;
        return 0;
}

int config_parse_size(const char *s, uint64_t *ret)
{
        static const uint64_t f[] = { 1024, 1024, 1024 * 1024, 1024 * 1024,
                                      1024ULL * 1024 * 1024,
                                      1024ULL * 1024 * 1024 };
        return parse_unit(s, "kKMmGg", f, INT64_MAX, ret);
}

int config_parse_duration(const char *s, int64_t *ret)
{
        static const uint64_t f[] = { 1, 60, 3600, 86400, 604800 };
        uint64_t x;
        int r = parse_unit(s, "smhdw", f, INT32_MAX, &x);

        if (r < 0)
                return r;
        *ret = (int64_t)x;
        return 0;
}

static struct config_agent *agent_get(struct config *c, const char *name)
{
        struct config_agent *a;

        for (size_t i = 0; i < c->n_agents; i++)
                if (!strcmp(c->agents[i].name, name))
                        return &c->agents[i];
        a = realloc(c->agents, (c->n_agents + 1) * sizeof(*a));
        if (!a)
                return NULL;
        c->agents = a;
        a = &c->agents[c->n_agents++];
        memset(a, 0, sizeof(*a));
        a->name = strdup(name);
        a->act_max_files = 5;
        return a->name ? a : NULL;
}

static int set_str(char **dst, const char *v)
{
        char *s = strdup(v);
        if (!s)
                return -ENOMEM;
        free(*dst);
        *dst = s;
        return 0;
}

static int set_roles(struct config *c, const char *v)
{
        char *copy = strdup(v), *save = NULL, *tok;
        size_t n = 0;
        char **roles;

        if (!copy)
                return -ENOMEM;
        roles = calloc(strlen(v) / 2 + 2, sizeof(char *));
        if (!roles) {
                free(copy);
                return -ENOMEM;
        }
        for (tok = strtok_r(copy, ", \t", &save); tok;
             tok = strtok_r(NULL, ", \t", &save))
                roles[n++] = strdup(tok);
        free(copy);
        if (n == 0) {
                free(roles);
                return -EINVAL;
        }
        if (c->roles)
                for (char **p = c->roles; *p; p++)
                        free(*p);
        free(c->roles);
        c->roles = roles;
        return 0;
}

static int path_ok(const char *v)
{
        return v[0] == '/' || !strncmp(v, "credential:", 11);
}

static int handle_spool(struct parse_state *st, const char *k, const char *v)
{
        struct config *c = st->c;
        uint64_t u;

        if (!strcmp(k, "dir")) {
                if (v[0] != '/')
                        return perr(st, "[spool] dir must be an absolute path");
                return set_str(&c->spool_dir, v) == 0;
        }
        if (!strcmp(k, "fsync")) {
                if (parse_bool(v, &c->fsync) < 0)
                        return perr(st, "[spool] fsync: '%s' is not yes or no", v);
                return 1;
        }
        if (!strcmp(k, "max_file_size")) {
                if (config_parse_size(v, &u) < 0 || u < 1024 || u > 64 << 20)
                        return perr(st, "[spool] max_file_size: '%s' is not a size between 1K and 64M", v);
                c->max_file_size = u;
                return 1;
        }
        struct { const char *key; int64_t *dst; int64_t min; } durs[] = {
                { "resume_window", &c->resume_window, 1 },
                { "max_clock_skew", &c->max_clock_skew, 0 },
                { "max_window", &c->max_window, 1 },
                { "rescan_interval", &c->rescan_interval, 1 },
        };
        for (size_t i = 0; i < ELEMENTSOF(durs); i++)
                if (!strcmp(k, durs[i].key)) {
                        if (config_parse_duration(v, durs[i].dst) < 0 ||
                            *durs[i].dst < durs[i].min)
                                return perr(st, "[spool] %s: '%s' is not a duration (like 300, 5m, 1h)", k, v);
                        return 1;
                }
        return perr(st, "unknown key '%s' in [spool]", k);
}

static int handle_keys(struct parse_state *st, const char *k, const char *v)
{
        struct config *c = st->c;

        if (!strcmp(k, "pubkey_dir")) {
                if (v[0] != '/')
                        return perr(st, "[keys] pubkey_dir must be an absolute path");
                return set_str(&c->pubkey_dir, v) == 0;
        }
        if (!path_ok(v))
                return perr(st, "[keys] %s: '%s' is neither an absolute path nor credential:NAME", k, v);
        if (!strcmp(k, "default"))
                return set_str(&c->default_key_path, v) == 0;
        if (!hd_agent_valid(k))
                return perr(st, "[keys] '%s' is not a valid key name", k);
        for (size_t i = 0; i < c->n_kids; i++)
                if (!strcmp(c->kid_names[i], k))
                        return perr(st, "[keys] '%s' given twice", k);
        size_t n = c->n_kids + 1;
        char **names = realloc(c->kid_names, n * sizeof(char *));
        if (names)
                c->kid_names = names;
        char **paths = realloc(c->kid_paths, n * sizeof(char *));
        if (paths)
                c->kid_paths = paths;
        hd_key **keys = realloc(c->kid_keys, n * sizeof(hd_key *));
        if (keys)
                c->kid_keys = keys;
        if (!names || !paths || !keys)
                return perr(st, "out of memory");
        c->kid_names[c->n_kids] = strdup(k);
        c->kid_paths[c->n_kids] = strdup(v);
        c->kid_keys[c->n_kids] = NULL;
        c->n_kids = n;
        return 1;
}

static int handle_agent(struct parse_state *st, const char *name,
                        const char *k, const char *v)
{
        struct config_agent *a;
        int64_t n;

        if (!hd_agent_valid(name)) {
                /* once, at the header, not at each of its keys */
                if (st->section_reported)
                        return 0;
                st->section_reported = true;
                return perr_line(st, st->section_line,
                                 "[agent %s]: '%s' is not a valid agent name", name, name);
        }
        a = agent_get(st->c, name);
        if (!a)
                return perr(st, "out of memory");
        if (!strcmp(k, "state_dir")) {
                if (v[0] != '/')
                        return perr(st, "[agent %s] state_dir must be an absolute path", name);
                return set_str(&a->state_dir, v) == 0;
        }
        if (!strcmp(k, "key")) {
                if (!path_ok(v))
                        return perr(st, "[agent %s] key: '%s' is neither an absolute path nor credential:NAME", name, v);
                return set_str(&a->key_path, v) == 0;
        }
        if (!strcmp(k, "pubkeys")) {
                char **paths;

                if (v[0] != '/')
                        return perr(st, "[agent %s] pubkeys: '%s' is not an absolute path", name, v);
                paths = realloc(a->pubkey_paths, (a->n_pubkey_paths + 1) * sizeof(char *));
                if (!paths)
                        return perr(st, "out of memory");
                a->pubkey_paths = paths;
                paths[a->n_pubkey_paths] = strdup(v);
                if (!paths[a->n_pubkey_paths])
                        return perr(st, "out of memory");
                a->n_pubkey_paths++;
                return 1;
        }
        if (!strcmp(k, "require")) {
                if (strcmp(v, "sig") && strcmp(v, "any"))
                        return perr(st, "[agent %s] require: '%s' is not sig or any", name, v);
                a->require_sig = !strcmp(v, "sig");
                return 1;
        }
        if (!strcmp(k, "delivery")) {
                if (strcmp(v, "bootstrap") && strcmp(v, "vox") && strcmp(v, "act"))
                        return perr(st, "[agent %s] delivery: '%s' is not bootstrap, vox or act", name, v);
                return set_str(&a->delivery, v) == 0;
        }
        if (!strcmp(k, "act_format")) {
                if (strcmp(v, "xml") && strcmp(v, "md"))
                        return perr(st, "[agent %s] act_format: '%s' is not xml or md", name, v);
                return set_str(&a->act_format, v) == 0;
        }
        if (!strcmp(k, "act_max_files")) {
                if (parse_int64(v, 1, 1000, &n) < 0)
                        return perr(st, "[agent %s] act_max_files: '%s' is not a number from 1 to 1000", name, v);
                a->act_max_files = (unsigned)n;
                return 1;
        }
        return perr(st, "unknown key '%s' in [agent %s]", k, name);
}

static int handle_retention(struct parse_state *st, const char *k,
                            const char *v)
{
        struct config *c = st->c;
        int64_t n;

        if (!strcmp(k, "archive_max_items") || !strcmp(k, "rejected_max_items")) {
                if (parse_int64(v, 0, INT32_MAX, &n) < 0)
                        return perr(st, "[retention] %s: '%s' is not a count", k, v);
                *(k[0] == 'a' ? &c->archive_max_items : &c->rejected_max_items) = (uint64_t)n;
                return 1;
        }
        if (!strcmp(k, "archive_max_bytes")) {
                if (config_parse_size(v, &c->archive_max_bytes) < 0)
                        return perr(st, "[retention] %s: '%s' is not a size (like 10M)", k, v);
                return 1;
        }
        if (!strcmp(k, "archive_max_age") || !strcmp(k, "rejected_max_age")) {
                if (config_parse_duration(v, k[0] == 'a' ? &c->archive_max_age
                                                         : &c->rejected_max_age) < 0)
                        return perr(st, "[retention] %s: '%s' is not a duration (like 7d)", k, v);
                return 1;
        }
        return perr(st, "unknown key '%s' in [retention]", k);
}

/* [relay]: the NATS side of relay.c.  Secrets stay in files (credentials,
 * nkey_seed, TLS key); password is the one exception NATS user/password
 * auth needs. */
static int handle_relay(struct parse_state *st, const char *k, const char *v)
{
        struct config_relay *rl = &st->c->relay;
        int64_t n;

        if (!strcmp(k, "servers")) {
                for (const char *p = v; *p; p++)
                        if ((unsigned char)*p < 0x20 || *p == 0x7f)
                                return perr(st, "[relay] servers: control character in '%s'", v);
                return set_str(&rl->servers, v) == 0;
        }
        if (!strcmp(k, "host")) {
                if (!hd_agent_valid(v))
                        return perr(st, "[relay] host: '%s' is not a valid host name (lowercase letters, digits, '-', '_')", v);
                return set_str(&rl->host, v) == 0;
        }
        if (!strcmp(k, "stream")) {
                if (!hd_id_valid(v) || strlen(v) > 64)
                        return perr(st, "[relay] stream: '%s' is not a valid stream name (letters, digits, '-', '_')", v);
                return set_str(&rl->stream, v) == 0;
        }
        if (!strcmp(k, "replicas")) {
                if (parse_int64(v, 1, 5, &n) < 0)
                        return perr(st, "[relay] replicas: '%s' is not a number from 1 to 5", v);
                rl->replicas = (int)n;
                return 1;
        }
        if (!strcmp(k, "user"))
                return set_str(&rl->user, v) == 0;
        if (!strcmp(k, "password"))
                return set_str(&rl->password, v) == 0;
        if (!strcmp(k, "nkey"))
                return set_str(&rl->nkey, v) == 0;
        struct { const char *key; char **dst; } paths[] = {
                { "credentials", &rl->credentials }, { "nkey_seed", &rl->nkey_seed },
                { "tls_ca", &rl->tls_ca }, { "tls_cert", &rl->tls_cert },
                { "tls_key", &rl->tls_key },
        };
        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                if (!strcmp(k, paths[i].key)) {
                        if (v[0] != '/')
                                return perr(st, "[relay] %s must be an absolute path", k);
                        return set_str(paths[i].dst, v) == 0;
                }
        return perr(st, "unknown key '%s' in [relay]", k);
}

static int handle_remote(struct parse_state *st, const char *name,
                         const char *k, const char *v)
{
        struct config *c = st->c;
        struct config_remote *rm = NULL;

        if (!hd_agent_valid(name))
                return perr(st, "[remote %s]: '%s' is not a valid agent name", name, name);
        if (strcmp(k, "host"))
                return perr(st, "unknown key '%s' in [remote %s]", k, name);
        if (!hd_agent_valid(v))
                return perr(st, "[remote %s] host: '%s' is not a valid host name", name, v);
        for (size_t i = 0; i < c->n_remotes; i++)
                if (!strcmp(c->remotes[i].name, name))
                        rm = &c->remotes[i];
        if (!rm) {
                rm = realloc(c->remotes, (c->n_remotes + 1) * sizeof(*rm));
                if (!rm)
                        return perr(st, "out of memory");
                c->remotes = rm;
                rm = &c->remotes[c->n_remotes++];
                *rm = (struct config_remote) { .name = strdup(name) };
                if (!rm->name)
                        return perr(st, "out of memory");
        }
        return set_str(&rm->host, v) == 0;
}

/* Levenshtein distance of a and b (short names), capped at 9. */
static unsigned edit_distance(const char *a, size_t la, const char *b)
{
        size_t lb = strlen(b);
        unsigned row[32], prev, cur;

        if (la >= ELEMENTSOF(row) || lb >= ELEMENTSOF(row))
                return 9;
        for (size_t j = 0; j <= lb; j++)
                row[j] = (unsigned)j;
        for (size_t i = 1; i <= la; i++) {
                prev = row[0];
                row[0] = (unsigned)i;
                for (size_t j = 1; j <= lb; j++) {
                        unsigned sub = prev + (tolower((unsigned char)a[i - 1]) != b[j - 1]);
                        cur = row[j];
                        row[j] = row[j] + 1 < row[j - 1] + 1 ? row[j] + 1 : row[j - 1] + 1;
                        if (sub < row[j])
                                row[j] = sub;
                        prev = cur;
                }
        }
        return row[lb] < 9 ? row[lb] : 9;
}

/* The section names handoffd.conf(5) documents, for "did you mean". */
static const char *const config_sections[] = {
        "spool", "keys", "agent", "retention", "control", "metrics", "payload",
        "relay", "remote",
};

/* Reported once, at the section's header; its keys are then ignored. */
static int unknown_section(struct parse_state *st, const char *section)
{
        size_t word = strcspn(section, " \t");
        const char *rest = section + word, *best = NULL;
        unsigned best_d = 3;

        if (st->section_reported)
                return 0;
        st->section_reported = true;
        for (size_t i = 0; i < ELEMENTSOF(config_sections); i++) {
                unsigned d = edit_distance(section, word, config_sections[i]);
                if (d < best_d && d < strlen(config_sections[i])) {
                        best_d = d;
                        best = config_sections[i];
                }
        }
        while (*rest == ' ' || *rest == '\t')
                rest++;
        /* [agent NAME] and [remote NAME] name what they configure */
        bool named = best && (!strcmp(best, "agent") || !strcmp(best, "remote"));
        if (named && !*rest)
                return perr_line(st, st->section_line,
                                 "[%s]: this section names its %s: [%s NAME]", section,
                                 best, best);
        if (named)
                return perr_line(st, st->section_line,
                                 "unknown section [%s] (did you mean [%s %s]?)", section, best, rest);
        if (best)
                return perr_line(st, st->section_line,
                                 "unknown section [%s] (did you mean [%s]?)", section, best);
        return perr_line(st, st->section_line, "unknown section [%s]", section);
}

static int handler(void *user, const char *section, const char *k,
                   const char *v)
{
        struct parse_state *st = user;
        struct config *c = st->c;

        st->handled = true;

        if (!strcmp(section, "spool"))
                return handle_spool(st, k, v);
        if (!strcmp(section, "keys"))
                return handle_keys(st, k, v);
        if (!strncmp(section, "agent ", 6))
                return handle_agent(st, section + 6, k, v);
        if (!strcmp(section, "retention"))
                return handle_retention(st, k, v);
        if (!strcmp(section, "relay"))
                return handle_relay(st, k, v);
        if (!strncmp(section, "remote ", 7))
                return handle_remote(st, section + 7, k, v);
        if (!strcmp(section, "control")) {
                if (!strcmp(k, "socket")) {
                        if (v[0] != '/')
                                return perr(st, "[control] socket must be an absolute path");
                        return set_str(&c->control_socket, v) == 0;
                }
                if (!strcmp(k, "group"))
                        return set_str(&c->control_group, v) == 0;
                return perr(st, "unknown key '%s' in [control]", k);
        }
        if (!strcmp(section, "metrics")) {
                if (!strcmp(k, "textfile")) {
                        if (v[0] != '/')
                                return perr(st, "[metrics] textfile must be an absolute path");
                        return set_str(&c->metrics_textfile, v) == 0;
                }
                return perr(st, "unknown key '%s' in [metrics]", k);
        }
        if (!strcmp(section, "payload")) {
                if (!strcmp(k, "roles"))
                        return set_roles(c, v) == 0 ? 1 : perr(st, "[payload] roles: empty list");
                return perr(st, "unknown key '%s' in [payload]", k);
        }
        if (!*section)
                return perr(st, "key '%s' outside of any section", k);
        return unknown_section(st, section);
}

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

static int config_check_relay(struct config *c, char **err)
{
        struct config_relay *rl = &c->relay;
        char h[256];

#define FAIL(...) do { if (asprintf(err, __VA_ARGS__) < 0) *err = NULL; return -EINVAL; } while (0)
        for (size_t i = 0; i < c->n_remotes; i++)
                if (config_agent(c, c->remotes[i].name))
                        FAIL("%s: [remote %s]: the agent is also an [agent %s] of this host",
                             c->path, c->remotes[i].name, c->remotes[i].name);
        if (!rl->stream && !(rl->stream = strdup("HANDOFF")))
                return -ENOMEM;
        if (rl->replicas == 0)
                rl->replicas = 1;
        if (!config_relay_on(c))
                return 0;
        if ((rl->tls_cert != NULL) != (rl->tls_key != NULL))
                FAIL("%s: [relay] tls_cert and tls_key go together", c->path);
        if ((rl->user != NULL) != (rl->password != NULL))
                FAIL("%s: [relay] user and password go together", c->path);
        if ((rl->nkey != NULL) != (rl->nkey_seed != NULL))
                FAIL("%s: [relay] nkey and nkey_seed go together", c->path);
        if (!rl->host) {
                /* The short host name, as subjects need it. */
                if (gethostname(h, sizeof(h) - 1) < 0)
                        return -errno;
                h[sizeof(h) - 1] = '\0';
                h[strcspn(h, ".")] = '\0';
                for (char *p = h; *p; p++)
                        *p = (char)tolower((unsigned char)*p);
                if (!hd_agent_valid(h))
                        FAIL("%s: [relay] host is not set and the host name '%s' is not usable in a subject", c->path, h);
                if (!(rl->host = strdup(h)))
                        return -ENOMEM;
        }
        for (size_t i = 0; i < c->n_remotes; i++)
                if (!strcmp(c->remotes[i].host, rl->host))
                        FAIL("%s: [remote %s] host is this host (%s)", c->path,
                             c->remotes[i].name, rl->host);
#undef FAIL
        return 0;
}

/* What no single line shows: each problem reported, none stops the rest. */
static int config_check(struct parse_state *st)
{
        struct config *c = st->c;
        bool any_key = c->default_key_path || c->n_kids > 0 || c->pubkey_dir;
        int r;

        if (!c->spool_dir)
                cerr(st, "[spool] dir is not set");
        for (size_t i = 0; i < c->n_agents; i++) {
                struct config_agent *a = &c->agents[i];
                if (!a->state_dir)
                        cerr(st, "[agent %s] state_dir is not set", a->name);
                if (a->key_path || a->n_pubkey_paths > 0)
                        any_key = true;
                if (a->require_sig && a->n_pubkey_paths == 0 && !c->pubkey_dir)
                        cerr(st, "[agent %s] require = sig, but no public key is configured "
                             "(pubkeys = or [keys] pubkey_dir)", a->name);
                if (!a->delivery && !(a->delivery = strdup("bootstrap")))
                        return -ENOMEM;
                if (!a->act_format && !(a->act_format = strdup("xml")))
                        return -ENOMEM;
        }
        if (!any_key)
                cerr(st, "no key configured ([keys] default or pubkey_dir, [agent NAME] key "
                     "or pubkeys)");
        if (c->max_window < c->max_clock_skew)
                cerr(st, "[spool] max_window is shorter than max_clock_skew");
        /* the relay's checks stop at their first problem: one more line */
        char *rerr = NULL;
        r = config_check_relay(c, &rerr);
        if (r == -EINVAL && rerr) {
                st->n_errs++;
                if (st->errs_len)
                        errs_append(st, "\n", 1);
                errs_append(st, rerr, strlen(rerr));
        }
        free(rerr);
        if (r < 0 && r != -EINVAL)
                return r;
        return st->n_errs ? -EINVAL : 0;
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

/* [keys] pubkey_dir: every <agent>.pub in it.  Whoever can add a file there
 * can sign as the agent it names: the directory must not be writable by
 * group or others (each file is held to the same rule). */
static int pubkeys_load_dir(struct config *c, char **err)
{
        _cleanup_close_ int dfd = -1;
        char **names = NULL;
        size_t n = 0;
        struct stat st;
        struct dirent *de;
        DIR *d;
        int r = 0;

        dfd = open(c->pubkey_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || fstat(dfd, &st) < 0) {
                r = -errno;
                if (asprintf(err, "[keys] pubkey_dir %s: %s", c->pubkey_dir, strerror(-r)) < 0)
                        *err = NULL;
                return r;
        }
        if (st.st_mode & 0022) {
                if (asprintf(err, "[keys] pubkey_dir %s has mode %04o: it must not be writable "
                             "by group or others (chmod 755)", c->pubkey_dir,
                             (unsigned)(st.st_mode & 07777)) < 0)
                        *err = NULL;
                return -EPERM;
        }
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

static int config_load_keys(struct config *c, char **err)
{
        char *e = NULL;
        int r;

#define LOAD(fn, ...) do {                                                    \
                r = fn(__VA_ARGS__, &e);                                      \
                if (r < 0) {                                                  \
                        if (asprintf(err, "%s: %s", c->path, e ? e : strerror(-r)) < 0) \
                                *err = NULL;                                  \
                        free(e);                                              \
                        return r;                                             \
                }                                                             \
        } while (0)
        if (c->default_key_path)
                LOAD(key_load_hmac, c->default_key_path, &c->default_key);
        for (size_t i = 0; i < c->n_kids; i++)
                LOAD(key_load_hmac, c->kid_paths[i], &c->kid_keys[i]);
        for (size_t i = 0; i < c->n_agents; i++) {
                struct config_agent *a = &c->agents[i];

                if (a->key_path) {
                        LOAD(key_load_hmac, a->key_path, &a->key);
                        /* the sender's own key speaks for it alone */
                        hd_key_set_agent(a->key, a->name);
                }
                for (size_t j = 0; j < a->n_pubkey_paths; j++)
                        LOAD(agent_pubkeys_add, c, a, a->pubkey_paths[j]);
        }
        if (c->pubkey_dir)
                LOAD(pubkeys_load_dir, c);
        LOAD(pubkeys_check, c);
#undef LOAD
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

/* The line inih just parsed, checked now that it is done: one that should
 * have reached the handler and did not is a syntax error inih found. */
static void reader_line_done(struct parse_state *st)
{
        if (st->line > 0 && st->key_line && !st->handled)
                perr(st, "expected KEY = VALUE or [SECTION]");
}

/* inih's reader (fgets-like): whole lines, each counted once, so that
 * st->line is the line the handler is called for.  A line longer than
 * inih takes is an error of its own, never split into two. */
static char *reader(char *str, int num, void *stream)
{
        struct parse_state *st = stream;
        const char *p, *end;
        ssize_t n;

        reader_line_done(st);
        n = getline(&st->buf, &st->cap, st->f);
        if (n < 0)
                return NULL;
        st->line++;
        st->key_line = st->handled = false;
        if (n > num - 3) {
                perr(st, "line longer than %d characters", num - 3);
                memcpy(str, "\n", 2);
                return str;
        }
        memcpy(str, st->buf, (size_t)n + 1);
        p = st->buf;
        if (st->line == 1 && !strncmp(p, "\xEF\xBB\xBF", 3))
                p += 3;
        while (isspace((unsigned char)*p))
                p++;
        if (!*p || *p == ';' || *p == '#')
                return str;
        if (*p != '[') {
                st->key_line = true;    /* KEY = VALUE, or a continuation */
                return str;
        }
        end = strchr(p, ']');
        if (!end) {
                perr(st, "'[' without ']'");
                return str;
        }
        st->section_line = st->line;
        st->section_reported = false;
        return str;
}

int config_load(const char *path, bool load_keys, struct config **ret,
                char **err)
{
        struct parse_state st = { 0 };
        struct config *c;
        int line, r;

        *err = NULL;
        c = calloc(1, sizeof(*c));
        if (!c || !(c->path = strdup(path))) {
                free(c);
                return -ENOMEM;
        }
        c->fsync = true;
        c->max_file_size = HD_DEFAULT_MAX_SIZE;
        c->resume_window = 300;
        c->max_clock_skew = HD_DEFAULT_MAX_CLOCK_SKEW;
        c->max_window = HD_DEFAULT_MAX_WINDOW;
        c->rescan_interval = 30;
        c->control_socket = strdup(HD_RUNSTATEDIR "/handoffd/control.sock");
        if (!c->control_socket || set_roles(c, "strategist,executor,proxy-auditor,human") < 0) {
                config_free(c);
                return -ENOMEM;
        }
        st.c = c;
        st.f = fopen(path, "re");
        if (!st.f) {
                r = -errno;
                if (asprintf(err, "%s: cannot read: %s", path, strerror(-r)) < 0)
                        *err = NULL;
                config_free(c);
                return r;
        }
        line = ini_parse_stream(reader, &st, handler, &st);
        r = ferror(st.f) ? -EIO : 0;
        fclose(st.f);
        free(st.buf);
        if (line == -2)
                r = -ENOMEM;
        if (r == 0 && line > 0 && st.n_errs == 0)
                perr_line(&st, line, "syntax error");
        /* a file's own mistakes first; what is missing only once they
         * are fixed (a bad line often leaves a key "not set") */
        if (r == 0 && st.n_errs == 0)
                r = config_check(&st);
        else if (r == 0)
                r = -EINVAL;
        if (r == -EIO && !st.errs)
                cerr(&st, "cannot read: %s", strerror(EIO));
        if (st.n_errs > CONFIG_MAX_ERRORS) {
                char more[64];
                int n = snprintf(more, sizeof(more), "\n... and %u more",
                                 st.n_errs - CONFIG_MAX_ERRORS);
                errs_append(&st, more, (size_t)n);
        }
        if (r == 0 && load_keys)
                r = config_load_keys(c, err);
        else if (r < 0)
                *err = TAKE_PTR(st.errs);
        free(st.errs);
        if (r < 0) {
                config_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

int config_warnings(const struct config *c,
                    void (*emit)(void *userdata, const char *msg), void *userdata)
{
        int n = 0;

        if (c->n_agents == 0) {
                char *m = NULL;
                if (asprintf(&m, "%s has no [agent NAME] section: nothing will be claimed, "
                                 "only rejected and expired", c->path) >= 0) {
                        emit(userdata, m);
                        free(m);
                }
                n++;
        }
        if (c->control_group && !getgrnam(c->control_group)) {
                char *m = NULL;
                if (asprintf(&m, "[control] group '%s' does not exist: the control socket "
                                 "stays with the daemon's own group", c->control_group) >= 0) {
                        emit(userdata, m);
                        free(m);
                }
                n++;
        }
        return n;
}

void config_free(struct config *c)
{
        if (!c)
                return;
        free(c->path);
        free(c->spool_dir);
        free(c->default_key_path);
        hd_key_free(c->default_key);
        for (size_t i = 0; i < c->n_kids; i++) {
                free(c->kid_names[i]);
                free(c->kid_paths[i]);
                hd_key_free(c->kid_keys[i]);
        }
        free(c->kid_names);
        free(c->kid_paths);
        free(c->kid_keys);
        free(c->pubkey_dir);
        for (size_t i = 0; i < c->n_pubkeys; i++)
                hd_key_free(c->pubkeys[i]);
        free(c->pubkeys);
        for (size_t i = 0; i < c->n_agents; i++) {
                struct config_agent *a = &c->agents[i];
                free(a->name);
                free(a->state_dir);
                free(a->key_path);
                hd_key_free(a->key);
                for (size_t j = 0; j < a->n_pubkey_paths; j++)
                        free(a->pubkey_paths[j]);
                free(a->pubkey_paths);
                free(a->delivery);
                free(a->act_format);
        }
        free(c->agents);
        free(c->control_socket);
        free(c->control_group);
        free(c->metrics_textfile);
        struct config_relay *rl = &c->relay;
        free(rl->servers);
        free(rl->host);
        free(rl->stream);
        free(rl->credentials);
        free(rl->user);
        if (rl->password)
                explicit_bzero(rl->password, strlen(rl->password));
        free(rl->password);
        free(rl->nkey);
        free(rl->nkey_seed);
        free(rl->tls_ca);
        free(rl->tls_cert);
        free(rl->tls_key);
        for (size_t i = 0; i < c->n_remotes; i++) {
                free(c->remotes[i].name);
                free(c->remotes[i].host);
        }
        free(c->remotes);
        if (c->roles)
                for (char **p = c->roles; *p; p++)
                        free(*p);
        free(c->roles);
        free(c);
}

const struct config_agent *config_agent(const struct config *c,
                                        const char *name)
{
        if (!name)
                return NULL;
        for (size_t i = 0; i < c->n_agents; i++)
                if (!strcmp(c->agents[i].name, name))
                        return &c->agents[i];
        return NULL;
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

const char *config_remote(const struct config *c, const char *name)
{
        if (!name)
                return NULL;
        for (size_t i = 0; i < c->n_remotes; i++)
                if (!strcmp(c->remotes[i].name, name))
                        return c->remotes[i].host;
        return NULL;
}

bool config_relay_on(const struct config *c)
{
        const char *s = c->relay.servers;

        return s && s[strspn(s, " \t,")];
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
