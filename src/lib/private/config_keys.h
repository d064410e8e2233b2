/* Private to the reader of handoffd.conf: loading the keys it names
 * (config_keys.c). */
#ifndef HD_CONFIG_KEYS_H
#define HD_CONFIG_KEYS_H

#include "config.h"

/* Every key of c loaded; the first failure stops it, described in *err. */
int config_load_keys(struct config *c, char **err);

#endif
