/* Private to the reader of handoffd.conf: the errors of an unknown key
 * or section (config_unknown.c). */
#ifndef HD_CONFIG_UNKNOWN_H
#define HD_CONFIG_UNKNOWN_H

#include "config_err.h"

/* k is no key of [section name] (name NULL for a section without one),
 * whose keys are known (NULL-terminated): its error, as config_err(). */
int config_unknown_key(struct parse_state *st, const char *section, const char *name,
                       const char *k, const char *const *known);
/* [section] is none handoffd.conf(5) documents: its error once, at the
 * section's header (its keys are then ignored), as config_err_line(). */
int config_unknown_section(struct parse_state *st, const char *section);

#endif
