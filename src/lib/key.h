/* Private: the layout of hd_key, shared by key.c (which owns it) and mac.c
 * (which only reads the bytes).  Not installed. */
#ifndef HD_KEY_H
#define HD_KEY_H

#include <stddef.h>

#include "handoff.h"

struct hd_key {
        unsigned char *bytes;   /* sodium_malloc'ed: guard pages, mlock'ed */
        size_t len;
};

#endif
