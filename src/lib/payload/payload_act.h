/* Private: act/1.0, the ACT context handoff: the parsed document
 * (payload_act.c), its rules and writers (payload_act_rules.c). */
#ifndef HD_PAYLOAD_ACT_H
#define HD_PAYLOAD_ACT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "handoff.h"


#define ACT_MAX_SIZE        (256 * 1024)
#define ACT_MAX_DEPTH       8

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
/* envelope and roles are unused: the signature is payload.c's validate hook. */
int payload_act_validate(const json_t *p, const json_t *envelope,
                         const char *const *roles, hd_verdict *v);
/* The document in either layout, malloc'ed; level is that of the title
 * heading of the Markdown ("# Context Handoff" for 1). */
int act_to_xml(const struct act_doc *d, char **ret);
int act_to_md(const struct act_doc *d, int level, char **ret);

#endif
