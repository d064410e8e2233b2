/* config_load(): handoffd.conf read with inih, through a reader that
 * counts lines as inih does, so that every error names its line; the
 * defaults; the checks no single line shows ([spool] dir, state_dir, a key
 * at all, the relay as a whole), each problem reported, none stopping the
 * rest; then the keys.  The sections' keys are config_sections.c's, the
 * keys' files config_keys.c's, the lookups and config_free() config.c's. */
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "config_err.h"
#include "config_keys.h"
#include "config_sections.h"
#include "config_values.h"
#include "util.h"

/* [relay] and [remote] as a whole: each problem reported, none stops the
 * rest; the stream's and the host's defaults filled in. */
static int config_check_relay(struct parse_state *st)
{
        struct config *c = st->c;
        struct config_relay *rl = &c->relay;
        char h[256];

        for (size_t i = 0; i < c->n_remotes; i++) {
                const struct config_remote *rm = &c->remotes[i];
                if (config_agent(c, rm->name))
                        config_err_file(st, "[remote %s]: the agent is also an [agent %s] of this host",
                                        rm->name, rm->name);
                if (rm->host && rm->a2a)
                        config_err_file(st, "[remote %s]: host and a2a exclude each other "
                                        "(relayed to a host, or sent to an A2A server)", rm->name);
                else if (!rm->host && !rm->a2a)
                        config_err_file(st, "[remote %s]: neither host nor a2a is set", rm->name);
                if (rm->a2a && !rm->token_file)
                        config_err_file(st, "[remote %s] a2a needs token_file (the bearer token "
                                        "its server expects)", rm->name);
                /* The key checks the card: a2a must be the card's URL. */
                if (rm->a2a && rm->a2a_card_key && !strstr(rm->a2a, "/.well-known/agent"))
                        config_err_file(st, "[remote %s] a2a_card_key needs a2a = the agent card's "
                                        "URL (.../.well-known/agent-card.json)", rm->name);
                if (!rm->a2a && (rm->token_file || rm->ca_file || rm->a2a_card_cross_origin ||
                                 rm->a2a_card_key ||
                                 rm->a2a_follow_max != CONFIG_A2A_FOLLOW_MAX_DEFAULT))
                        config_err_file(st, "[remote %s]: token_file, ca_file and a2a_* are for an "
                                        "a2a remote", rm->name);
        }
        size_t n_a2a = 0;
        for (size_t i = 0; i < c->n_remotes; i++)
                n_a2a += c->remotes[i].a2a != NULL;
        if (n_a2a > CONFIG_A2A_REMOTES_MAX)
                config_err_file(st, "%zu [remote] sections with a2a: at most %d", n_a2a,
                                CONFIG_A2A_REMOTES_MAX);
        if (!rl->stream && !(rl->stream = strdup("HANDOFF")))
                return -ENOMEM;
        if (rl->replicas == 0)
                rl->replicas = 1;
        if (!config_relay_on(c))
                return 0;
        if ((rl->tls_cert != NULL) != (rl->tls_key != NULL))
                config_err_file(st, "[relay] tls_cert and tls_key go together");
        if ((rl->user != NULL) != (rl->password != NULL))
                config_err_file(st, "[relay] user and password go together");
        if ((rl->nkey != NULL) != (rl->nkey_seed != NULL))
                config_err_file(st, "[relay] nkey and nkey_seed go together");
        if (!rl->host) {
                /* The short host name, as subjects need it. */
                if (gethostname(h, sizeof(h) - 1) < 0)
                        return -errno;
                h[sizeof(h) - 1] = '\0';
                h[strcspn(h, ".")] = '\0';
                for (char *p = h; *p; p++)
                        *p = (char)tolower((unsigned char)*p);
                if (!hd_agent_valid(h)) {
                        config_err_file(st, "[relay] host is not set and the host name '%s' "
                                        "is not usable in a subject", h);
                        return 0;
                }
                if (!(rl->host = strdup(h)))
                        return -ENOMEM;
        }
        for (size_t i = 0; i < c->n_remotes; i++)
                if (c->remotes[i].host && !strcmp(c->remotes[i].host, rl->host))
                        config_err_file(st, "[remote %s] host is this host (%s)",
                                        c->remotes[i].name, rl->host);
        return 0;
}

