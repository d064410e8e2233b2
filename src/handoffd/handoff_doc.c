/* The one place that reads a handoff's fields by key (handoff_doc.h): the
 * verified document into struct handoff, and what an unverified one says
 * of itself for the verdicts that need it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handoff_doc.h"
#include "record.h"
#include "util.h"

static const char *str(const json_t *doc, const char *key)
{
        return json_string_value(json_object_get(doc, key));
}

/* src copied into dst (n bytes); false when it is missing or too long. */
static bool copy(char *dst, size_t n, const char *src)
{
        return src && xsnprintf(dst, n, "%s", src) >= 0;
}

int handoff_parse(json_t *doc, struct handoff *ret)
{
        struct handoff h = { 0 };
        const char *ini = str(doc, "initiated_at"), *exp = str(doc, "expires_at");
        const char *kid = str(doc, "kid");

        if (!json_is_object(doc) || !copy(h.id, sizeof(h.id), str(doc, "handoff_id")) ||
            !copy(h.from, sizeof(h.from), str(doc, "from_agent")) ||
            !copy(h.to, sizeof(h.to), str(doc, "to_agent")) ||
            (kid && !copy(h.kid, sizeof(h.kid), kid)) ||
            !ini || hd_time_parse(ini, &h.initiated_usec) < 0 ||
            !exp || hd_time_parse(exp, &h.expires_usec) < 0)
                return -EBADMSG;
        h.ptype = payload_type_find(str(doc, "payload_type"));
        h.payload = json_object_get(doc, "payload");
        h.doc = json_incref(doc);
        *ret = h;
        return 0;
}

int handoff_from_record(const json_t *rec, struct handoff *ret)
{
        const json_t *doc = record_handoff(rec);

        return doc == rec ? -EBADMSG : handoff_parse((json_t *)doc, ret);
}

void handoff_clear(struct handoff *h)
{
        if (!h)
                return;
        json_decref(h->doc);
        free(h->canon);
        *h = (struct handoff){ 0 };
}

const char *handoff_unverified_id(const json_t *doc)
{
        return str(doc, "handoff_id");
}

const char *handoff_unverified_to(const json_t *doc)
{
        return str(doc, "to_agent");
}

void handoff_unverified_times(const json_t *doc, const char **ret_ini, const char **ret_exp)
{
        *ret_ini = str(doc, "initiated_at");
        *ret_exp = str(doc, "expires_at");
}
