/* libhandoff: the handoff protocol (protocol_version 1).
 *
 * Parse with limits, canonical bytes, sign, verify, validate, freshness,
 * safe names, atomic file operations, bootstrap build and consume, payload
 * formats.  The library never logs and never exits: functions return 0 (or a
 * non-negative count) on success and a negative errno on failure.  A document
 * that is rejected yields -EBADMSG and a filled hd_verdict naming the reason.
 *
 * Documents are jansson values (json_t); see libhandoff(3).
 */
#ifndef HANDOFF_H
#define HANDOFF_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HD_VERSION_STRING "0.1.0"
#define HD_PROTOCOL_VERSION 1

/* ---- reasons ---------------------------------------------------------- */

/* Every rejection is one of these.  The names (hd_reason_name) are the
 * strings used in logs, reason files, status counters and tests; their
 * order is part of nothing, only the names are stable. */
typedef enum hd_reason {
        HD_OK = 0,
        HD_R_TOO_LARGE,
        HD_R_NOT_REGULAR,
        HD_R_HARDLINK,
        HD_R_BAD_NAME,
        HD_R_PARSE_ERROR,
        HD_R_DUPLICATE_KEY,
        HD_R_TOO_DEEP,
        HD_R_BAD_VERSION,
        HD_R_MISSING_FIELD,
        HD_R_BAD_TYPE,
        HD_R_BAD_ID,
        HD_R_BAD_AGENT,
        HD_R_SELF_HANDOFF,
        HD_R_BAD_MAC_FORMAT,
        HD_R_BAD_MAC,
        HD_R_UNKNOWN_KEY,
        HD_R_BAD_TIMESTAMP,
        HD_R_EXPIRED,
        HD_R_FUTURE_TIMESTAMP,
        HD_R_NUMBER_OUT_OF_RANGE,
        HD_R_DUPLICATE_ID,
        HD_R_PAYLOAD_INVALID,
        HD_R_DECISION_LOG_REWRITE,
        HD_R_EXPIRED_UNCLAIMED,
        HD_R_BAD_SIGNATURE,
        HD_R_KEY_AGENT_MISMATCH,
        HD_R_SIGNATURE_REQUIRED,
        HD_R_EXPIRED_UNRELAYED, /* for a remote agent, expired before the relay took it */
        HD_R_TOO_MANY_VALUES,
        HD_R_INBOX_FULL,        /* the agent's waiting bootstraps at their limit */
        HD_R_UNREADABLE,        /* the daemon may not read it (its owner's mode) */
        HD_R_NOT_SERVED,        /* for an agent this host does not serve, and no room to wait */
        HD_R_EXPIRED_UNSENT,    /* for an A2A remote, expired before its server took it */
        HD_R_REMOTE_REJECTED,   /* for an A2A remote: its server refused it (4xx, an A2A error) */
        HD_R_BAD_A2A_ID,        /* an a2a- id not the hub's task id of its own document */
        _HD_R_MAX
} hd_reason;

/* "bad_mac" for HD_R_BAD_MAC, "ok" for HD_OK, NULL when out of range. */
const char *hd_reason_name(hd_reason r);
/* The reason whose name is s, or -EINVAL. */
int hd_reason_from_name(const char *s);

#define HD_DETAIL_MAX 256

typedef struct hd_verdict {
        hd_reason reason;
        char detail[HD_DETAIL_MAX];
} hd_verdict;

/* ---- limits, reading, parsing ----------------------------------------- */

#define HD_DEFAULT_MAX_SIZE  (1024 * 1024)
#define HD_DEFAULT_MAX_DEPTH 64
/* Values per document, object keys included: what one parse allocates is
 * bounded by this (about 250 bytes for the costliest, an empty object),
 * not by the file's size alone. */
#define HD_DEFAULT_MAX_VALUES 65536

typedef struct hd_limits {
        size_t max_size;        /* bytes; 0 = HD_DEFAULT_MAX_SIZE */
        unsigned max_depth;     /* nesting of arrays/objects; 0 = default */
        size_t max_values;      /* values incl. keys; 0 = HD_DEFAULT_MAX_VALUES */
} hd_limits;