/* What no single line shows: each problem reported, none stops the rest. */
static int config_check(struct parse_state *st)
{
        struct config *c = st->c;
        bool any_key = c->default_key_path || c->n_kids > 0 || c->pubkey_dir;
        int r;

        if (!c->spool_dir)
                config_err_file(st, "[spool] dir is not set");
        for (size_t i = 0; i < c->n_agents; i++) {
                struct config_agent *a = &c->agents[i];
                if (!a->state_dir)
                        config_err_file(st, "[agent %s] state_dir is not set", a->name);
                if (a->key_path || a->n_pubkey_paths > 0)
                        any_key = true;
                if (a->require_sig && a->n_pubkey_paths == 0 && !c->pubkey_dir)
                        config_err_file(st, "[agent %s] require = sig, but no public key is configured "
                             "(pubkeys = or [keys] pubkey_dir)", a->name);
                if (!a->delivery && !(a->delivery = strdup("bootstrap")))
                        return -ENOMEM;
                if (!a->act_format && !(a->act_format = strdup("xml")))
                        return -ENOMEM;
        }
        if (!any_key)
                config_err_file(st, "no key configured ([keys] default or pubkey_dir, [agent NAME] key "
                     "or pubkeys)");
        if (c->max_window < c->max_clock_skew)
                config_err_file(st, "[spool] max_window is shorter than max_clock_skew");
        r = config_check_relay(st);
        if (r < 0)
                return r;
        return st->n_errs ? -EINVAL : 0;
}

/* The line inih just parsed, checked now that it is done: one that should
 * have reached the config_handler and did not is a syntax error inih found. */
static void reader_line_done(struct parse_state *st)
{
        if (st->line > 0 && st->key_line && !st->handled)
                config_err(st, "expected KEY = VALUE or [SECTION]");
        if (st->line > 0 && st->key_line)
                st->section_keys++;
        /* inih calls the handler for a KEY = VALUE line (or a
         * continuation, which needs one before it) and for nothing else */
        if (st->handled)
                st->after_key = true;
}

/* The section that just ended: an [agent NAME] or [remote NAME] without a
 * key is nothing inih reports (its handler never runs for it). */
static void reader_section_done(struct parse_state *st)
{
        struct config *c = st->c;

        if (!strncmp(st->section, "remote ", 7) && st->section_keys == 0)
                config_err_line(st, st->section_line, "[%s]: host is not set (required)",
                                st->section);
        if (!strncmp(st->section, "agent ", 6) && st->section_keys == 0) {
                char *s = NULL;
                if (asprintf(&s, "%s%s%s", c->empty_agents ? c->empty_agents : "",
                             c->empty_agents ? "], [agent " : "", st->section + 6) >= 0) {
                        free(c->empty_agents);
                        c->empty_agents = s;
                }
        }
        st->section[0] = '\0';
        st->section_keys = 0;
        st->after_key = false;
}

/* The ']' that ends a header starting at p (after its '['), found as
 * inih finds it (find_chars_or_comment()): an inline comment prefix after
 * a space ends the search first, and then the line is no header.  NULL
 * when there is none. */
static const char *header_end(const char *p)
{
        bool was_space = false;

        for (; *p && *p != ']'; p++) {
#if INI_ALLOW_INLINE_COMMENTS
                if (was_space && strchr(INI_INLINE_COMMENT_PREFIXES, *p))
                        return NULL;
#endif
                was_space = isspace((unsigned char)*p);
        }
        return *p == ']' ? p : NULL;
}

/* inih's reader (fgets-like): whole lines, each counted once, so that
 * st->line is the line the config_handler is called for.  A line longer than
 * inih takes is an error of its own, never split into two. */
