/* act/1.0: the ACT context handoff, as XML <context_handoff> (expat, no
 * DTD, no entities) or in its Markdown alternative layout; both parse into
 * one struct act_doc that the rules and writers (payload_act_rules.c) share. */
#include <ctype.h>
#include <errno.h>
#include <expat.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "handoff.h"
#include "payload_names.h"
#include "payload_act.h"
#include "payload_str.h"
#include "sbuf.h"
#include "util.h"

const char *const act_xml_names[_ACT_FIELD_MAX] = {
        [ACT_PROJECT] = "metadata/project",
        [ACT_TIMESTAMP] = "metadata/timestamp",
        [ACT_FROM_SESSION] = "metadata/from_session",
        [ACT_TO_AGENT] = "metadata/to_agent",
        [ACT_FORMAT_VERSION] = "metadata/format_version",
        [ACT_ORIGINAL_TASK] = "original_task",
        [ACT_WORK_COMPLETED] = "work_completed",
        [ACT_WORK_REMAINING] = "work_remaining",
        [ACT_ATTEMPTED] = "attempted_approaches",
        [ACT_CRITICAL] = "critical_context",
        [ACT_CURRENT_STATE] = "current_state",
        [ACT_FILES] = "files_touched",
        [ACT_RECOMMENDATIONS] = "recommendations",
};

const char *const act_md_titles[_ACT_FIELD_MAX] = {
        [ACT_PROJECT] = "Project",
        [ACT_TIMESTAMP] = "Timestamp",
        [ACT_FROM_SESSION] = "From Session",
        [ACT_TO_AGENT] = "To Agent",
        [ACT_FORMAT_VERSION] = "Format Version",
        [ACT_ORIGINAL_TASK] = "Original Task",
        [ACT_WORK_COMPLETED] = "Work Completed",
        [ACT_WORK_REMAINING] = "Work Remaining",
        [ACT_ATTEMPTED] = "Attempted Approaches",
        [ACT_CRITICAL] = "Critical Context",
        [ACT_CURRENT_STATE] = "Current State",
        [ACT_FILES] = "Files Touched",
        [ACT_RECOMMENDATIONS] = "Recommendations",
};

#define ACT_FIRST_BODY ACT_ORIGINAL_TASK

void act_doc_done(struct act_doc *d)
{
        for (int i = 0; i < _ACT_FIELD_MAX; i++) {
                free(d->f[i]);
                d->f[i] = NULL;
        }
}

/* Trim every line, drop blank lines at both ends and runs of blank lines:
 * the indentation of the XML is not part of the text. */
static char *act_tidy(const char *s, size_t n)
{
        char *out = malloc(n + 1), *o = out;
        bool blank = false;

        if (!out)
                return NULL;
        while (n > 0) {
                const char *nl = memchr(s, '\n', n);
                size_t l = nl ? (size_t)(nl - s) : n, adv = nl ? l + 1 : l;
                const char *b = s, *e = s + l;

                while (b < e && isspace((unsigned char)*b))
                        b++;
                while (e > b && isspace((unsigned char)e[-1]))
                        e--;
                if (b == e) {
                        blank = o != out;
                } else {
                        if (o != out)
                                *o++ = '\n';
                        if (blank)
                                *o++ = '\n';
                        blank = false;
                        memcpy(o, b, (size_t)(e - b));
                        o += e - b;
                }
                s += adv;
                n -= adv;
        }
        *o = '\0';
        return out;
}

/* ---- XML -------------------------------------------------------------- */

struct xctx {
        XML_Parser p;
        unsigned depth;
        bool in_metadata, seen_metadata;
        int cur;                        /* field collecting text, or -1 */
        struct sbuf text[_ACT_FIELD_MAX];
        bool seen[_ACT_FIELD_MAX];
        hd_verdict *v;
        int r;
};

_printf_(2, 3) static void xml_fail(struct xctx *x, const char *fmt, ...)
{
        va_list ap;

        if (x->r < 0)
                return;
        x->r = -EBADMSG;
        if (x->v) {
                x->v->reason = HD_R_PAYLOAD_INVALID;
                va_start(ap, fmt);
                vsnprintf(x->v->detail, sizeof(x->v->detail), fmt, ap);
                va_end(ap);
        }
        XML_StopParser(x->p, XML_FALSE);
}

static int act_field_by_xml(const char *name, bool metadata)
{
        for (int i = 0; i < _ACT_FIELD_MAX; i++) {
                const char *n = act_xml_names[i];
                bool is_meta = !strncmp(n, "metadata/", 9);
                if (is_meta == metadata && !strcmp(metadata ? n + 9 : n, name))
                        return i;
        }
        return -1;
}

