/* Private to the reader of handoffd.conf: loading the keys it names
 * (config_keys.c). */
#ifndef HD_CONFIG_KEYS_H
#define HD_CONFIG_KEYS_H

#include "config.h"

struct parse_state;

/* Every key of c loaded; the first failure stops it, described in *err
 * ("FILE:LINE: ..." with the line st noted for the key's value). */
int config_load_keys(struct config *c, const struct parse_state *st, char **err);

#endif
