/* The daemon's record of a claimed item; see record.h. */
#include <string.h>

#include "record.h"

bool record_form(const json_t *doc)
{
        const char *src = json_string_value(json_object_get(doc, "source"));

        return json_is_object(json_object_get(doc, "handoff")) &&
               json_is_string(json_object_get(doc, "accepted_at")) &&
               src && !strcmp(src, "voice_handoff");
}

const json_t *record_handoff(const json_t *doc)
{
        return record_form(doc) ? json_object_get(doc, "handoff") : doc;
}
