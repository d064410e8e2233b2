/* Private to libhandoff's payload formats (payload*.c, baton.c, deliver.c,
 * render.c): the per-type validators and renderers, the parsed ACT
 * document, a small string builder.  Not installed. */
#ifndef HD_PAYLOAD_H
#define HD_PAYLOAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "handoff.h"

#define PT_VOX   "vox/1.0"
#define PT_BATON "baton/1"
#define PT_UAH   "U.AgentHandoff/0.1.0"
#define PT_ACT   "act/1.0"

/* Limits on what a producer controls, beyond the document size limit. */
#define PAYLOAD_MAX_ITEMS   1024    /* entries of any list */
#define PAYLOAD_MAX_STRING  65536   /* bytes of any one string */
#define PAYLOAD_MAX_NAME    256     /* ids, agent names, roles */
#define ACT_MAX_SIZE        (256 * 1024)
#define ACT_MAX_DEPTH       8

/* ---- shared field checks (payload.c) ---------------------------------- */

/* Quote s for a detail line: at most 64 bytes, control bytes as '?'. */
const char *payload_quote(const char *s, char buf[static 72]);
/* A required or optional string; *ret is set when present. */
int payload_string(const char *type, const json_t *o, const char *key,
                   bool required, const char **ret, hd_verdict *v);
/* An array of strings (required or optional), each at most
 * PAYLOAD_MAX_STRING bytes, at most PAYLOAD_MAX_ITEMS. */
int payload_string_array(const char *type, const json_t *o, const char *key,
                         bool required, hd_verdict *v);

/* ---- the types -------------------------------------------------------- */

/* envelope may be NULL (a bare payload): then agent names are not compared. */
int payload_vox_validate(const json_t *p, const json_t *envelope,
                         hd_verdict *v);
int payload_baton_validate(const json_t *p, hd_verdict *v);
/* A whole baton (the stored one, or the result of a patch); where names
 * the member in details, e.g. "baton" or "baton_patch". */
int baton_validate(const json_t *b, const char *where, hd_verdict *v);
int payload_uah_validate(const json_t *p, const char *const *roles,
                         hd_verdict *v);
/* YAML (libyaml) to JSON: mappings with string keys, no duplicates, no
 * aliases, one document; plain scalars by the YAML 1.2 core schema,
 * everything quoted stays a string. */
int payload_uah_yaml(const char *buf, size_t len, json_t **ret,
                     hd_verdict *v);

/* The ACT document, either layout, as trimmed text per element. */
enum act_field {
        ACT_PROJECT, ACT_TIMESTAMP, ACT_FROM_SESSION, ACT_TO_AGENT,
        ACT_FORMAT_VERSION,
        ACT_ORIGINAL_TASK, ACT_WORK_COMPLETED, ACT_WORK_REMAINING,
        ACT_ATTEMPTED, ACT_CRITICAL, ACT_CURRENT_STATE, ACT_FILES,
        ACT_RECOMMENDATIONS,
        _ACT_FIELD_MAX
};
struct act_doc {
        char *f[_ACT_FIELD_MAX];        /* NULL = absent */
        bool markdown;
};
extern const char *const act_xml_names[_ACT_FIELD_MAX];   /* "metadata/project" */
extern const char *const act_md_titles[_ACT_FIELD_MAX];   /* "Project", "Original Task" */

/* Parse (no checks beyond structure) and validate. */
int act_parse(const char *text, size_t len, struct act_doc *ret,
              hd_verdict *v);
int act_check(const struct act_doc *d, hd_verdict *v);
void act_doc_done(struct act_doc *d);
int payload_act_validate(const json_t *p, hd_verdict *v);
/* The document in either layout, malloc'ed; level is that of the title
 * heading of the Markdown ("# Context Handoff" for 1). */
int act_to_xml(const struct act_doc *d, char **ret);
int act_to_md(const struct act_doc *d, int level, char **ret);

/* ---- string builder (render.c) ---------------------------------------- */

struct sbuf {
        char *buf;
        size_t len, cap;
        int err;                        /* first error, sticky */
};
void sb_put(struct sbuf *b, const char *s, size_t n);
void sb_puts(struct sbuf *b, const char *s);
void sb_printf(struct sbuf *b, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
/* The string (malloc'ed) or -errno; b is emptied either way. */
int sb_take(struct sbuf *b, char **ret);

#endif
