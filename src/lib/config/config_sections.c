/* handoffd.conf's sections and keys: inih's handler and one function per
 * section, with each section's keys (for "did you mean":
 * config_unknown.c).  Each bad value is an error of its line
 * (config_err); the values are parsed by config_values.c. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_err.h"
#include "config_sections.h"
#include "config_unknown.h"
#include "config_values.h"
#include "util.h"

/* The keys of each section, for "did you mean" ([keys] takes any name: a
 * kid).  test_ctl checks each key of etc/handoffd.conf is offered. */
static const char *const keys_spool[] = {
        "dir", "fsync", "max_file_size", "max_waiting", "max_waiting_per_sender",
        "resume_window", "max_clock_skew", "max_window", "rescan_interval", NULL };
static const char *const keys_agent[] = {
        "state_dir", "key", "pubkeys", "require", "delivery", "act_format",
        "act_max_files", "description", "skill", "completes", NULL };
static const char *const keys_retention[] = {
        "archive_max_items", "archive_max_bytes", "archive_max_age",
        "rejected_max_items", "rejected_max_age", "rejected_max_bytes",
        "unclaimed_max_items", "unclaimed_max_bytes", NULL };
static const char *const keys_relay[] = {
        "servers", "host", "stream", "replicas", "user", "password", "nkey",
        "credentials", "nkey_seed", "tls_ca", "tls_cert", "tls_key", "host_key",
        "host_pubkey_dir", NULL };
static const char *const keys_remote[] = { "host", "a2a", "token_file", "ca_file",
                                            "description", "skill", "a2a_follow_max",
                                            "a2a_card_cross_origin", "a2a_card_key", NULL };
static const char *const keys_hub[] = {
        "listen", "tls_cert", "tls_key", "token_dir", "state_dir", "timeout",
        "max_connections", "max_per_address", "request_timeout", "a2a_kept_max_items",
        "a2a_kept_max_bytes", "rate_per_token", "burst_per_token", "max_requests_per_token",
        "max_waits_per_token", "default_agent", "a2a_block_max", "signing_key", "push_allow",
        "mcp_origins", "mcp_sessions_per_token", "mcp_session_idle", NULL };
static const char *const keys_control[] = { "socket", "group", "hub_user", NULL };
static const char *const keys_metrics[] = { "textfile", NULL };
static const char *const keys_payload[] = { "roles", NULL };

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
                        return config_err(st, "[spool] dir must be an absolute path");
                return config_set_str(&c->spool_dir, v) == 0;
        }
        if (!strcmp(k, "fsync")) {
                if (config_parse_bool(v, &c->fsync) < 0)
                        return config_err(st, "[spool] fsync: '%s' is not yes or no", v);
                return 1;
        }
        if (!strcmp(k, "max_file_size")) {
                if (config_parse_size(v, &u) < 0 || u < 1024 || u > 64 << 20)
                        return config_err(st, "[spool] max_file_size: '%s' is not a size between 1K and 64M", v);
                c->max_file_size = u;
                return 1;
        }
        if (!strcmp(k, "max_waiting") || !strcmp(k, "max_waiting_per_sender")) {
                int64_t n;
                if (parse_int64(v, 0, INT32_MAX, &n) < 0)
                        return config_err(st, "[spool] %s: '%s' is not a count", k, v);
                *(k[11] ? &c->max_waiting_per_sender : &c->max_waiting) = (uint64_t)n;
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
                                return config_err(st, "[spool] %s: '%s' is not a duration (like 300, 5m, 1h)", k, v);
                        return 1;
                }
        return config_unknown_key(st, "spool", NULL, k, keys_spool);
}

