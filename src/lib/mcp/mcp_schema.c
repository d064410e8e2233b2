/* The JSON Schema subset the MCP tools declare, checked on their
 * arguments: what a tool says in tools/list is what it enforces. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"
#include "util.h"

json_t *mcp_json(const char *sq)
{
        _cleanup_free_ char *s = strdup(sq);
        json_error_t err;

        if (!s)
                return NULL;
        for (char *p = s; *p; p++)
                if (*p == '\'')
                        *p = '"';
        return json_loads(s, JSON_REJECT_DUPLICATES, &err);
}

static bool schema_type_is(const char *type, const json_t *v)
{
        if (!strcmp(type, "object"))
                return json_is_object(v);
        if (!strcmp(type, "array"))
                return json_is_array(v);
        if (!strcmp(type, "string"))
                return json_is_string(v);
        if (!strcmp(type, "integer"))
                return json_is_integer(v);
        if (!strcmp(type, "number"))
                return json_is_number(v);
        if (!strcmp(type, "boolean"))
                return json_is_boolean(v);
        if (!strcmp(type, "null"))
                return json_is_null(v);
        return false;
}

static int schema_type(const json_t *schema, const json_t *v, const char *where,
                       char *err, size_t errlen)
{
        const json_t *t = json_object_get(schema, "type"), *x;
        size_t i;

        if (!t)
                return 0;
        if (json_is_string(t)) {
                if (schema_type_is(json_string_value(t), v))
                        return 0;
                snprintf(err, errlen, "%s: not %s %s", where,
                         strchr("aeiou", json_string_value(t)[0]) ? "an" : "a",
                         json_string_value(t));
                return -EINVAL;
        }
        json_array_foreach(t, i, x)
                if (json_is_string(x) && schema_type_is(json_string_value(x), v))
                        return 0;
        snprintf(err, errlen, "%s: not of the types the schema allows", where);
        return -EINVAL;
}

static int schema_object(const json_t *schema, const json_t *v, const char *where,
                         char *err, size_t errlen)
{
        const json_t *props = json_object_get(schema, "properties");
        const json_t *req = json_object_get(schema, "required"), *x;
        const char *k;
        char sub[256];
        size_t i;
        int r;

        json_array_foreach(req, i, x)
                if (json_is_string(x) && !json_object_get(v, json_string_value(x))) {
                        snprintf(err, errlen, "%s: '%s' is required", where,
                                 json_string_value(x));
                        return -EINVAL;
                }
        json_object_foreach((json_t *)v, k, x) {
                const json_t *ps = json_object_get(props, k);
                if (!ps) {
                        if (json_is_false(json_object_get(schema, "additionalProperties"))) {
                                snprintf(err, errlen, "%s: unknown member '%.64s'", where, k);
                                return -EINVAL;
                        }
                        continue;
                }
                snprintf(sub, sizeof(sub), "%s.%s", where, k);
                r = mcp_schema_check(ps, x, sub, err, errlen);
                if (r < 0)
                        return r;
        }
        return 0;
}

int mcp_schema_check(const json_t *schema, const json_t *v, const char *where,
                     char *err, size_t errlen)
{
        const json_t *en = json_object_get(schema, "enum"), *x;
        const json_t *items = json_object_get(schema, "items");
        char sub[256];
        size_t i;
        int r;

        r = schema_type(schema, v, where, err, errlen);
        if (r < 0)
                return r;
        if (en) {
                bool found = false;
                json_array_foreach(en, i, x)
                        found = found || json_equal(x, (json_t *)v);
                if (!found) {
                        snprintf(err, errlen, "%s: not one of the allowed values", where);
                        return -EINVAL;
                }
        }
        if (json_is_object(v))
                return schema_object(schema, v, where, err, errlen);
        if (json_is_array(v)) {
                x = json_object_get(schema, "maxItems");
                if (x && json_array_size(v) > (size_t)json_integer_value(x)) {
                        snprintf(err, errlen, "%s: more than %lld items", where,
                                 (long long)json_integer_value(x));
                        return -EINVAL;
                }
                if (!items)
                        return 0;
                json_array_foreach(v, i, x) {
                        snprintf(sub, sizeof(sub), "%s[%zu]", where, i);
                        r = mcp_schema_check(items, x, sub, err, errlen);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        if (json_is_string(v)) {
                /* lengths in code points, as JSON Schema counts them */
                size_t n = 0;
                for (const char *p = json_string_value(v); *p; p++)
                        n += ((unsigned char)*p & 0xc0) != 0x80;
                x = json_object_get(schema, "minLength");
                if (x && n < (size_t)json_integer_value(x)) {
                        snprintf(err, errlen, "%s: shorter than %lld characters", where,
                                 (long long)json_integer_value(x));
                        return -EINVAL;
                }
                x = json_object_get(schema, "maxLength");
                if (x && n > (size_t)json_integer_value(x)) {
                        snprintf(err, errlen, "%s: longer than %lld characters", where,
                                 (long long)json_integer_value(x));
                        return -EINVAL;
                }
                return 0;
        }
        if (json_is_number(v)) {
                double d = json_number_value(v);
                x = json_object_get(schema, "minimum");
                if (x && d < json_number_value(x)) {
                        snprintf(err, errlen, "%s: less than %g", where, json_number_value(x));
                        return -EINVAL;
                }
                x = json_object_get(schema, "maximum");
                if (x && d > json_number_value(x)) {
                        snprintf(err, errlen, "%s: more than %g", where, json_number_value(x));
                        return -EINVAL;
                }
        }
        return 0;
}
