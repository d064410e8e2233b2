/* Private to the reader of handoffd.conf: its values (config_values.c);
 * config_parse_size() and config_parse_duration() are in config.h, for
 * the programs too. */
#ifndef HD_CONFIG_VALUES_H
#define HD_CONFIG_VALUES_H

#include <stdbool.h>

#include "config.h"

/* yes/true/on/1 or no/false/off/0: 0, else -EINVAL. */
int config_parse_bool(const char *s, bool *ret);
/* *dst = a copy of v (the old one freed): 0 or -ENOMEM. */
int config_set_str(char **dst, const char *v);
/* c->roles = the names of v, split at commas and blanks: 0, -EINVAL for
 * none, -ENOMEM. */
int config_set_roles(struct config *c, const char *v);

#endif