/* Open name relative to dirfd with O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC, require a
 * regular file with st_nlink == 1 and size <= max_size, read at most
 * max_size + 1 bytes.  The buffer is NUL-terminated (not counted in len).
 * -EBADMSG with v = not_regular / hardlink / too_large; -ENOENT when the
 * file is gone; other -errno on I/O errors. */
int hd_read_at(int dirfd, const char *name, size_t max_size,
               char **ret_buf, size_t *ret_len, hd_verdict *v);

/* The checks and the read of hd_read_at() on an fd the caller opened (with
 * the same flags) and may hold a lock on; name is for messages only. */
int hd_read_fd(int fd, const char *name, size_t max_size, char **ret_buf,
               size_t *ret_len, hd_verdict *v);
/* Open name relative to dirfd as hd_read_at() does: symlinks and sockets
 * give -EBADMSG with not_regular. */
int hd_open_at(int dirfd, const char *name, int *ret_fd, hd_verdict *v);

/* Parse one JSON object: duplicate keys, NUL bytes, invalid UTF-8,
 * nesting deeper than max_depth, more than max_values values
 * (too_many_values), integers outside 64 bits and non-finite reals are
 * all rejected (-EBADMSG, v filled). */
int hd_parse(const void *buf, size_t len, const hd_limits *lim,
             json_t **ret, hd_verdict *v);

/* hd_read_at() followed by hd_parse(). */
int hd_load_at(int dirfd, const char *name, const hd_limits *lim,
               json_t **ret, hd_verdict *v);

/* ---- canonical bytes -------------------------------------------------- */

/* Serialize v exactly as Python's
 *   json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
 * If skip_key is not NULL and v is an object, its top-level member of that
 * name is left out (used for "hmac").  The result is NUL-terminated and
 * malloc'ed.  -ERANGE for a non-finite real, -ENOMEM. */
int hd_canon_dump(const json_t *v, const char *skip_key,
                  char **ret_buf, size_t *ret_len);

/* ---- keys, MAC and signatures --------------------------------------- */

#define HD_KEY_MIN_LEN 32
#define HD_KEY_MAX_LEN 4096
#define HD_MAC_B64_LEN 44
#define HD_SIG_B64_LEN 88       /* a 64-byte Ed25519 signature */
#define HD_KID_MAX 64           /* a kid follows the agent-name rule */
/* The longest key line hd_key_format() writes, with newline and NUL. */
#define HD_KEY_LINE_MAX 160
/* The most keys one public key file may list. */
#define HD_PUBKEYS_MAX 64

typedef struct hd_key hd_key;

typedef enum hd_key_kind {
        HD_KEY_HMAC = 1,        /* a shared secret: signs and checks "hmac" */
        HD_KEY_ED25519_SECRET,  /* signs "sig" (and checks it) */
        HD_KEY_ED25519_PUBLIC,  /* checks "sig" only */
} hd_key_kind;

/* Load a key file of any kind.  A first line "ed25519-secret B64 KID" is an
 * Ed25519 secret key, "ed25519 B64 KID" a public key (exactly one line),
 * anything else an HMAC secret: the file's bytes with one trailing newline
 * removed.  A secret (HMAC or Ed25519) is refused when the file is not a
 * regular file, is accessible by others or writable by group (ssh's rule),
 * an HMAC secret when shorter than HD_KEY_MIN_LEN bytes; a public key file
 * may be read by anyone but not written by group or others.  A one-line
 * message naming the file goes to err.  -EPERM for a bad mode, -EINVAL for
 * bad content, -errno otherwise. */
int hd_key_load(const char *path, hd_key **ret, char *err, size_t errlen);
/* Every public key of a public key file (dirfd/name; AT_FDCWD for a path):
 * one "ed25519 B64 KID" per line, blank lines and lines starting with '#'
 * skipped, at most max (<= HD_PUBKEYS_MAX) keys into keys[], their count
 * into *ret_n.  A secret key in the file is refused (-EPERM: only public
 * keys belong there), as is a file writable by group or others. */
int hd_pubkeys_load_at(int dirfd, const char *name, hd_key **keys, size_t max,
                       size_t *ret_n, char *err, size_t errlen);
/* An HMAC key from memory (copied).  -EINVAL when shorter than
 * HD_KEY_MIN_LEN. */