static int handle_keys(struct parse_state *st, const char *k, const char *v)
{
        struct config *c = st->c;

        if (!strcmp(k, "pubkey_dir")) {
                if (v[0] != '/')
                        return config_err(st, "[keys] pubkey_dir must be an absolute path");
                return config_set_str(&c->pubkey_dir, v) == 0 &&
                       config_note_line(st, c->pubkey_dir) == 0;
        }
        if (!path_ok(v))
                return config_err(st, "[keys] %s: '%s' is neither an absolute path nor credential:NAME", k, v);
        if (!strcmp(k, "default"))
                return config_set_str(&c->default_key_path, v) == 0 &&
                       config_note_line(st, c->default_key_path) == 0;
        if (!hd_agent_valid(k))
                return config_err(st, "[keys] '%s' is not a valid key name", k);
        for (size_t i = 0; i < c->n_kids; i++)
                if (!strcmp(c->kid_names[i], k))
                        return config_err(st, "[keys] '%s' given twice", k);
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
                return config_err(st, "out of memory");
        c->kid_names[c->n_kids] = strdup(k);
        c->kid_paths[c->n_kids] = strdup(v);
        c->kid_keys[c->n_kids] = NULL;
        c->n_kids = n;
        return config_note_line(st, c->kid_paths[n - 1]) == 0;
}

/* "skill = ID: description" (A2A agent card): ID as a handoff_id.  Of
 * [SECTION NAME], an [agent]'s or a [remote]'s. */
static int card_skill(struct parse_state *st, const char *section, const char *name,
                      char ***skill_ids, char ***skill_descs, size_t *n_skills, const char *v)
{
        const char *colon = strchr(v, ':'), *d;
        char **ids, **descs, id[129];
        size_t n;

        n = colon ? (size_t)(colon - v) : 0;
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                n--;
        for (d = colon ? colon + 1 : ""; *d == ' ' || *d == '\t'; d++)
                ;
        if (n == 0 || n >= sizeof(id) || !*d)
                return config_err(st, "[%s %s] skill: '%s' is not ID: description", section,
                                  name, v);
        memcpy(id, v, n);
        id[n] = '\0';
        if (!hd_id_valid(id))
                return config_err(st, "[%s %s] skill: '%s' is not a valid skill id "
                                  "(letters, digits, - and _)", section, name, id);
        if (*n_skills >= CONFIG_MAX_SKILLS)
                return config_err(st, "[%s %s] more than %d skills", section, name,
                                  CONFIG_MAX_SKILLS);
        ids = realloc(*skill_ids, (*n_skills + 1) * sizeof(char *));
        if (ids)
                *skill_ids = ids;
        descs = realloc(*skill_descs, (*n_skills + 1) * sizeof(char *));
        if (descs)
                *skill_descs = descs;
        if (!ids || !descs)
                return config_err(st, "out of memory");
        ids[*n_skills] = strdup(id);
        descs[*n_skills] = strdup(d);
        (*n_skills)++;  /* freed by config_free() either way */
        if (!ids[*n_skills - 1] || !descs[*n_skills - 1])
                return config_err(st, "out of memory");
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
                return config_err_line(st, st->section_line,
                                 "[agent %s]: '%s' is not a valid agent name", name, name);
        }
        a = agent_get(st->c, name);
        if (!a)
                return config_err(st, "out of memory");
        if (!strcmp(k, "state_dir")) {
                if (v[0] != '/')
                        return config_err(st, "[agent %s] state_dir must be an absolute path", name);
                return config_set_str(&a->state_dir, v) == 0;
        }
        if (!strcmp(k, "key")) {
                if (!path_ok(v))
                        return config_err(st, "[agent %s] key: '%s' is neither an absolute path nor credential:NAME", name, v);
                return config_set_str(&a->key_path, v) == 0 &&
                       config_note_line(st, a->key_path) == 0;
        }
        if (!strcmp(k, "pubkeys")) {
                char **paths;

                if (v[0] != '/')
                        return config_err(st, "[agent %s] pubkeys: '%s' is not an absolute path", name, v);
                paths = realloc(a->pubkey_paths, (a->n_pubkey_paths + 1) * sizeof(char *));
                if (!paths)
                        return config_err(st, "out of memory");
                a->pubkey_paths = paths;
                paths[a->n_pubkey_paths] = strdup(v);
                if (!paths[a->n_pubkey_paths])
                        return config_err(st, "out of memory");
                a->n_pubkey_paths++;
                return config_note_line(st, paths[a->n_pubkey_paths - 1]) == 0;
        }
        if (!strcmp(k, "require")) {
                if (strcmp(v, "sig") && strcmp(v, "any"))
                        return config_err(st, "[agent %s] require: '%s' is not sig or any", name, v);
                a->require_sig = !strcmp(v, "sig");
                return 1;
        }
        if (!strcmp(k, "delivery")) {
                if (strcmp(v, "bootstrap") && strcmp(v, "vox") && strcmp(v, "act"))
                        return config_err(st, "[agent %s] delivery: '%s' is not bootstrap, vox or act", name, v);
                return config_set_str(&a->delivery, v) == 0;
        }
        if (!strcmp(k, "act_format")) {
                if (strcmp(v, "xml") && strcmp(v, "md"))
                        return config_err(st, "[agent %s] act_format: '%s' is not xml or md", name, v);
                return config_set_str(&a->act_format, v) == 0;
        }
        if (!strcmp(k, "act_max_files")) {
                if (parse_int64(v, 1, 1000, &n) < 0)
                        return config_err(st, "[agent %s] act_max_files: '%s' is not a number from 1 to 1000", name, v);
                a->act_max_files = (unsigned)n;
                return 1;
        }
        if (!strcmp(k, "completes")) {
                if (config_parse_bool(v, &a->completes) < 0)
                        return config_err(st, "[agent %s] completes: '%s' is not yes or no", name, v);
                return 1;
        }
        if (!strcmp(k, "description"))
                return config_set_str(&a->description, v) == 0;
        if (!strcmp(k, "skill"))
                return card_skill(st, "agent", a->name, &a->skill_ids, &a->skill_descs,
                                  &a->n_skills, v);
        return config_unknown_key(st, "agent", name, k, keys_agent);
}

