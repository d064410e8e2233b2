/* Markdown renderings of payloads (the context block that goes into
 * resume_context). */
#include <errno.h>

#include "handoff.h"
#include "payload_act.h"
#include "render.h"
#include "sbuf.h"
#include "util.h"

/* Decisions the Baton block shows: the latest, like the original. */
#define RENDER_RECENT_DECISIONS 5

/* One line of untrusted text: newlines and control characters become
 * spaces, so a value cannot start headings of its own. */
static void render_inline(struct sbuf *b, const char *s)
{
        for (; s && *s; s++)
                sb_put(b, (unsigned char)*s < 0x20 ? " " : s, 1);
}

static void render_field(struct sbuf *b, const char *label, const json_t *o,
                         const char *key)
{
        const char *s = json_string_value(json_object_get(o, key));

        if (!s)
                return;
        sb_printf(b, "**%s:** ", label);
        render_inline(b, s);
        sb_puts(b, "\n");
}

/* "**Label:**" and a bullet list of the strings of o[key] from item
 * first; absent lists are left out, empty ones shown as "(none)" only when
 * show_empty. */
static void render_list_from(struct sbuf *b, const char *label, const json_t *o,
                             const char *key, size_t first, bool show_empty)
{
        const json_t *a = json_object_get(o, key);
        size_t i;

        if (!json_is_array(a) || (json_array_size(a) == 0 && !show_empty))
                return;
        sb_printf(b, "\n**%s:**\n", label);
        if (json_array_size(a) == 0)
                sb_puts(b, "- (none)\n");
        for (i = first; i < json_array_size(a); i++) {
                sb_puts(b, "- ");
                render_inline(b, json_string_value(json_array_get(a, i)));
                sb_puts(b, "\n");
        }
}

static void render_list(struct sbuf *b, const char *label, const json_t *o,
                        const char *key, bool show_empty)
{
        render_list_from(b, label, o, key, 0, show_empty);
}

int render_vox(const json_t *p, char **ret)
{
        struct sbuf b = {};

        sb_puts(&b, "## Handoff (Vox contract)\n\n");
        render_field(&b, "Goal", p, "goal");
        render_field(&b, "From", p, "source_agent");
        render_field(&b, "To", p, "target_agent");
        render_field(&b, "Session", p, "session_id");
        render_list(&b, "Completed Steps", p, "completed_steps", true);
        render_list(&b, "Pending Blockers", p, "pending_blockers", true);
        render_list(&b, "Relevant Files", p, "relevant_files", false);
        /* The OBO token is a credential: never in a prompt. */
        return sb_take(&b, ret);
}

/* Like the original's "Baton (Handoff Context)" block; a patch renders
 * the fields it carries. */
int render_baton(const json_t *p, char **ret)
{
        const json_t *bt = json_object_get(p, "baton");
        const json_t *log, *arts, *e;
        struct sbuf b = {};
        size_t i, n, first;
        bool patch = false;

        if (!bt && (bt = json_object_get(p, "baton_patch")))
                patch = true;
        if (!bt)
                bt = p;         /* a bare baton, e.g. from the store */
        sb_printf(&b, "## Baton (Handoff Context)%s\n\n",
                  patch ? " - patch" : "");
        render_field(&b, "Stage", p, "stage_id");
        render_field(&b, "Goal", bt, "goal");
        render_list(&b, "Current State", bt, "current_state", false);
        log = json_object_get(bt, "decision_log");
        n = json_array_size(log);
        first = n > RENDER_RECENT_DECISIONS ? n - RENDER_RECENT_DECISIONS : 0;
        render_list_from(&b, "Recent Decisions", bt, "decision_log", first,
                         false);
        render_list(&b, "Constraints", bt, "constraints", false);
        render_list(&b, "Open Questions", bt, "open_questions", false);
        render_list(&b, "Work Scope", bt, "work_scope", false);
        render_list(&b, "Acceptance", bt, "acceptance", false);
        arts = json_object_get(bt, "artifacts");
        if (json_array_size(arts) > 0) {
                sb_puts(&b, "\n**Artifacts:**\n");
                json_array_foreach(arts, i, e) {
                        sb_puts(&b, "- ");
                        render_inline(&b, json_string_value(json_object_get(e, "id")));
                        sb_puts(&b, " (");
                        render_inline(&b, json_string_value(json_object_get(e, "type")));
                        sb_puts(&b, ", ");
                        render_inline(&b, json_string_value(json_object_get(e, "hash")));
                        sb_puts(&b, ")\n");
                }
        }
        return sb_take(&b, ret);
}

int render_uah(const json_t *p, char **ret)
{
        struct sbuf b = {};

        sb_puts(&b, "## Agent Handoff (U.AgentHandoff)\n\n");
        render_field(&b, "From", p, "from_agent_type");
        render_field(&b, "To", p, "to_agent_type");
        render_field(&b, "Context", p, "context");
        render_field(&b, "Session", p, "session_id");
        render_field(&b, "Handoff", p, "handoff_id");
        render_field(&b, "Issued", p, "issued_at");
        render_list(&b, "Instructions", p, "instructions", true);
        render_list(&b, "Acceptance Criteria", p, "acceptance_criteria", true);
        render_list(&b, "Constraints", p, "constraints", true);
        render_list(&b, "Prohibited Actions", p, "prohibited_actions", false);
        render_list(&b, "Artifacts", p, "artifacts", true);
        if (json_object_get(p, "notes")) {
                sb_puts(&b, "\n");
                render_field(&b, "Notes", p, "notes");
        }
        return sb_take(&b, ret);
}

int render_act(const json_t *p, char **ret)
{
        struct act_doc d = {};
        int r;

        if (!json_is_string(p))
                return -EINVAL;
        r = act_parse(json_string_value(p), json_string_length(p), &d, NULL);
        if (r < 0)
                return r;
        r = act_to_md(&d, 2, ret);
        act_doc_done(&d);
        return r;
}
