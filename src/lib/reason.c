/* The reason table: one name per hd_reason, used alike by logs, reason
 * files, status counters and tests. */
#include <errno.h>
#include <string.h>

#include "handoff.h"
#include "util.h"

static const char *const reason_names[_HD_R_MAX] = {
        [HD_OK] = "ok",
        [HD_R_TOO_LARGE] = "too_large",
        [HD_R_NOT_REGULAR] = "not_regular",
        [HD_R_HARDLINK] = "hardlink",
        [HD_R_BAD_NAME] = "bad_name",
        [HD_R_PARSE_ERROR] = "parse_error",
        [HD_R_DUPLICATE_KEY] = "duplicate_key",
        [HD_R_TOO_DEEP] = "too_deep",
        [HD_R_BAD_VERSION] = "bad_version",
        [HD_R_MISSING_FIELD] = "missing_field",
        [HD_R_BAD_TYPE] = "bad_type",
        [HD_R_BAD_ID] = "bad_id",
        [HD_R_BAD_AGENT] = "bad_agent",
        [HD_R_SELF_HANDOFF] = "self_handoff",
        [HD_R_BAD_MAC_FORMAT] = "bad_mac_format",
        [HD_R_BAD_MAC] = "bad_mac",
        [HD_R_UNKNOWN_KEY] = "unknown_key",
        [HD_R_BAD_TIMESTAMP] = "bad_timestamp",
        [HD_R_EXPIRED] = "expired",
        [HD_R_FUTURE_TIMESTAMP] = "future_timestamp",
        [HD_R_NUMBER_OUT_OF_RANGE] = "number_out_of_range",
        [HD_R_DUPLICATE_ID] = "duplicate_id",
        [HD_R_PAYLOAD_INVALID] = "payload_invalid",
        [HD_R_DECISION_LOG_REWRITE] = "decision_log_rewrite",
        [HD_R_EXPIRED_UNCLAIMED] = "expired_unclaimed",
};

const char *hd_reason_name(hd_reason r)
{
        if ((unsigned)r >= ELEMENTSOF(reason_names))
                return NULL;
        return reason_names[r];
}

int hd_reason_from_name(const char *s)
{
        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(reason_names); i++)
                if (reason_names[i] && strcmp(reason_names[i], s) == 0)
                        return (int)i;
        return -EINVAL;
}

int parse_int64(const char *s, int64_t min, int64_t max, int64_t *ret)
{
        long long x;
        char *end;

        if (!s || !*s || (*s != '-' && (*s < '0' || *s > '9')))
                return -EINVAL;
        errno = 0;
        x = strtoll(s, &end, 10);
        if (errno == ERANGE || x < min || x > max)
                return -ERANGE;
        if (errno || *end)
                return -EINVAL;
        *ret = x;
        return 0;
}

/* Length of the valid UTF-8 sequence at p (1-4), 0 if invalid: no
 * overlongs, no surrogates, nothing above U+10FFFF, no truncation. */
static size_t utf8_len(const unsigned char *p)
{
        unsigned c = p[0];
        size_t n;
        unsigned min, cp;

        if (c < 0x80)
                return 1;
        if ((c & 0xe0) == 0xc0)
                n = 2, min = 0x80, cp = c & 0x1f;
        else if ((c & 0xf0) == 0xe0)
                n = 3, min = 0x800, cp = c & 0x0f;
        else if ((c & 0xf8) == 0xf0)
                n = 4, min = 0x10000, cp = c & 0x07;
        else
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (p[i] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}

void utf8_fix(char *s)
{
        unsigned char *p = (unsigned char *)s;

        while (*p) {
                size_t n = utf8_len(p);
                if (n == 0) {
                        *p++ = '?';
                        continue;
                }
                p += n;
        }
}
