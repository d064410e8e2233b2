/* handoffd.conf: the INI file (parsed with inih), its defaults and checks.
 * Shared by handoffd and handoffctl (so it lives beside the library, not in
 * the daemon: the CLI includes no daemon header); private, not exported by
 * libhandoff.so.  It never logs: errors come back as text. */
#ifndef HD_CONFIG_H
#define HD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "handoff.h"

#define CONFIG_DEFAULT_PATH HD_SYSCONFDIR "/handoffd/handoffd.conf"
#define CONFIG_MAX_PUBKEYS 4096

struct config_agent {
        char *name;
        char *state_dir;        /* bootstraps go to state_dir/handoffs/ */
        char *key_path;         /* optional: handoffs FROM this agent */
        hd_key *key;            /* bound to this agent */
        char **pubkey_paths;    /* .pub files: this agent's public keys */
        size_t n_pubkey_paths;
        bool require_sig;       /* require = sig: hmac from it is refused */
        char *delivery;         /* "bootstrap" (default), "vox", "act" */
        char *act_format;       /* "xml" (default) or "md" */
        unsigned act_max_files; /* default 5 */
        /* its A2A agent card (handoff-hubd): what it does, its skills
         * ("skill = ID: description", each a pair here) */
        char *description;
        char **skill_ids, **skill_descs;
        size_t n_skills;
        /* completes = yes: the agent reports a result of each handoff it
         * consumes (handoffctl complete); its A2A task is WORKING from the
         * consume until then.  no (the default): the consume ends it. */
        bool completes;
};
#define CONFIG_MAX_SKILLS 64

/* [remote NAME]: handoffs to agent NAME are relayed to host, or sent to
 * an A2A server (a2a = its agent card's URL, a2a_out.c). */
struct config_remote {
        char *name;
        char *host;             /* NULL for an A2A remote */
        char *a2a;              /* the JSON-RPC or agent card URL; NULL for a relayed one */
        char *token_file;       /* the bearer token sent to it */
        char *ca_file;          /* PEM CAs for its TLS; NULL: the system's */
        /* the card handoff-hubd serves for NAME, as an [agent]'s */
        char *description;
        char **skill_ids, **skill_descs;
        size_t n_skills;
        int64_t a2a_follow_max; /* s: a task followed this long at most */
        bool a2a_card_cross_origin; /* a card's interface may be on another origin */
        char *a2a_card_key;     /* the Ed25519 public key the card's signature must verify under */
};
#define CONFIG_A2A_FOLLOW_MAX_DEFAULT (24 * 3600)

/* [remote NAME] a2a sections a config may have (the sender keeps a slot
 * for each, a2a_out.c). */
#define CONFIG_A2A_REMOTES_MAX 64

/* [relay]: handoffs across hosts through NATS JetStream (relay.c). */
struct config_relay {
        char *servers;          /* "nats://h:4222, ..."; NULL or empty = off */
        char *host;             /* this host in subjects; default short hostname */
        char *stream;           /* default HANDOFF */
        int replicas;           /* when handoffd creates the stream */
        char *credentials;      /* .creds file */
        char *user, *password;
        char *nkey, *nkey_seed; /* public key and its seed file */
        char *tls_ca, *tls_cert, *tls_key;
        /* Receipts (receipt.c): this host's Ed25519 secret key, which signs
         * the receipts it sends; one HOST.pub per host whose receipts it
         * accepts.  Either unset: that half of receipts is off. */
        char *host_key;
        char *host_pubkey_dir;
};

/* [hub]: handoff-hubd, the HTTPS side (src/hubd/).  Zero numbers mean
 * the defaults handoff-hubd(8) states. */
/* [hub] state_dir when unset (handoff-hubd, and handoffctl status, which
 * reads the hub's figures there). */
#define CONFIG_HUB_STATE_DIR_DEFAULT HD_LOCALSTATEDIR "/lib/handoff-hubd"
/* The hub's figures in state_dir, rewritten while it runs, for status. */
#define CONFIG_HUB_STATUS_FILE "status.json"