static void XMLCALL xml_start(void *ud, const XML_Char *name,
                              const XML_Char **attrs)
{
        struct xctx *x = ud;
        char q[72];
        int f;

        if (++x->depth > ACT_MAX_DEPTH)
                return xml_fail(x, "act/1.0: nested deeper than %d",
                                ACT_MAX_DEPTH);
        if (x->depth == 1) {
                if (strcmp(name, "context_handoff") != 0)
                        xml_fail(x, "act/1.0: root element is '%s', not context_handoff",
                                 payload_quote(name, q));
                return;
        }
        if (x->depth == 2 && !strcmp(name, "metadata")) {
                if (x->seen_metadata)
                        return xml_fail(x, "act/1.0: duplicate element metadata");
                x->seen_metadata = x->in_metadata = true;
                return;
        }
        if (x->cur >= 0 || (x->depth == 3 && !x->in_metadata) || x->depth > 3)
                return xml_fail(x, "act/1.0: element '%s' inside an element that holds text",
                                payload_quote(name, q));
        f = act_field_by_xml(name, x->in_metadata);
        if (f < 0)
                return xml_fail(x, "act/1.0: unknown element '%s%s'",
                                x->in_metadata ? "metadata/" : "",
                                payload_quote(name, q));
        if (x->seen[f])
                return xml_fail(x, "act/1.0: duplicate element %s",
                                act_xml_names[f]);
        x->seen[f] = true;
        x->cur = f;
}

static void XMLCALL xml_end(void *ud, const XML_Char *name)
{
        struct xctx *x = ud;

        if (x->depth == 2 && x->in_metadata)
                x->in_metadata = false;
        if (x->cur >= 0)
                x->cur = -1;
        x->depth--;
}

static void XMLCALL xml_text(void *ud, const XML_Char *s, int len)
{
        struct xctx *x = ud;

        if (x->cur >= 0 && len > 0)
                sb_put(&x->text[x->cur], s, (size_t)len);
}

static void XMLCALL xml_doctype(void *ud, const XML_Char *name,
                                const XML_Char *sysid, const XML_Char *pubid,
                                int has_internal_subset)
{
        /* No DTD means no entity can ever be declared or fetched. */
        xml_fail(ud, "act/1.0: DOCTYPE is not accepted");
}

static void XMLCALL xml_entity(void *ud, const XML_Char *name, int is_param,
                               const XML_Char *value, int value_length,
                               const XML_Char *base, const XML_Char *sysid,
                               const XML_Char *pubid, const XML_Char *notation)
{
        xml_fail(ud, "act/1.0: entity declarations are not accepted");
}

static int XMLCALL xml_external(XML_Parser p, const XML_Char *context,
                                const XML_Char *base, const XML_Char *sysid,
                                const XML_Char *pubid)
{
        return XML_STATUS_ERROR;
}

static int act_parse_xml(const char *text, size_t len, struct act_doc *d,
                         hd_verdict *v)
{
        struct xctx x = { .cur = -1, .v = v };
        int r = 0;

        x.p = XML_ParserCreate("UTF-8");
        if (!x.p)
                return -ENOMEM;
        XML_SetParamEntityParsing(x.p, XML_PARAM_ENTITY_PARSING_NEVER);
        XML_SetUserData(x.p, &x);
        XML_SetElementHandler(x.p, xml_start, xml_end);
        XML_SetCharacterDataHandler(x.p, xml_text);
        XML_SetStartDoctypeDeclHandler(x.p, xml_doctype);
        XML_SetEntityDeclHandler(x.p, xml_entity);
        XML_SetExternalEntityRefHandler(x.p, xml_external);
        if (XML_Parse(x.p, text, (int)len, XML_TRUE) == XML_STATUS_ERROR &&
            x.r == 0)
                r = verdict(v, HD_R_PAYLOAD_INVALID,
                            "act/1.0: XML %s at line %lu",
                            XML_ErrorString(XML_GetErrorCode(x.p)),
                            (unsigned long)XML_GetCurrentLineNumber(x.p));
        if (x.r < 0)
                r = x.r;
        for (int i = 0; i < _ACT_FIELD_MAX; i++) {
                _cleanup_free_ char *raw = NULL;
                if (r >= 0 && x.seen[i]) {
                        r = sb_take(&x.text[i], &raw);
                        if (r >= 0 && !(d->f[i] = act_tidy(raw, strlen(raw))))
                                r = -ENOMEM;
                } else {
                        sb_take(&x.text[i], &raw);
                }
        }
        XML_ParserFree(x.p);
        return r;
}

/* ---- Markdown --------------------------------------------------------- */

static const char *md_trim(const char *b, const char *e, size_t *ret_len)
{
        while (b < e && isspace((unsigned char)*b))
                b++;
        while (e > b && isspace((unsigned char)e[-1]))
                e--;
        *ret_len = (size_t)(e - b);
        return b;
}