int hd_key_from_bytes(const void *bytes, size_t len, hd_key **ret);
/* An Ed25519 key from one key line (public or secret, as in a key file; a
 * trailing newline is allowed).  -EINVAL with err filled otherwise. */
int hd_key_parse(const char *line, size_t len, hd_key **ret, char *err,
                 size_t errlen);
/* A new Ed25519 secret key.  kid NULL: the first 16 hex chars of SHA-256
 * of the public key; otherwise kid must be a valid name (hd_agent_valid). */
int hd_key_generate(const char *kid, hd_key **ret);
/* The key line of an Ed25519 key (newline included) into buf of n >=
 * HD_KEY_LINE_MAX bytes: the public line, or with secret (a secret key
 * only) the secret line; the caller wipes that buffer after use. */
int hd_key_format(const hd_key *k, bool secret, char *buf, size_t n);
hd_key_kind hd_key_kind_of(const hd_key *k);
/* The kid of an Ed25519 key; NULL for an HMAC key. */
const char *hd_key_kid(const hd_key *k);
/* Bind a key to the agent it belongs to: it then authenticates only
 * documents whose from_agent is that agent (key_agent_mismatch).  NULL
 * unbinds.  -EINVAL for an invalid agent name. */
int hd_key_set_agent(hd_key *k, const char *agent);
const char *hd_key_agent(const hd_key *k);
/* Wipes and frees; NULL is fine. */
void hd_key_free(hd_key *k);

/* base64(HMAC-SHA256(key, canonical bytes of doc without "hmac")), 44 chars
 * plus NUL into out.  -EINVAL for a key that is not an HMAC key. */
int hd_mac_compute(const json_t *doc, const hd_key *k,
                   char out[HD_MAC_B64_LEN + 1]);
/* Sign doc with k, choosing the scheme from the key: an HMAC key sets
 * "hmac" (and drops any "sig"); an Ed25519 secret key sets "kid" to its kid
 * and "sig" to base64 of the Ed25519 signature of the canonical bytes
 * without "sig" (and drops any "hmac").  A public key cannot sign:
 * -EINVAL. */
int hd_sign(json_t *doc, const hd_key *k);
/* Check doc's "hmac" in constant time: missing_field, bad_mac_format
 * (not a 44-char standard base64 string of 32 bytes) or bad_mac. */
int hd_mac_check(const json_t *doc, const hd_key *k, hd_verdict *v);
/* Check doc's "sig" with an Ed25519 key: missing_field, bad_mac_format
 * (not 88 chars of standard base64 of 64 bytes, or "hmac" present too),
 * unknown_key (doc's "kid" is not k's) or bad_signature. */
int hd_sig_check(const json_t *doc, const hd_key *k, hd_verdict *v);

/* ---- time ------------------------------------------------------------- */

/* Parse ISO-8601 "YYYY-MM-DDTHH:MM:SS[.ffffff](Z|+HH:MM|-HH:MM)" into
 * microseconds since the epoch.  Naive times (no offset) are -EINVAL. */
int hd_time_parse(const char *s, int64_t *ret_usec);
/* Format as Python's datetime.isoformat() with "+00:00" written "Z":
 * microseconds only when non-zero.  buf needs HD_TIME_MAX bytes. */
#define HD_TIME_MAX 40
int hd_time_format(int64_t usec, char *buf, size_t n);
int64_t hd_now_usec(void);

/* ---- validation ------------------------------------------------------- */

typedef struct hd_policy {
        int64_t max_clock_skew_s;  /* issue time may be this far ahead */
        int64_t max_window_s;      /* never fresh after issue time + this */
} hd_policy;

#define HD_DEFAULT_MAX_CLOCK_SKEW 30
#define HD_DEFAULT_MAX_WINDOW     3600

bool hd_id_valid(const char *s);     /* ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$ */
bool hd_agent_valid(const char *s);  /* ^[a-z0-9][a-z0-9_-]{0,63}$ */
/* A spool file name that may be opened: no '/', not "." or "..", no
 * control characters, at most 255 bytes, does not start with '.'. */
bool hd_name_safe(const char *s);

