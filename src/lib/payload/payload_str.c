/* The field checks the payload types share: strings and string arrays
 * with their limits, and quoting an untrusted value for a detail line. */
#include <string.h>

#include "handoff.h"
#include "payload_str.h"
#include "util.h"

const char *payload_quote(const char *s, char buf[static 72])
{
        size_t i;

        for (i = 0; s && s[i] && i < 64; i++)
                buf[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
        if (s && s[i]) {
                memcpy(buf + i, "...", 3);
                i += 3;
        }
        buf[i] = '\0';
        return buf;
}

int payload_string(const char *type, const json_t *o, const char *key,
                   bool required, const char **ret, hd_verdict *v)
{
        const json_t *j = json_object_get(o, key);

        if (!j) {
                if (required)
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "%s: missing field '%s'", type, key);
                return 0;
        }
        if (!json_is_string(j))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "%s: field '%s' is not a string", type, key);
        if (json_string_length(j) > PAYLOAD_MAX_STRING)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "%s: field '%s' is longer than %d bytes", type,
                               key, PAYLOAD_MAX_STRING);
        if (strlen(json_string_value(j)) != json_string_length(j))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "%s: field '%s' holds a NUL byte", type, key);
        if (ret)
                *ret = json_string_value(j);
        return 0;
}

int payload_string_array(const char *type, const json_t *o, const char *key,
                         bool required, hd_verdict *v)
{
        const json_t *a = json_object_get(o, key), *e;
        size_t i;

        if (!a) {
                if (required)
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "%s: missing field '%s'", type, key);
                return 0;
        }
        if (!json_is_array(a))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "%s: field '%s' is not an array", type, key);
        if (json_array_size(a) > PAYLOAD_MAX_ITEMS)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "%s: field '%s' has more than %d items", type,
                               key, PAYLOAD_MAX_ITEMS);
        json_array_foreach(a, i, e) {
                if (!json_is_string(e))
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "%s: field '%s' item %zu is not a string",
                                       type, key, i);
                if (json_string_length(e) > PAYLOAD_MAX_STRING ||
                    strlen(json_string_value(e)) != json_string_length(e))
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "%s: field '%s' item %zu is too long or holds a NUL byte",
                                       type, key, i);
        }
        return 0;
}