static int act_field_by_title(const char *s, size_t n, bool metadata)
{
        for (int i = metadata ? 0 : ACT_FIRST_BODY;
             i < (metadata ? ACT_FIRST_BODY : _ACT_FIELD_MAX); i++)
                if (strlen(act_md_titles[i]) == n &&
                    !strncasecmp(act_md_titles[i], s, n))
                        return i;
        return -1;
}

/* "- **Key:** value" of the Metadata section. */
static int md_metadata(struct act_doc *d, const char *s, size_t n,
                       hd_verdict *v)
{
        const char *k, *e = s + n, *colon;
        char q[72], key[72];
        size_t kl, vl;
        int f;

        if (n >= 2 && (s[0] == '-' || s[0] == '*') && s[1] == ' ')
                s += 2;
        while (s < e && *s == '*')
                s++;
        colon = memchr(s, ':', (size_t)(e - s));
        if (!colon)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "act/1.0: metadata line without 'Key:'");
        k = md_trim(s, colon, &kl);
        while (kl > 0 && k[kl - 1] == '*')
                kl--;
        f = act_field_by_title(k, kl, true);
        if (f < 0) {
                snprintf(key, sizeof(key), "%.*s", (int)(kl > 64 ? 64 : kl), k);
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "act/1.0: unknown metadata '%s'",
                               payload_quote(key, q));
        }
        s = colon + 1;
        while (s < e && *s == '*')
                s++;
        s = md_trim(s, e, &vl);
        if (d->f[f])
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "act/1.0: duplicate element %s", act_xml_names[f]);
        d->f[f] = strndup(s, vl);
        return d->f[f] ? 0 : -ENOMEM;
}

static int md_close(struct act_doc *d, int f, const char *b, const char *e)
{
        if (f < ACT_FIRST_BODY)
                return 0;
        d->f[f] = act_tidy(b, (size_t)(e - b));
        return d->f[f] ? 0 : -ENOMEM;
}

static int act_parse_md(const char *text, size_t len, struct act_doc *d,
                        hd_verdict *v)
{
        const char *s = text, *end = text + len, *body = NULL;
        bool titled = false, seen_meta = false;
        int cur = -2;                   /* -2 none yet, -1 metadata */
        char q[72], title[72];
        int r;

        while (s < end) {
                const char *nl = memchr(s, '\n', (size_t)(end - s));
                const char *le = nl ? nl : end, *t;
                size_t tl;

                t = md_trim(s, le, &tl);
                if (!titled) {
                        if (tl == 0) {
                                s = nl ? nl + 1 : end;
                                continue;
                        }
                        if (!(tl == 17 && !strncmp(t, "# Context Handoff", 17)))
                                return verdict(v, HD_R_PAYLOAD_INVALID,
                                               "act/1.0: Markdown must start with '# Context Handoff'");
                        titled = true;
                } else if (tl >= 3 && !strncmp(t, "## ", 3)) {
                        const char *h;
                        size_t hl;
                        int f;

                        if (body && (r = md_close(d, cur, body, s)) < 0)
                                return r;
                        h = md_trim(t + 3, t + tl, &hl);
                        if (hl == 8 && !strncasecmp(h, "Metadata", 8)) {
                                if (seen_meta)
                                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                                       "act/1.0: duplicate element metadata");
                                seen_meta = true;
                                cur = -1;
                        } else {
                                f = act_field_by_title(h, hl, false);
                                if (f < 0) {
                                        snprintf(title, sizeof(title), "%.*s",
                                                 (int)(hl > 64 ? 64 : hl), h);
                                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                                       "act/1.0: unknown section '%s'",
                                                       payload_quote(title, q));
                                }
                                if (d->f[f])
                                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                                       "act/1.0: duplicate element %s",
                                                       act_xml_names[f]);
                                cur = f;
                        }
                        body = nl ? nl + 1 : end;
                } else if (cur == -1 && tl > 0) {
                        r = md_metadata(d, t, tl, v);
                        if (r < 0)
                                return r;
                }
                s = nl ? nl + 1 : end;
        }
        if (!titled)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "act/1.0: Markdown must start with '# Context Handoff'");
        if (body && (r = md_close(d, cur, body, end)) < 0)
                return r;
        d->markdown = true;
        return 0;
}

int act_parse(const char *text, size_t len, struct act_doc *ret, hd_verdict *v)
{
        struct act_doc d = {};
        size_t i = 0;
        int r;

        if (len > ACT_MAX_SIZE)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "act/1.0: text is larger than %d bytes",
                               ACT_MAX_SIZE);
        if (strlen(text) != len)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "act/1.0: text holds a NUL byte");
        while (i < len && isspace((unsigned char)text[i]))
                i++;
        if (i < len && text[i] == '<')
                r = act_parse_xml(text, len, &d, v);
        else
                r = act_parse_md(text, len, &d, v);
        if (r < 0) {
                act_doc_done(&d);
                return r;
        }
        *ret = d;
        return 0;
}
