/* Private to the reader of handoffd.conf: the state of one parse and its
 * list of errors, each "FILE:LINE: message" (config_err.c).  config_err()
 * is an error of the line being parsed and returns 0 (inih: a bad line);
 * config_err_line() of another line (a section's header);
 * config_err_file() of the file as a whole. */
#ifndef HD_CONFIG_ERR_H
#define HD_CONFIG_ERR_H

#include <ini.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>

#include "config.h"
#include "util.h"

/* Errors reported for one file, at most; then "... and N more". */
#define CONFIG_MAX_ERRORS 20

struct parse_state {
        struct config *c;
        crypto_hash_sha256_state digest;        /* of every line read */
        /* the reader: whole lines from f, counted as inih counts them */
        FILE *f;
        char *buf;
        size_t cap;
        int line;               /* the line being parsed, from 1 */
        bool key_line;          /* it should reach the handler */
        bool handled;           /* it did */
        int section_line;       /* the header of the current section */
        bool section_reported;  /* its "unknown section" is out */
        /* The current section, whole: inih's own copy, which it passes
         * to the handler, is cut at 49 bytes (its MAX_SECTION, fixed in
         * ini.c), shorter than "remote " and a 64-character name.  The
         * reader reads headers as inih does (config_load.c) and the
         * handler takes the section from here.  A header is one line,
         * so it always fits. */
        char section[INI_MAX_LINE];
        /* [agent NAME] and [remote NAME] with no key at all: inih never
         * calls the handler for them, the reader sees them end */
        unsigned section_keys;
        /* a KEY = VALUE line since the header (inih's prev_name): an
         * indented line after it continues that value, even one that
         * starts with '[' */
        bool after_key;
        /* the errors: "FILE:LINE: message" lines */
        char *errs;
        size_t errs_len;
        unsigned n_errs;
        /* the line of each key file named, by the pointer to its value in
         * c: its errors come after the parse (config_load_keys()) */
        struct config_value_line {
                const void *value;
                int line;
        } *value_lines;
        size_t n_value_lines;
};

void config_errs_append(struct parse_state *st, const char *entry, size_t n);
_printf_(2, 3) int config_err(struct parse_state *st, const char *fmt, ...);
_printf_(3, 4) int config_err_line(struct parse_state *st, int line, const char *fmt, ...);
_printf_(2, 3) void config_err_file(struct parse_state *st, const char *fmt, ...);
/* value (a string c now holds) was set by the line being parsed: 0 or
 * -ENOMEM.  config_line_of(): that line, or 0 when none was noted. */
int config_note_line(struct parse_state *st, const void *value);
int config_line_of(const struct parse_state *st, const void *value);

#endif