static int handle_retention(struct parse_state *st, const char *k,
                            const char *v)
{
        struct config *c = st->c;
        int64_t n;

        struct { const char *key; uint64_t *dst; bool size; } limits[] = {
                { "archive_max_items", &c->archive_max_items, false },
                { "rejected_max_items", &c->rejected_max_items, false },
                { "unclaimed_max_items", &c->unclaimed_max_items, false },
                { "archive_max_bytes", &c->archive_max_bytes, true },
                { "rejected_max_bytes", &c->rejected_max_bytes, true },
                { "unclaimed_max_bytes", &c->unclaimed_max_bytes, true },
        };
        for (size_t i = 0; i < ELEMENTSOF(limits); i++) {
                if (strcmp(k, limits[i].key))
                        continue;
                if (limits[i].size) {
                        if (config_parse_size(v, limits[i].dst) < 0)
                                return config_err(st, "[retention] %s: '%s' is not a size (like 10M)", k, v);
                        return 1;
                }
                if (parse_int64(v, 0, INT32_MAX, &n) < 0)
                        return config_err(st, "[retention] %s: '%s' is not a count", k, v);
                *limits[i].dst = (uint64_t)n;
                return 1;
        }
        if (!strcmp(k, "archive_max_age") || !strcmp(k, "rejected_max_age")) {
                if (config_parse_duration(v, k[0] == 'a' ? &c->archive_max_age
                                                         : &c->rejected_max_age) < 0)
                        return config_err(st, "[retention] %s: '%s' is not a duration (like 7d)", k, v);
                return 1;
        }
        return config_unknown_key(st, "retention", NULL, k, keys_retention);
}

/* Each of servers (separated as relay_nats.c splits them) a nats:// or
 * tls:// URL with a host: libnats takes any scheme for nats:// and none
 * for nats:// too, so "http://..." or a bare "HOST:PORT" would "work"
 * while saying something else than it does. */