/* Fields and types of protocol_version 1 (no MAC, no clock). */
int hd_validate(const json_t *doc, hd_verdict *v);
/* Freshness against now_usec: expired, future_timestamp, bad_timestamp. */
int hd_check_fresh(const json_t *doc, const hd_policy *p, int64_t now_usec,
                   hd_verdict *v);

/* Returns the key for a document (kid may be NULL, from_agent may be NULL
 * when the document has none), or NULL when none applies.  Called with the
 * document's kid first; when that gives a key bound to no agent, called
 * again with kid NULL to learn whether the sender has a key of its own. */
typedef const hd_key *(*hd_key_lookup_fn)(void *userdata, const char *kid,
                                          const char *from_agent);

struct hd_payload_opts;

/* Authenticate doc: pick the key with lookup and check "hmac" or "sig"
 * with it.  A document carrying both is bad_mac_format; a key bound to
 * another agent than from_agent, or a key bound to no agent named by kid
 * while the sender has a key of its own, is key_agent_mismatch; an "hmac"
 * document given an Ed25519 key (its sender signs) is signature_required;
 * a "sig" needs a string "kid" naming an Ed25519 key. */
int hd_auth_check(const json_t *doc, hd_key_lookup_fn lookup, void *userdata,
                  hd_verdict *v);

/* The whole check in the daemon's order: hd_auth_check(), fields, payload
 * (when opts is not NULL), freshness. */
int hd_verify(const json_t *doc, hd_key_lookup_fn lookup, void *userdata,
              const hd_policy *p, const struct hd_payload_opts *opts,
              int64_t now_usec, hd_verdict *v);

/* ---- files ------------------------------------------------------------ */

/* Write buf to dirfd/name atomically: O_EXCL temp ".name.XXXXXX" in the same
 * directory, write, fsync (if do_fsync), fchmod(mode), renameat, fsync of
 * the directory (if do_fsync).  Replaces an existing name. */
int hd_write_atomic(int dirfd, const char *name, const void *buf, size_t len,
                    mode_t mode, bool do_fsync);

/* ---- bootstrap -------------------------------------------------------- */

/* The bootstrap file name of the real consumer: the ASCII alphanumerics, '-'
 * and '_' of handoff_id, "handoff" if nothing is left, plus ".json". */
int hd_bootstrap_name(const char *handoff_id, char *buf, size_t n);

/* The bootstrap for a verified handoff: protocol_version, source
 * "voice_handoff", handoff_id, accepted_at, resume_context (non-empty),
 * from_agent, to_agent, reason, transcript, expires_at and any payload,
 * and its proof of origin: the member "handoff", the signed handoff
 * itself, unchanged (hd_consume_with() verifies it). */
int hd_bootstrap_build(const json_t *handoff, int64_t accepted_usec,
                       json_t **ret);
/* The same for a handoff the agent is shown in another form (a Baton
 * patch shown as the session's whole baton): the fields, payload and
 * resume_context come from shown (NULL = handoff, same handoff_id), the
 * member "handoff" is handoff.  With max_size > 0 the bootstrap is kept
 * within max_size canonical bytes: the top-level transcript (and payload,
 * when it is the handoff's) is dropped, then resume_context is shortened
 * with a note, and last the member "handoff" is dropped. */
int hd_bootstrap_build_shown(const json_t *handoff, const json_t *shown,
                             int64_t accepted_usec, size_t max_size,
                             json_t **ret);

/* ---- payload formats -------------------------------------------------- */

typedef struct hd_payload_opts {
        const char *const *roles;  /* U.AgentHandoff role set; NULL = default */
} hd_payload_opts;

/* Validate doc's payload_type/payload (none at all is fine): -EBADMSG with
 * payload_invalid and a detail naming the field. */
int hd_payload_validate(const json_t *doc, const hd_payload_opts *o,
                        hd_verdict *v);
/* Markdown rendering of a payload of the given type (malloc'ed). */
int hd_payload_render(const char *type, const json_t *payload, char **ret_md);

/* Read a payload for type from path ("-" = stdin) into the JSON value that
 * travels as "payload": JSON for vox/1.0 and baton/1, YAML or JSON for
 * U.AgentHandoff/0.1.0, and for act/1.0 the XML (or Markdown) text as a
 * JSON string.  Validated on its own (no envelope): -EBADMSG with v. */
int hd_payload_load(const char *type, const char *path, json_t **ret,
                    hd_verdict *v);
