/* Private to the reader of handoffd.conf: its sections and keys
 * (config_sections.c). */
#ifndef HD_CONFIG_SECTIONS_H
#define HD_CONFIG_SECTIONS_H

#include "config.h"

/* inih's handler; user is the struct parse_state of config_err.h. */
int config_handler(void *user, const char *section, const char *k, const char *v);

#endif