static bool servers_ok(struct parse_state *st, const char *v)
{
        static const char *const schemes[] = { "nats://", "tls://" };
        const char *p = v;

        while (*(p += strspn(p, ", \t"))) {
                size_t n = strcspn(p, ", \t"), s;
                for (s = 0; s < ELEMENTSOF(schemes); s++) {
                        size_t l = strlen(schemes[s]);
                        if (n > l && !strncmp(p, schemes[s], l))
                                break;
                }
                if (s == ELEMENTSOF(schemes)) {
                        config_err(st, "[relay] servers: '%.*s' is not a NATS server URL "
                                   "(nats://HOST:PORT, or tls://HOST:PORT)", (int)n, p);
                        return false;
                }
                p += n;
        }
        return true;
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
                                return config_err(st, "[relay] servers: control character in '%s'", v);
                if (!servers_ok(st, v))
                        return 0;
                return config_set_str(&rl->servers, v) == 0;
        }
        if (!strcmp(k, "host")) {
                if (!hd_agent_valid(v))
                        return config_err(st, "[relay] host: '%s' is not a valid host name (lowercase letters, digits, '-', '_')", v);
                return config_set_str(&rl->host, v) == 0;
        }
        if (!strcmp(k, "stream")) {
                if (!hd_id_valid(v) || strlen(v) > 64)
                        return config_err(st, "[relay] stream: '%s' is not a valid stream name (letters, digits, '-', '_')", v);
                return config_set_str(&rl->stream, v) == 0;
        }
        if (!strcmp(k, "replicas")) {
                if (parse_int64(v, 1, 5, &n) < 0)
                        return config_err(st, "[relay] replicas: '%s' is not a number from 1 to 5", v);
                rl->replicas = (int)n;
                return 1;
        }
        if (!strcmp(k, "user"))
                return config_set_str(&rl->user, v) == 0;
        if (!strcmp(k, "password"))
                return config_set_str(&rl->password, v) == 0;
        if (!strcmp(k, "nkey"))
                return config_set_str(&rl->nkey, v) == 0;
        struct { const char *key; char **dst; } paths[] = {
                { "credentials", &rl->credentials }, { "nkey_seed", &rl->nkey_seed },
                { "tls_ca", &rl->tls_ca }, { "tls_cert", &rl->tls_cert },
                { "tls_key", &rl->tls_key }, { "host_key", &rl->host_key },
                { "host_pubkey_dir", &rl->host_pubkey_dir },
        };
        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                if (!strcmp(k, paths[i].key)) {
                        if (v[0] != '/')
                                return config_err(st, "[relay] %s must be an absolute path", k);
                        return config_set_str(paths[i].dst, v) == 0;
                }
        return config_unknown_key(st, "relay", NULL, k, keys_relay);
}

static int handle_remote(struct parse_state *st, const char *name,
                         const char *k, const char *v)
{
        struct config *c = st->c;
        struct config_remote *rm = NULL;
        const char *why = NULL;

        if (!hd_agent_valid(name))
                return config_err(st, "[remote %s]: '%s' is not a valid agent name", name, name);
        bool known = false;
        for (size_t i = 0; keys_remote[i]; i++)
                known = known || !strcmp(k, keys_remote[i]);
        if (!known)
                return config_unknown_key(st, "remote", name, k, keys_remote);
        if (!strcmp(k, "host") && !hd_agent_valid(v))
                return config_err(st, "[remote %s] host: '%s' is not a valid host name", name, v);
        if (!strcmp(k, "a2a") && config_a2a_url_check(v, &why) < 0)
                return config_err(st, "[remote %s] a2a: '%s' %s", name, v, why);
        if ((!strcmp(k, "token_file") || !strcmp(k, "ca_file") || !strcmp(k, "a2a_card_key")) &&
            v[0] != '/')
                return config_err(st, "[remote %s] %s must be an absolute path", name, k);
        for (size_t i = 0; i < c->n_remotes; i++)
                if (!strcmp(c->remotes[i].name, name))
                        rm = &c->remotes[i];
        if (!rm) {
                rm = realloc(c->remotes, (c->n_remotes + 1) * sizeof(*rm));
                if (!rm)
                        return config_err(st, "out of memory");
                c->remotes = rm;
                rm = &c->remotes[c->n_remotes++];
                *rm = (struct config_remote) { .name = strdup(name),
                                               .a2a_follow_max = CONFIG_A2A_FOLLOW_MAX_DEFAULT };
                if (!rm->name)
                        return config_err(st, "out of memory");
        }
        if (!strcmp(k, "a2a_follow_max")) {
                if (config_parse_duration(v, &rm->a2a_follow_max) < 0 || rm->a2a_follow_max < 1 ||
                    rm->a2a_follow_max > 30 * 86400)
                        return config_err(st, "[remote %s] a2a_follow_max: '%s' is not a duration "
                                          "from 1s to 30d", name, v);
                return 1;
        }
        if (!strcmp(k, "a2a_card_cross_origin")) {
                if (config_parse_bool(v, &rm->a2a_card_cross_origin) < 0)
                        return config_err(st, "[remote %s] a2a_card_cross_origin: '%s' is not yes "
                                          "or no", name, v);
                return 1;
        }
        if (!strcmp(k, "a2a"))
                return config_set_str(&rm->a2a, v) == 0;
        if (!strcmp(k, "token_file"))
                return config_set_str(&rm->token_file, v) == 0;
        if (!strcmp(k, "ca_file"))
                return config_set_str(&rm->ca_file, v) == 0;
        if (!strcmp(k, "a2a_card_key"))
                return config_set_str(&rm->a2a_card_key, v) == 0;
        if (!strcmp(k, "description"))
                return config_set_str(&rm->description, v) == 0;
        if (!strcmp(k, "skill"))
                return card_skill(st, "remote", rm->name, &rm->skill_ids, &rm->skill_descs,
                                  &rm->n_skills, v);
        return config_set_str(&rm->host, v) == 0;
}

