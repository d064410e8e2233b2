/* act/1.0, after parsing (payload_act.c): the format's rules (required
 * elements, work_remaining unless complete, Phase X/Y, Progress 0-100%)
 * and the writers back to XML and Markdown. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "handoff.h"
#include "payload_act.h"
#include "payload_str.h"
#include "sbuf.h"
#include "util.h"

#define ACT_FIRST_BODY ACT_ORIGINAL_TASK

/* ---- rules ------------------------------------------------------------ */

/* A line of current_state without list markers and bold markup:
 * "- **Phase:** 4/6" -> "Phase: 4/6". */
static void act_plain_line(const char *s, size_t n, char *out, size_t outn)
{
        size_t o = 0;

        if (n >= 2 && (s[0] == '-' || s[0] == '*') && s[1] == ' ') {
                s += 2;
                n -= 2;
        }
        for (size_t i = 0; i < n && o + 1 < outn; i++) {
                if (s[i] == '*' && i + 1 < n && s[i + 1] == '*') {
                        i++;
                        continue;
                }
                out[o++] = s[i];
        }
        out[o] = '\0';
}

/* "Key: value" of current_state; NULL when the line is another key. */
static const char *act_key(const char *line, const char *key)
{
        size_t n = strlen(key);

        if (strncasecmp(line, key, n) != 0 || line[n] != ':')
                return NULL;
        line += n + 1;
        while (*line == ' ' || *line == '\t')
                line++;
        return line;
}

static bool act_word_end(const char *s)
{
        return !*s || *s == ' ' || *s == '\t' || *s == '(' || *s == ',' ||
               *s == ';';
}

static bool act_complete_word(const char *s)
{
        static const char *const words[] = { "complete", "completed", "done" };
        for (size_t i = 0; i < ELEMENTSOF(words); i++) {
                size_t n = strlen(words[i]);
                if (!strncasecmp(s, words[i], n) &&
                    (!s[n] || (s[n] == '.' && !s[n + 1])))
                        return true;
        }
        return false;
}

static int act_state(const char *state, bool *ret_complete, hd_verdict *v)
{
        const char *s = state;
        char q[72];

        *ret_complete = false;
        while (*s) {
                size_t n = strcspn(s, "\n");
                char line[512];
                const char *val;

                act_plain_line(s, n, line, sizeof(line));
                if ((val = act_key(line, "Phase"))) {
                        unsigned long x, y;
                        char *e1, *e2;
                        if (!isdigit((unsigned char)*val))
                                goto bad_phase;
                        x = strtoul(val, &e1, 10);
                        if (*e1 != '/' || !isdigit((unsigned char)e1[1]))
                                goto bad_phase;
                        y = strtoul(e1 + 1, &e2, 10);
                        if (!act_word_end(e2) || y == 0 || x > y || y > 100000)
                                goto bad_phase;
                } else if ((val = act_key(line, "Progress"))) {
                        unsigned long p;
                        char *e;
                        if (!isdigit((unsigned char)*val))
                                goto bad_progress;
                        p = strtoul(val, &e, 10);
                        if (*e == '%')
                                e++;
                        if (!act_word_end(e) || p > 100)
                                goto bad_progress;
                        if (p == 100)
                                *ret_complete = true;
                } else if ((val = act_key(line, "Status"))) {
                        if (act_complete_word(val))
                                *ret_complete = true;
                } else if (act_complete_word(line)) {
                        *ret_complete = true;
                }
                s += n;
                if (*s)
                        s++;
                continue;
bad_phase:
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "act/1.0: element current_state Phase '%s' is not X/Y with X <= Y",
                               payload_quote(val, q));
bad_progress:
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "act/1.0: element current_state Progress '%s' is not 0-100%%",
                               payload_quote(val, q));
        }
        return 0;
}

/* Items of a list: lines starting "- ", "* ", "+ " or "N. " with text. */
static size_t act_items(const char *s)
{
        size_t count = 0;

        while (*s) {
                size_t n = strcspn(s, "\n"), i = 0;
                if (n >= 3 && strchr("-*+", s[0]) && s[1] == ' ')
                        count++;
                else {
                        while (i < n && isdigit((unsigned char)s[i]))
                                i++;
                        if (i > 0 && i + 2 < n + 1 && (s[i] == '.' || s[i] == ')') &&
                            s[i + 1] == ' ')
                                count++;
                }
                s += n;
                if (*s)
                        s++;
        }
        return count;
}