struct config_hub {
        char *listen;           /* "HOST:PORT" or "unix:PATH"; NULL = none */
        char *tls_cert, *tls_key;
        char *token_dir;        /* AGENT.token files */
        char *state_dir;        /* the hub's record of each id it accepted */
        int64_t timeout;        /* seconds a connection may stay silent */
        int64_t request_timeout;/* seconds a request has to arrive whole */
        int64_t max_connections, max_per_address;
        /* A2A documents kept per sending token; 0: the default */
        uint64_t a2a_kept_max_items, a2a_kept_max_bytes;
        /* each token's: handoffs a second and at once (a bucket; 0: no
         * limit), requests made at once, waits suspended at once */
        int64_t rate_per_token, burst_per_token;
        int64_t max_requests_per_token, max_waits_per_token;
        /* seconds a SendMessage without returnImmediately waits for its
         * task's end; -1: unset (handoff-hubd's default), 0: none */
        int64_t a2a_block_max;
        /* the line of each path key (0: not set), for handoff-hubd -n's
         * FILE:LINE of what it finds wrong with the file it names */
        int line_listen, line_tls_cert, line_tls_key, line_token_dir, line_state_dir;
        /* the agent whose card /.well-known/agent-card.json is; NULL: a
         * card naming every agent's endpoint */
        char *default_agent;
        int line_default_agent;
        /* the Ed25519 secret key file that signs the cards and the push
         * JWTs (NULL: unsigned, no pushes); the CIDRs a webhook may be
         * at though private, loopback or link-local (NULL: none) */
        char *signing_key, *push_allow;
        int line_signing_key, line_push_allow;
        /* /mcp: the browser Origins allowed (space or comma separated;
         * NULL: none), sessions one token may hold, seconds a session
         * lives unused (0: handoff-hubd's defaults) */
        char *mcp_origins;
        int64_t mcp_sessions_per_token, mcp_session_idle;
};

struct config {
        char *path;
        /* SHA-256 of the bytes parsed: whether a file on disk is the one
         * a daemon runs on (handoffctl status) */
        unsigned char digest[32];
        /* [spool] */
        char *spool_dir;
        bool fsync;
        uint64_t max_file_size;
        int64_t resume_window;  /* seconds */
        int64_t max_clock_skew; /* seconds */
        int64_t max_window;     /* seconds after issue a handoff stays valid */
        int64_t rescan_interval;/* seconds */
        uint64_t max_waiting, max_waiting_per_sender; /* bootstraps per agent; 0 = none */
        /* [keys] */
        char *default_key_path;
        hd_key *default_key;
        /* named keys for "kid": [keys] NAME = PATH */
        size_t n_kids;
        char **kid_names;
        char **kid_paths;
        hd_key **kid_keys;
        /* [keys] pubkey_dir: <agent>.pub files */
        char *pubkey_dir;
        /* every public key loaded, each bound to its agent */
        size_t n_pubkeys;
        hd_key **pubkeys;
        /* [agent NAME] */
        size_t n_agents;
        struct config_agent *agents;
        /* [retention] */
        uint64_t archive_max_items, archive_max_bytes, rejected_max_items, rejected_max_bytes;
#define CONFIG_REJECTED_MAX_BYTES_DEFAULT (UINT64_C(256) << 20)
        /* what waits in handoff/ for agents not served here (intake.c) */
        uint64_t unclaimed_max_items, unclaimed_max_bytes;
        int64_t archive_max_age, rejected_max_age;  /* seconds, 0 = none */
        /* [control] */
        char *control_socket;
        char *control_group;
        /* the user (name or uid) whose peer may list, take and complete
         * an agent's handoffs on its behalf (handoff-hubd's /mcp) */
        char *control_hub_user;
        /* "bob, carol": [agent NAME] sections without a key (a warning) */
        char *empty_agents;
        /* [metrics] */
        char *metrics_textfile;
        /* [payload] */
        char **roles;           /* U.AgentHandoff role set, NULL-terminated */
        /* [relay], [remote NAME] */
        struct config_relay relay;
        size_t n_remotes;
        struct config_remote *remotes;
        /* [hub] */
        struct config_hub hub;
};

/* Parse and check path.  On failure *err holds "FILE:LINE: message"
 * (malloc'ed) and a negative errno is returned.  With load_keys, the key
 * files are read and checked too. */
int config_load(const char *path, bool load_keys, struct config **ret,
                char **err);
