/* Names from untrusted input: handoff ids, agent names, spool file names.
 * A leaf: the envelope and every payload type check names with it. */
#include <stdbool.h>
#include <stddef.h>

#include "handoff.h"

static bool is_lower_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
        return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* ^[first][first_-]{0,max-1}$ where first is is_alnum or is_lower_alnum. */
static bool name_matches(const char *s, bool (*first)(char), size_t max)
{
        size_t i;

        if (!s || !first(s[0]))
                return false;
        for (i = 1; s[i]; i++)
                if (i >= max || !(first(s[i]) || s[i] == '_' || s[i] == '-'))
                        return false;
        return true;
}

bool hd_id_valid(const char *s)
{
        return name_matches(s, is_alnum, 128);         /* ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$ */
}

bool hd_agent_valid(const char *s)
{
        return name_matches(s, is_lower_alnum, 64);    /* ^[a-z0-9][a-z0-9_-]{0,63}$ */
}

bool hd_name_safe(const char *s)
{
        size_t i;

        /* A leading '.' also rules out "." and "..", and hides the temp
         * names writers use before their rename. */
        if (!s || s[0] == '\0' || s[0] == '.')
                return false;
        for (i = 0; s[i]; i++) {
                unsigned char c = (unsigned char)s[i];
                if (i >= 255 || c == '/' || c < 0x20 || c == 0x7f)
                        return false;
        }
        return true;
}