/* The agent a payload names as its target (vox target_agent, ACT
 * metadata/to_agent), or NULL. */
const char *hd_payload_target(const char *type, const json_t *payload);

/* Baton sessions, kept as dirfd/<key>.json holding
 * {"baton": {...}, "history": [...], "agents": [...]}.  check: would this
 * payload apply (decision_log_rewrite, payload_invalid with the real cause
 * in the detail: a session that cannot be read, one this sender took no
 * part in, one that would exceed its bounds)?  apply: apply it and append
 * the history entry (stage_id, at, patch, baton), dropping the oldest
 * entries (counted in "history_dropped") to keep the file within 1 MiB and
 * HD_DEFAULT_MAX_VALUES values; sessions idle for 30 days are removed.
 * The _handoff forms take the whole handoff: its from_agent must be one
 * of the session's agents (the first stage's sender and recipient and
 * every later recipient), its to_agent joins them.  The payload-only
 * forms do not bind. */
int hd_baton_check(int dirfd, const json_t *payload, hd_verdict *v);
int hd_baton_apply(int dirfd, const json_t *payload, int64_t now_usec,
                   bool do_fsync, hd_verdict *v);
int hd_baton_check_handoff(int dirfd, const json_t *handoff, hd_verdict *v);
int hd_baton_apply_handoff(int dirfd, const json_t *handoff, int64_t now_usec,
                           bool do_fsync, hd_verdict *v);
/* The session file's whole document (baton, history, agents).
 * session_id: a key, CREATOR.SESSION_ID, or a bare SESSION_ID (a session
 * of the payload-only forms, else the one session of that name:
 * -ENOTUNIQ when there are several). */
int hd_baton_load(int dirfd, const char *session_id, json_t **ret);
/* The session a handoff's stage went to, as the _handoff forms resolve
 * it: a session is scoped by the agent that began it (key
 * CREATOR.SESSION_ID; see handoff(7)).  *ret_key (may be NULL): its key,
 * to free. */
int hd_baton_load_handoff(int dirfd, const json_t *handoff, json_t **ret, char **ret_key);

/* Delivery profiles beside the bootstrap: "vox" writes
 * state_dir/.vox/handoffs/<session_id>.json and lists .vox/handoffs/ in
 * state_dir/.voxignore; "act" writes state_dir/.act/handoffs/
 * YYYY-MM-DD-HHmm.xml (or .md), points latest.xml at it and keeps the
 * newest act_max_files.  "bootstrap" does nothing here. */
typedef struct hd_deliver_opts {
        const char *profile;      /* "bootstrap", "vox" or "act" */
        const char *act_format;   /* "xml" (default) or "md" */
        unsigned act_max_files;   /* 0 = 5 */
        bool do_fsync;
} hd_deliver_opts;
int hd_deliver_profile(int state_dirfd, const json_t *doc,
                       const hd_deliver_opts *o, int64_t now_usec);

/* ---- consume ---------------------------------------------------------- */

/* How a consumer checks a bootstrap.  Always: protocol_version 1, source
 * "voice_handoff", a non-empty resume_context, accepted_at within resume_window_s of now, and
 * a handoff_id that is valid and whose bootstrap name is the file's name.
 * With lookup (proof of origin required): the member "handoff" must be
 * there and pass hd_verify() with lookup at the bootstrap's accepted_at
 * (MAC, fields, freshness as policy says: the daemon claimed it fresh),
 * name the same handoff_id, and be addressed to agent (when not NULL);
 * the document returned is then rebuilt from the verified handoff
 * (hd_bootstrap_build_shown), so no unsigned field of the file reaches
 * the caller, except accepted_at and, for payload_type baton/1, the
 * session's baton the daemon shows in place of the patch. */
typedef struct hd_consume_opts {
        int64_t resume_window_s;   /* 0 = 300 */
        size_t max_size;           /* bootstrap read cap; 0 = HD_DEFAULT_MAX_SIZE */
        const char *agent;         /* the consuming agent, or NULL */
        hd_key_lookup_fn lookup;   /* NULL = origin not checked */
        void *userdata;
        hd_policy policy;          /* zeros = the defaults */
} hd_consume_opts;

