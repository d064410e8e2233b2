/* The errors of one parse of handoffd.conf: each appended to one text as
 * "FILE:LINE: message" (LINE 0: "FILE: message"), at most
 * CONFIG_MAX_ERRORS of them; config_load() adds "... and N more". */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_err.h"

void config_errs_append(struct parse_state *st, const char *entry, size_t n)
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
                config_errs_append(st, entry, (size_t)n);
}

/* An error of the line being parsed. */
int config_err(struct parse_state *st, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        perr_at(st, st->line, fmt, ap);
        va_end(ap);
        return 0;       /* inih: stop treating this line as good */
}

/* An error of another line (a section's header). */
int config_err_line(struct parse_state *st, int line,
                                    const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        perr_at(st, line, fmt, ap);
        va_end(ap);
        return 0;
}

int config_note_line(struct parse_state *st, const void *value)
{
        struct config_value_line *l;

        l = realloc(st->value_lines, (st->n_value_lines + 1) * sizeof(*l));
        if (!l)
                return -ENOMEM;
        st->value_lines = l;
        l[st->n_value_lines++] = (struct config_value_line) { value, st->line };
        return 0;
}

int config_line_of(const struct parse_state *st, const void *value)
{
        /* the last note first: a value set twice was freed, and its
         * address may have been given to a later one */
        for (size_t i = st->n_value_lines; value && i > 0; i--)
                if (st->value_lines[i - 1].value == value)
                        return st->value_lines[i - 1].line;
        return 0;
}

/* An error of the file as a whole (no line). */
void config_err_file(struct parse_state *st, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        perr_at(st, 0, fmt, ap);
        va_end(ap);
}