/* As config_load() without keys, but a file with mistakes still gives
 * *ret_partial: the defaults and every line that was good (where the
 * control socket is, for a status that must reach the daemon whatever the
 * file says).  Returns what config_load() would; *ret_partial is set (or
 * NULL on -ENOMEM and unreadable files) in both cases. */
int config_load_partial(const char *path, struct config **ret_partial, char **err);
void config_free(struct config *c);
/* With the relay on, the files of [relay] (credentials, nkey_seed, tls_*:
 * readable regular files), host_key (an Ed25519 secret key) and
 * host_pubkey_dir (config_host_pubkeys_check()): handoffd's alone, so not
 * config_load()'s, which the hub and the CLI call too.  The key into
 * *ret_key (NULL when unset), the directory into *ret_dfd (-1 when unset);
 * either out-parameter NULL: checked and let go.  *err as config_load()'s. */
int config_relay_keys(const struct config *c, hd_key **ret_key, int *ret_dfd, char **err);
/* Each [remote NAME] a2a's token_file, as handoff-a2a will read it: the
 * daemon's secret, not config_load()'s (the hub needs the remote's name
 * and card, never its token).  *err as config_load()'s. */
int config_a2a_tokens_check(const struct config *c, char **err);
/* [relay] host_pubkey_dir dir, open as dfd: config_pubdir_check()'s rule,
 * and a HOST.pub that loads for each [remote] host of c (the hosts whose
 * receipts come here).  *err without the file's name. */
int config_host_pubkeys_check(const struct config *c, const char *dir, int dfd, char **err);
/* A directory of public keys, open as dfd (what and path name it in *err):
 * not writable by group or others. */
int config_pubdir_check(const char *what, const char *path, int dfd, char **err);
/* After config_load() without keys: load the keys this user can read,
 * skipping the others; > 0 when any key (HMAC or public) is loaded. */
int config_load_keys_readable(struct config *c);

/* What the daemon warns about at start for a loaded config (nothing will be
 * claimed, a [control] group that does not exist): each message to emit;
 * returns how many.  handoffd -n prints the same. */
int config_warnings(const struct config *c,
                    void (*emit)(void *userdata, const char *msg), void *userdata);

const struct config_agent *config_agent(const struct config *c,
                                        const char *name);
/* The host that serves remote agent name ([remote NAME] host), or NULL. */
const char *config_remote(const struct config *c, const char *name);
/* [remote NAME] a2a: that remote, else NULL. */
const struct config_remote *config_remote_a2a(const struct config *c, const char *name);
/* [agent NAME] or [remote NAME] of either kind: a handoff to NAME has
 * somewhere to go from this host (what handoff-hubd accepts). */
bool config_reachable(const struct config *c, const char *name);
/* Any [remote NAME] a2a. */
bool config_a2a_on(const struct config *c);
/* An A2A URL: https://, or http:// to a loopback host only (the bearer
 * token must not cross a network in clear).  0 or -EINVAL with *why. */
int config_a2a_url_check(const char *url, const char **why);
/* A token file: one line of RFC 6750 b64token characters; the token into
 * buf (NUL-terminated) when buf is not NULL.  -errno, *why on a bad file. */
int config_a2a_token_read(const char *path, char *buf, size_t n, const char **why);
#define CONFIG_A2A_TOKEN_MAX 4096
/* A [relay] with servers: handoffs to [remote] agents are relayed. */
bool config_relay_on(const struct config *c);

/* Key for a document (an hd_key_lookup_fn): a kid naming a public key
 * gives that key (hd_auth_check holds it to its agent); else, for a sender
 * with require = sig, its first public key (so hmac is signature_required);
 * else a kid gives its [keys] key (refused by hd_auth_check for a sender
 * with a key of its own) or nothing; else the sender's own key, else the
 * default key. */
const hd_key *config_key_lookup(void *cfg, const char *kid,
                                const char *from_agent);
/* Is a document of from_agent (with kid, or NULL) that verified signed by
 * a key of from_agent's own ([agent NAME] key, or a public key of hers),
 * not by a shared one ([keys] default or NAME), which signs for any name? */
bool config_key_own(const struct config *c, const char *kid, const char *from_agent);

/* "10M" -> 10485760, "7d" -> 604800 (s m h d w for durations; K M G for
 * sizes, powers of 1024). */
int config_parse_size(const char *s, uint64_t *ret);
int config_parse_duration(const char *s, int64_t *ret);

#endif