/* Take one bootstrap from dirfd (an agent's handoffs/ directory): rename it
 * to a private name first so that of two consumers exactly one gets it,
 * check it as o says, return its document and delete it.  handoff_id NULL
 * = the oldest fresh one that passes, oldest by the file's mtime (the
 * daemon writes each at its accepted_at): only the one taken is read and
 * checked, then the next if it fails.  -ENOENT when none is there;
 * -ESTALE when the one asked for is stale (it is put back for the
 * sweeper); -EBADMSG with v filled when the one asked for (or, without
 * handoff_id, every fresh one there) is refused: it is left in place. */
int hd_consume_with(int dirfd, const char *handoff_id, const hd_consume_opts *o,
                    int64_t now_usec, json_t **ret, hd_verdict *v);

/* What hd_consume_with() would take from the file name in dirfd, without
 * taking it (to show a waiting bootstrap): the same checks, and *ret the
 * document it would return.  -ENOENT, -ESTALE, -EBADMSG (v) as there. */
int hd_consume_peek(int dirfd, const char *name, const hd_consume_opts *o,
                    int64_t now_usec, json_t **ret, hd_verdict *v);

/* hd_consume_with() with resume_window_s and no proof of origin checked:
 * for consumers that trust the directory's permissions alone. */
int hd_consume(int dirfd, const char *handoff_id, int64_t resume_window_s,
               int64_t now_usec, json_t **ret);

/* ---- results ---------------------------------------------------------- */

/* A result is the word of the agent that consumed a handoff on what came
 * of it: a document {"type": "handoff-result", "protocol_version": 1,
 * handoff_id, from_agent (the agent), status ("completed", "failed" or
 * "input_required"), completed_at, and text, data, reason (failed only)},
 * signed by the
 * agent as a handoff from it would be.  An input_required result asks
 * the sender a question (its text, required): the handoff ends there and
 * the answer comes as a handoff of its own (handoff-hubd(8), A2A
 * multi-turn).  Its canonical bytes, signature
 * included, are at most HD_RESULT_MAX_SIZE; a reason at most
 * HD_RESULT_REASON_MAX bytes.  Unknown members are refused. */
#define HD_RESULT_MAX_SIZE (64 * 1024)
#define HD_RESULT_REASON_MAX 1024

typedef struct hd_result {
        const char *text;       /* what came of it, for a reader (or NULL) */
        const json_t *data;     /* the same as JSON, any value (or NULL) */
        const char *failed;     /* NULL: completed; else why the work failed */
        const char *input_required;     /* else: a question for the sender (text unset) */
} hd_result;

/* The signed result document of agent for handoff_id, completed at
 * now_usec, signed with k (hd_sign()).  -EBADMSG with v for what the
 * daemon would refuse (too_large, bad_id, bad_agent, bad_type). */
int hd_result_build(const char *handoff_id, const char *agent, const hd_result *res,
                    const hd_key *k, int64_t now_usec, json_t **ret, hd_verdict *v);
/* Check a result document: its members, that it is handoff_id's (NULL:
 * any) from agent (NULL: any), and with lookup its signature, as a
 * handoff from its from_agent is authenticated (hd_auth_check()).
 * -EBADMSG with v. */
int hd_result_check(const json_t *doc, const char *handoff_id, const char *agent,
                    hd_key_lookup_fn lookup, void *userdata, hd_verdict *v);
/* The name an agent's result for handoff_id has in its handoffs/
 * directory: ".result." + handoff_id. */
int hd_result_name(const char *handoff_id, char *buf, size_t n);
/* Report what came of handoff_id, consumed by agent: hd_result_build()
 * and write it atomically (hd_write_atomic(), mode 0644: the daemon reads
 * it as others, its directory keeps everyone else out) as
 * hd_result_name() into dirfd, the agent's handoffs/ directory, for
 * handoffd to verify and record beside the archived item (handoffd(8),
 * RESULTS).  A result written earlier and not taken yet is replaced.
 * -EBADMSG with v as hd_result_build(); -errno. */
int hd_complete(int dirfd, const char *handoff_id, const char *agent, const hd_result *res,
                const hd_key *k, int64_t now_usec, bool do_fsync, hd_verdict *v);

#ifdef __cplusplus
}
#endif
#endif