/* [hub]: read by handoff-hubd only; the daemon ignores it. */
static int handle_hub(struct parse_state *st, const char *k, const char *v)
{
        struct config_hub *h = &st->c->hub;
        int64_t n;

        if (!strcmp(k, "listen")) {
                if (!v[0] || strspn(v, " \t") == strlen(v))
                        return config_err(st, "[hub] listen: empty");
                if (!strncmp(v, "unix:", 5) && v[5] != '/')
                        return config_err(st, "[hub] listen: '%s': unix: needs an absolute path", v);
                h->line_listen = st->line;
                return config_set_str(&h->listen, v) == 0;
        }
        if (!strcmp(k, "tls_cert") || !strcmp(k, "tls_key")) {
                if (!path_ok(v))
                        return config_err(st, "[hub] %s: '%s' is neither an absolute path nor credential:NAME", k, v);
                *(k[4] == 'c' ? &h->line_tls_cert : &h->line_tls_key) = st->line;
                return config_set_str(k[4] == 'c' ? &h->tls_cert : &h->tls_key, v) == 0;
        }
        if (!strcmp(k, "token_dir") || !strcmp(k, "state_dir")) {
                /* token_dir = credential: the service's credentials */
                if (v[0] != '/' && !(k[0] == 't' && !strcmp(v, "credential:")))
                        return config_err(st, "[hub] %s must be an absolute path%s", k,
                                          k[0] == 't' ? " or credential:" : "");
                *(k[0] == 't' ? &h->line_token_dir : &h->line_state_dir) = st->line;
                return config_set_str(k[0] == 't' ? &h->token_dir : &h->state_dir, v) == 0;
        }
        if (!strcmp(k, "timeout") || !strcmp(k, "request_timeout")) {
                int64_t *d = k[0] == 't' ? &h->timeout : &h->request_timeout;
                if (config_parse_duration(v, d) < 0 || *d < 1 || *d > 3600)
                        return config_err(st, "[hub] %s: '%s' is not a duration from 1s to 1h",
                                          k, v);
                return 1;
        }
        if (!strcmp(k, "max_connections") || !strcmp(k, "max_per_address")) {
                if (parse_int64(v, 1, 65536, &n) < 0)
                        return config_err(st, "[hub] %s: '%s' is not a number from 1 to 65536", k, v);
                *(k[4] == 'c' ? &h->max_connections : &h->max_per_address) = n;
                return 1;
        }
        if (!strcmp(k, "signing_key")) {
                if (!path_ok(v))
                        return config_err(st, "[hub] signing_key: '%s' is neither an absolute "
                                          "path nor credential:NAME", v);
                h->line_signing_key = st->line;
                return config_set_str(&h->signing_key, v) == 0;
        }
        if (!strcmp(k, "push_allow")) {
                /* the CIDRs: handoff-hubd's to read (push_allow_parse()) */
                h->line_push_allow = st->line;
                return config_set_str(&h->push_allow, v) == 0;
        }
        if (!strcmp(k, "mcp_origins")) {
                /* the Origins a browser may call /mcp from: handoff-hubd's
                 * to read (hub_mcp_origin_ok()) */
                return config_set_str(&h->mcp_origins, v) == 0;
        }
        if (!strcmp(k, "mcp_sessions_per_token")) {
                if (parse_int64(v, 1, 1024, &n) < 0)
                        return config_err(st, "[hub] %s: '%s' is not a number from 1 to 1024", k, v);
                h->mcp_sessions_per_token = n;
                return 1;
        }
        if (!strcmp(k, "mcp_session_idle")) {
                if (config_parse_duration(v, &n) < 0 || n < 1 || n > 86400)
                        return config_err(st, "[hub] %s: '%s' is not a duration of 1s to 24h",
                                          k, v);
                h->mcp_session_idle = n;
                return 1;
        }
        if (!strcmp(k, "default_agent")) {
                /* whether this file serves or reaches it: handoff-hubd's
                 * to say (hub_setup()), once every section is read */
                if (!hd_agent_valid(v))
                        return config_err(st, "[hub] default_agent: '%s' is not an agent name", v);
                h->line_default_agent = st->line;
                return config_set_str(&h->default_agent, v) == 0;
        }
        if (!strcmp(k, "a2a_block_max")) {
                /* seconds a blocking SendMessage waits; 0: none at all */
                if (config_parse_duration(v, &n) < 0 || n < 0 || n > 86400)
                        return config_err(st, "[hub] %s: '%s' is not a duration of 0 to 24h",
                                          k, v);
                h->a2a_block_max = n;
                return 1;
        }
        if (!strcmp(k, "a2a_kept_max_items")) {
                if (parse_int64(v, 1, 100000000, &n) < 0)
                        return config_err(st, "[hub] %s: '%s' is not a number from 1 to 100000000",
                                          k, v);
                h->a2a_kept_max_items = (uint64_t)n;
                return 1;
        }
        if (!strcmp(k, "a2a_kept_max_bytes")) {
                if (config_parse_size(v, &h->a2a_kept_max_bytes) < 0 ||
                    h->a2a_kept_max_bytes < 1024)
                        return config_err(st, "[hub] %s: '%s' is not a size of 1K or more", k, v);
                return 1;
        }
        if (!strcmp(k, "rate_per_token") || !strcmp(k, "burst_per_token") ||
            !strcmp(k, "max_requests_per_token") || !strcmp(k, "max_waits_per_token")) {
                /* rate_per_token = 0: no bucket at all */
                int64_t lo = k[0] == 'r' ? 0 : 1;
                if (parse_int64(v, lo, 65536, &n) < 0)
                        return config_err(st, "[hub] %s: '%s' is not a number from %lld to 65536",
                                          k, v, (long long)lo);
                *(k[0] == 'r' ? &h->rate_per_token : k[0] == 'b' ? &h->burst_per_token
                  : k[4] == 'r' ? &h->max_requests_per_token : &h->max_waits_per_token) = n;
                return 1;
        }
        return config_unknown_key(st, "hub", NULL, k, keys_hub);
}