int act_check(const struct act_doc *d, hd_verdict *v)
{
        static const int required[] = {
                ACT_PROJECT, ACT_TIMESTAMP, ACT_FROM_SESSION, ACT_ORIGINAL_TASK,
                ACT_WORK_COMPLETED, ACT_WORK_REMAINING, ACT_CURRENT_STATE,
        };
        int64_t usec;
        bool complete;
        char q[72];
        int r;

        for (size_t i = 0; i < ELEMENTSOF(required); i++)
                if (!d->f[required[i]])
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "act/1.0: missing element %s",
                                       act_xml_names[required[i]]);
        for (size_t i = 0; i < ELEMENTSOF(required); i++)
                if (required[i] != ACT_WORK_REMAINING && !*d->f[required[i]])
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "act/1.0: element %s is empty",
                                       act_xml_names[required[i]]);
        for (int i = 0; i < ACT_FIRST_BODY; i++) {
                if (!d->f[i])
                        continue;
                if (!*d->f[i] || strchr(d->f[i], '\n') ||
                    strlen(d->f[i]) > PAYLOAD_MAX_NAME)
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "act/1.0: element %s must be one line of 1 to %d bytes",
                                       act_xml_names[i], PAYLOAD_MAX_NAME);
        }
        if (hd_time_parse(d->f[ACT_TIMESTAMP], &usec) < 0)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "act/1.0: element metadata/timestamp '%s' is not ISO-8601 with offset",
                               payload_quote(d->f[ACT_TIMESTAMP], q));
        if (d->f[ACT_FORMAT_VERSION] && strcmp(d->f[ACT_FORMAT_VERSION], "1") &&
            strncmp(d->f[ACT_FORMAT_VERSION], "1.", 2))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "act/1.0: element metadata/format_version '%s' is not 1.x",
                               payload_quote(d->f[ACT_FORMAT_VERSION], q));
        r = act_state(d->f[ACT_CURRENT_STATE], &complete, v);
        if (r < 0)
                return r;
        if (!complete && act_items(d->f[ACT_WORK_REMAINING]) == 0)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "act/1.0: element work_remaining has no item and current_state does not mark the work complete");
        return 0;
}

int payload_act_validate(const json_t *p, const json_t *envelope,
                         const char *const *roles, hd_verdict *v)
{
        struct act_doc d = {};
        int r;

        if (!json_is_string(p))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "act/1.0: payload is not a string (the XML or Markdown text)");
        r = act_parse(json_string_value(p), json_string_length(p), &d, v);
        if (r < 0)
                return r;
        r = act_check(&d, v);
        act_doc_done(&d);
        return r;
}

/* ---- writers ---------------------------------------------------------- */

static void xml_escaped(struct sbuf *b, const char *s)
{
        for (; *s; s++) {
                switch (*s) {
                case '&': sb_puts(b, "&amp;"); break;
                case '<': sb_puts(b, "&lt;"); break;
                case '>': sb_puts(b, "&gt;"); break;
                default: sb_put(b, s, 1);
                }
        }
}

static void xml_lines(struct sbuf *b, const char *s, const char *indent)
{
        while (*s) {
                size_t n = strcspn(s, "\n");
                if (n > 0) {
                        _cleanup_free_ char *line = strndup(s, n);
                        sb_puts(b, indent);
                        if (line)
                                xml_escaped(b, line);
                        else
                                b->err = -ENOMEM;
                }
                sb_puts(b, "\n");
                s += n;
                if (*s)
                        s++;
        }
}

int act_to_xml(const struct act_doc *d, char **ret)
{
        struct sbuf b = {};

        sb_puts(&b, "<context_handoff>\n  <metadata>\n");
        for (int i = 0; i < ACT_FIRST_BODY; i++) {
                if (!d->f[i])
                        continue;
                sb_printf(&b, "    <%s>", act_xml_names[i] + 9);
                xml_escaped(&b, d->f[i]);
                sb_printf(&b, "</%s>\n", act_xml_names[i] + 9);
        }
        sb_puts(&b, "  </metadata>\n");
        for (int i = ACT_FIRST_BODY; i < _ACT_FIELD_MAX; i++) {
                if (!d->f[i])
                        continue;
                sb_printf(&b, "  <%s>\n", act_xml_names[i]);
                xml_lines(&b, d->f[i], "    ");
                sb_printf(&b, "  </%s>\n", act_xml_names[i]);
        }
        sb_puts(&b, "</context_handoff>\n");
        return sb_take(&b, ret);
}

/* Body lines as they are, except that a line starting with '#' is
 * escaped: text must not open sections of its own. */
static void md_body(struct sbuf *b, const char *s)
{
        while (*s) {
                size_t n = strcspn(s, "\n");
                if (*s == '#')
                        sb_puts(b, "\\");
                sb_put(b, s, n);
                sb_puts(b, "\n");
                s += n;
                if (*s)
                        s++;
        }
}

int act_to_md(const struct act_doc *d, int level, char **ret)
{
        struct sbuf b = {};
        char h1[8], h2[8];

        if (level < 1 || level > 5)
                return -EINVAL;
        memset(h1, '#', (size_t)level);
        h1[level] = '\0';
        memset(h2, '#', (size_t)level + 1);
        h2[level + 1] = '\0';
        sb_printf(&b, "%s Context Handoff\n\n%s Metadata\n", h1, h2);
        for (int i = 0; i < ACT_FIRST_BODY; i++)
                if (d->f[i])
                        sb_printf(&b, "- **%s:** %s\n", act_md_titles[i], d->f[i]);
        for (int i = ACT_FIRST_BODY; i < _ACT_FIELD_MAX; i++) {
                if (!d->f[i])
                        continue;
                sb_printf(&b, "\n%s %s\n", h2, act_md_titles[i]);
                md_body(&b, d->f[i]);
        }
        return sb_take(&b, ret);
}
