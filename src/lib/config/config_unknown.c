/* handoffd.conf's unknown names: the error of an unknown key at its line
 * and of an unknown section once at its header, each with the known name
 * it is closest to (at most 2 edits, fewer than the name's length). */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "config_err.h"
#include "config_unknown.h"
#include "util.h"

/* Levenshtein distance of a and b (short names), capped at 9. */
static unsigned edit_distance(const char *a, size_t la, const char *b)
{
        size_t lb = strlen(b);
        unsigned row[32], prev, cur;

        if (la >= ELEMENTSOF(row) || lb >= ELEMENTSOF(row))
                return 9;
        for (size_t j = 0; j <= lb; j++)
                row[j] = (unsigned)j;
        for (size_t i = 1; i <= la; i++) {
                prev = row[0];
                row[0] = (unsigned)i;
                for (size_t j = 1; j <= lb; j++) {
                        unsigned sub = prev + (tolower((unsigned char)a[i - 1]) != b[j - 1]);
                        cur = row[j];
                        row[j] = row[j] + 1 < row[j - 1] + 1 ? row[j] + 1 : row[j - 1] + 1;
                        if (sub < row[j])
                                row[j] = sub;
                        prev = cur;
                }
        }
        return row[lb] < 9 ? row[lb] : 9;
}

/* "unknown key 'K' in [SECTION NAME]", with the known key of the section
 * it is closest to (at most 2 edits, fewer than the key's length). */
int config_unknown_key(struct parse_state *st, const char *section, const char *name,
                       const char *k, const char *const *known)
{
        const char *best = NULL;
        unsigned best_d = 3;

        for (; *known; known++) {
                unsigned d = edit_distance(k, strlen(k), *known);
                if (d < best_d && d < strlen(*known)) {
                        best_d = d;
                        best = *known;
                }
        }
        if (best)
                return config_err(st, "unknown key '%s' in [%s%s%s] (did you mean %s?)",
                                  k, section, name ? " " : "", name ?: "", best);
        return config_err(st, "unknown key '%s' in [%s%s%s]", k, section,
                          name ? " " : "", name ?: "");
}

/* The section names handoffd.conf(5) documents, for "did you mean". */
static const char *const config_sections[] = {
        "spool", "keys", "agent", "retention", "control", "metrics", "payload",
        "relay", "remote", "hub",
};

/* Reported once, at the section's header; its keys are then ignored. */
int config_unknown_section(struct parse_state *st, const char *section)
{
        size_t word = strcspn(section, " \t");
        const char *rest = section + word, *best = NULL;
        unsigned best_d = 3;

        if (st->section_reported)
                return 0;
        st->section_reported = true;
        for (size_t i = 0; i < ELEMENTSOF(config_sections); i++) {
                unsigned d = edit_distance(section, word, config_sections[i]);
                if (d < best_d && d < strlen(config_sections[i])) {
                        best_d = d;
                        best = config_sections[i];
                }
        }
        while (*rest == ' ' || *rest == '\t')
                rest++;
        /* [agent NAME] and [remote NAME] name what they configure */
        bool named = best && (!strcmp(best, "agent") || !strcmp(best, "remote"));
        if (named && !*rest)
                return config_err_line(st, st->section_line,
                                 "[%s]: this section names its %s: [%s NAME]", section,
                                 best, best);
        if (named)
                return config_err_line(st, st->section_line,
                                 "unknown section [%s] (did you mean [%s %s]?)", section, best, rest);
        if (best)
                return config_err_line(st, st->section_line,
                                 "unknown section [%s] (did you mean [%s]?)", section, best);
        return config_err_line(st, st->section_line, "unknown section [%s]", section);
}