int config_handler(void *user, const char *section, const char *k,
                   const char *v)
{
        struct parse_state *st = user;
        struct config *c = st->c;

        st->handled = true;
        /* inih's section is the reader's cut short (config_err.h); were
         * it another, the two would read the file differently */
        if (strncmp(section, st->section, strlen(section)))
                return config_err(st, "section [%s] read as [%s]", st->section, section);
        section = st->section;

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
        if (!strcmp(section, "hub"))
                return handle_hub(st, k, v);
        if (!strcmp(section, "control")) {
                if (!strcmp(k, "socket")) {
                        if (v[0] != '/')
                                return config_err(st, "[control] socket must be an absolute path");
                        return config_set_str(&c->control_socket, v) == 0;
                }
                if (!strcmp(k, "group"))
                        return config_set_str(&c->control_group, v) == 0;
                if (!strcmp(k, "hub_user"))
                        return config_set_str(&c->control_hub_user, v) == 0;
                return config_unknown_key(st, "control", NULL, k, keys_control);
        }
        if (!strcmp(section, "metrics")) {
                if (!strcmp(k, "textfile")) {
                        if (v[0] != '/')
                                return config_err(st, "[metrics] textfile must be an absolute path");
                        return config_set_str(&c->metrics_textfile, v) == 0;
                }
                return config_unknown_key(st, "metrics", NULL, k, keys_metrics);
        }
        if (!strcmp(section, "payload")) {
                if (!strcmp(k, "roles"))
                        return config_set_roles(c, v) == 0 ? 1 : config_err(st, "[payload] roles: empty list");
                return config_unknown_key(st, "payload", NULL, k, keys_payload);
        }
        if (!*section)
                return config_err(st, "key '%s' outside of any section", k);
        return config_unknown_section(st, section);
}