static char *reader(char *str, int num, void *stream)
{
        struct parse_state *st = stream;
        const char *p, *end;
        size_t len;
        ssize_t n;

        reader_line_done(st);
        n = getline(&st->buf, &st->cap, st->f);
        if (n < 0) {
                reader_section_done(st);
                return NULL;
        }
        crypto_hash_sha256_update(&st->digest, (const unsigned char *)st->buf, (size_t)n);
        st->line++;
        st->key_line = st->handled = false;
        if (n > num - 3) {
                config_err(st, "line longer than %d characters", num - 3);
                memcpy(str, "\n", 2);
                return str;
        }
        memcpy(str, st->buf, (size_t)n + 1);
        p = st->buf;
        if (st->line == 1 && !strncmp(p, "\xEF\xBB\xBF", 3))
                p += 3;
        while (isspace((unsigned char)*p))
                p++;
        if (!*p || strchr(INI_START_COMMENT_PREFIXES, *p))
                return str;
#if INI_ALLOW_MULTILINE
        if (st->after_key && p > st->buf) {
                st->key_line = true;    /* a continuation, whatever it starts with */
                return str;
        }
#endif
        if (*p != '[') {
                st->key_line = true;    /* KEY = VALUE */
                return str;
        }
        end = header_end(p + 1);
        if (!end) {
                config_err(st, "'[' without ']'");
                return str;
        }
        reader_section_done(st);
        len = (size_t)(end - p - 1);
        if (len >= sizeof(st->section)) {       /* a header is a line: never */
                config_err(st, "section header longer than %zu characters", sizeof(st->section) - 1);
                len = 0;
        }
        memcpy(st->section, p + 1, len);
        st->section[len] = '\0';
        st->section_line = st->line;
        st->section_reported = false;
        return str;
}

static int load(const char *path, bool load_keys, bool partial, struct config **ret,
                char **err)
{
        struct parse_state st = { 0 };
        struct config *c;
        int line, r;

        *err = NULL;
        *ret = NULL;
        crypto_hash_sha256_init(&st.digest);
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
        c->max_waiting = 1000;
        c->max_waiting_per_sender = 100;
        c->hub.rate_per_token = -1;     /* unset: handoff-hubd's default (0 is "none") */
        c->hub.a2a_block_max = -1;      /* likewise */
        /* Junk for a served agent is anyone's to send and is kept, so
         * rejected/ has a bound even when none is set. */
        c->rejected_max_bytes = CONFIG_REJECTED_MAX_BYTES_DEFAULT;
        c->control_socket = strdup(HD_RUNSTATEDIR "/handoffd/control.sock");
        if (!c->control_socket || config_set_roles(c, "strategist,executor,proxy-auditor,human") < 0) {
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
        line = ini_parse_stream(reader, &st, config_handler, &st);
        crypto_hash_sha256_final(&st.digest, c->digest);
        r = ferror(st.f) ? -EIO : 0;
        fclose(st.f);
        free(st.buf);
        if (line == -2)
                r = -ENOMEM;
        if (r == 0 && line > 0 && st.n_errs == 0)
                config_err_line(&st, line, "syntax error");
        /* a file's own mistakes first; what is missing only once they
         * are fixed (a bad line often leaves a key "not set") */
        if (r == 0 && st.n_errs == 0)
                r = config_check(&st);
        else if (r == 0)
                r = -EINVAL;
        if (r == -EIO && !st.errs)
                config_err_file(&st, "cannot read: %s", strerror(EIO));
        if (st.n_errs > CONFIG_MAX_ERRORS) {
                char more[64];
                int n = snprintf(more, sizeof(more), "\n... and %u more",
                                 st.n_errs - CONFIG_MAX_ERRORS);
                config_errs_append(&st, more, (size_t)n);
        }
        if (r == 0 && load_keys)
                r = config_load_keys(c, &st, err);
        else if (r < 0)
                *err = TAKE_PTR(st.errs);
        free(st.errs);
        free(st.value_lines);
        if (r < 0 && !partial) {
                config_free(c);
                return r;
        }
        *ret = c;
        return r;
}

int config_load(const char *path, bool load_keys, struct config **ret,
                char **err)
{
        return load(path, load_keys, false, ret, err);
}

int config_load_partial(const char *path, struct config **ret_partial, char **err)
{
        return load(path, false, true, ret_partial, err);
}
