/* U.AgentHandoff/0.1.0: the AgentWorkflow handoff spec, and its YAML form
 * read with libyaml. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "handoff.h"
#include "payload_str.h"
#include "payload_names.h"
#include "payload_uah.h"
#include "util.h"

static const char *const uah_default_roles[] = {
        "strategist", "executor", "proxy-auditor", "human", NULL,
};

static const char *const uah_arrays[] = {
        "instructions", "acceptance_criteria", "constraints", "artifacts",
};

static const char *const uah_known[] = {
        "schema_version", "type", "version", "context", "session_id",
        "handoff_id", "from_agent_type", "to_agent_type", "issued_at",
        "instructions", "acceptance_criteria", "constraints", "artifacts",
        "prohibited_actions", "notes",
};

static int uah_fixed(const json_t *p, const char *key, const char *want,
                     hd_verdict *v)
{
        const char *s;
        char q[72];
        int r;

        r = payload_string(PT_UAH, p, key, true, &s, v);
        if (r < 0)
                return r;
        if (strcmp(s, want) != 0)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "%s: field '%s' must be \"%s\", not '%s'", PT_UAH,
                               key, want, payload_quote(s, q));
        return 0;
}

/* A non-empty one-line name of bounded length. */
static int uah_name(const json_t *p, const char *key, const char **ret,
                    hd_verdict *v)
{
        const char *s;
        int r;

        r = payload_string(PT_UAH, p, key, true, &s, v);
        if (r < 0)
                return r;
        if (!*s || strlen(s) > PAYLOAD_MAX_NAME)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "%s: field '%s' must be 1 to %d bytes", PT_UAH,
                               key, PAYLOAD_MAX_NAME);
        for (const char *c = s; *c; c++)
                if ((unsigned char)*c < 0x20)
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "%s: field '%s' holds a control character",
                                       PT_UAH, key);
        if (ret)
                *ret = s;
        return 0;
}

static int uah_role(const json_t *p, const char *key, const char *const *roles,
                    hd_verdict *v)
{
        const char *s;
        char q[72];
        int r;

        r = uah_name(p, key, &s, v);
        if (r < 0)
                return r;
        for (const char *const *x = roles; *x; x++)
                if (!strcmp(*x, s))
                        return 0;
        return verdict(v, HD_R_PAYLOAD_INVALID,
                       "%s: field '%s' '%s' is not in the role set", PT_UAH, key,
                       payload_quote(s, q));
}

int payload_uah_validate(const json_t *p, const json_t *envelope,
                         const char *const *roles, hd_verdict *v)
{
        const char *key, *issued;
        const json_t *val;
        int64_t usec;
        char q[72];
        size_t i;
        int r;

        if (!json_is_object(p))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "%s: payload is not an object", PT_UAH);
        if (!roles)
                roles = uah_default_roles;
        r = uah_fixed(p, "schema_version", "0.1.0", v);
        if (r >= 0)
                r = uah_fixed(p, "type", "U.AgentHandoff", v);
        if (r >= 0)
                r = uah_fixed(p, "version", "0.1.0", v);
        if (r >= 0)
                r = uah_name(p, "context", NULL, v);
        if (r >= 0)
                r = uah_name(p, "session_id", NULL, v);
        if (r >= 0)
                r = uah_name(p, "handoff_id", NULL, v);
        if (r >= 0)
                r = uah_role(p, "from_agent_type", roles, v);
        if (r >= 0)
                r = uah_role(p, "to_agent_type", roles, v);
        if (r >= 0)
                r = payload_string(PT_UAH, p, "issued_at", true, &issued, v);
        if (r < 0)
                return r;
        if (hd_time_parse(issued, &usec) < 0)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "%s: field 'issued_at' '%s' is not an ISO-8601 time with offset",
                               PT_UAH, payload_quote(issued, q));
        for (i = 0; i < ELEMENTSOF(uah_arrays); i++) {
                r = payload_string_array(PT_UAH, p, uah_arrays[i], true, v);
                if (r < 0)
                        return r;
        }
        r = payload_string_array(PT_UAH, p, "prohibited_actions", false, v);
        if (r >= 0)
                r = payload_string(PT_UAH, p, "notes", false, NULL, v);
        if (r < 0)
                return r;
        json_object_foreach((json_t *)p, key, val) {
                bool known = !strncmp(key, "x-", 2);
                for (i = 0; !known && i < ELEMENTSOF(uah_known); i++)
                        known = !strcmp(key, uah_known[i]);
                if (!known)
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "%s: unknown field '%s' (extensions start with 'x-')",
                                       PT_UAH, payload_quote(key, q));
        }
        return 0;
}

/* ---- YAML ------------------------------------------------------------- */

#define YAML_MAX_NODES 100000

struct yctx {
        yaml_parser_t parser;
        unsigned nodes;
        hd_verdict *v;
};

static bool yaml_word(const char *s, const char *const *words)
{
        for (; *words; words++)
                if (!strcmp(s, *words))
                        return true;
        return false;
}

/* A plain scalar by the YAML 1.2 core schema; anything else is a string,
 * so dates, versions like 0.1.0 and names stay text. */
static json_t *yaml_plain(const char *s, size_t len)
{
        static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
        static const char *const trues[] = { "true", "True", "TRUE", NULL };
        static const char *const falses[] = { "false", "False", "FALSE", NULL };
        char *end;

        if (strlen(s) != len)
                return NULL;
        if (yaml_word(s, nulls))
                return json_null();
        if (yaml_word(s, trues))
                return json_true();
        if (yaml_word(s, falses))
                return json_false();
        const char *d = s + (*s == '-' || *s == '+');
        if (*d && strlen(d) < 19 && strspn(d, "0123456789") == strlen(d)) {
                errno = 0;
                long long n = strtoll(s, &end, 10);
                if (!errno && !*end)
                        return json_integer(n);
        }
        if (len > 0 && len < 64 && strspn(s, "0123456789.-+eE") == len &&
            strpbrk(s, "0123456789") && strchr(s, '.')) {
                errno = 0;
                double x = strtod(s, &end);
                if (!errno && !*end && isfinite(x))
                        return json_real(x);
        }
        return json_stringn(s, len);
}

static int yaml_next(struct yctx *c, yaml_event_t *ev)
{
        if (!yaml_parser_parse(&c->parser, ev))
                return verdict(c->v, HD_R_PARSE_ERROR,
                               "YAML: %s at line %zu",
                               c->parser.problem ? c->parser.problem : "error",
                               c->parser.problem_mark.line + 1);
        return 0;
}

static int yaml_node(struct yctx *c, yaml_event_t *ev, unsigned depth,
                     json_t **ret);

static int yaml_mapping(struct yctx *c, unsigned depth, json_t **ret)
{
        _cleanup_json_ json_t *o = json_object();
        int r;

        if (!o)
                return -ENOMEM;
        for (;;) {
                _cleanup_json_ json_t *k = NULL, *val = NULL;
                yaml_event_t ev;

                r = yaml_next(c, &ev);
                if (r < 0)
                        return r;
                if (ev.type == YAML_MAPPING_END_EVENT) {
                        yaml_event_delete(&ev);
                        break;
                }
                r = yaml_node(c, &ev, depth + 1, &k);
                yaml_event_delete(&ev);
                if (r < 0)
                        return r;
                if (!json_is_string(k))
                        return verdict(c->v, HD_R_PARSE_ERROR,
                                       "YAML: a mapping key is not a string");
                if (json_object_get(o, json_string_value(k))) {
                        char q[72];
                        return verdict(c->v, HD_R_DUPLICATE_KEY,
                                       "YAML: duplicate key '%s'",
                                       payload_quote(json_string_value(k), q));
                }
                r = yaml_next(c, &ev);
                if (r < 0)
                        return r;
                r = yaml_node(c, &ev, depth + 1, &val);
                yaml_event_delete(&ev);
                if (r < 0)
                        return r;
                if (json_object_set(o, json_string_value(k), val) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(o);
        return 0;
}

static int yaml_sequence(struct yctx *c, unsigned depth, json_t **ret)
{
        _cleanup_json_ json_t *a = json_array();
        int r;

        if (!a)
                return -ENOMEM;
        for (;;) {
                _cleanup_json_ json_t *val = NULL;
                yaml_event_t ev;

                r = yaml_next(c, &ev);
                if (r < 0)
                        return r;
                if (ev.type == YAML_SEQUENCE_END_EVENT) {
                        yaml_event_delete(&ev);
                        break;
                }
                r = yaml_node(c, &ev, depth + 1, &val);
                yaml_event_delete(&ev);
                if (r < 0)
                        return r;
                if (json_array_append(a, val) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(a);
        return 0;
}

static int yaml_node(struct yctx *c, yaml_event_t *ev, unsigned depth,
                     json_t **ret)
{
        const char *tag = NULL;

        if (++c->nodes > YAML_MAX_NODES)
                return verdict(c->v, HD_R_TOO_LARGE, "YAML: more than %d nodes",
                               YAML_MAX_NODES);
        if (depth > HD_DEFAULT_MAX_DEPTH)
                return verdict(c->v, HD_R_TOO_DEEP,
                               "YAML: nested deeper than %d", HD_DEFAULT_MAX_DEPTH);
        switch (ev->type) {
        case YAML_ALIAS_EVENT:
                /* Aliases expand without bound ("billion laughs"). */
                return verdict(c->v, HD_R_PARSE_ERROR,
                               "YAML: aliases are not accepted");
        case YAML_SCALAR_EVENT:
                tag = (const char *)ev->data.scalar.tag;
                if (tag && strcmp(tag, YAML_STR_TAG) != 0)
                        return verdict(c->v, HD_R_PARSE_ERROR,
                                       "YAML: tag '%s' is not accepted", tag);
                if (ev->data.scalar.anchor)
                        return verdict(c->v, HD_R_PARSE_ERROR,
                                       "YAML: anchors are not accepted");
                if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !tag)
                        *ret = yaml_plain((const char *)ev->data.scalar.value,
                                          ev->data.scalar.length);
                else
                        *ret = json_stringn((const char *)ev->data.scalar.value,
                                            ev->data.scalar.length);
                if (!*ret)
                        return verdict(c->v, HD_R_PARSE_ERROR,
                                       "YAML: a scalar holds a NUL byte");
                return 0;
        case YAML_MAPPING_START_EVENT:
                if (ev->data.mapping_start.anchor || ev->data.mapping_start.tag)
                        return verdict(c->v, HD_R_PARSE_ERROR,
                                       "YAML: anchors and tags are not accepted");
                return yaml_mapping(c, depth, ret);
        case YAML_SEQUENCE_START_EVENT:
                if (ev->data.sequence_start.anchor || ev->data.sequence_start.tag)
                        return verdict(c->v, HD_R_PARSE_ERROR,
                                       "YAML: anchors and tags are not accepted");
                return yaml_sequence(c, depth, ret);
        default:
                return verdict(c->v, HD_R_PARSE_ERROR, "YAML: unexpected event");
        }
}

int payload_uah_yaml(const char *buf, size_t len, json_t **ret, hd_verdict *v)
{
        struct yctx c = { .v = v };
        _cleanup_json_ json_t *root = NULL;
        yaml_event_t ev;
        int r;

        if (len > HD_DEFAULT_MAX_SIZE)
                return verdict(v, HD_R_TOO_LARGE, "YAML: larger than %d bytes",
                               HD_DEFAULT_MAX_SIZE);
        if (!yaml_parser_initialize(&c.parser))
                return -ENOMEM;
        yaml_parser_set_input_string(&c.parser, (const unsigned char *)buf, len);
        /* stream start, document start, the root node, document end,
         * stream end: anything else (a second document) is refused. */
        for (int step = 0; step < 5; step++) {
                r = yaml_next(&c, &ev);
                if (r < 0)
                        goto out;
                static const yaml_event_type_t want[] = {
                        YAML_STREAM_START_EVENT, YAML_DOCUMENT_START_EVENT, 0,
                        YAML_DOCUMENT_END_EVENT, YAML_STREAM_END_EVENT,
                };
                if (step == 2) {
                        if (ev.type != YAML_MAPPING_START_EVENT)
                                r = verdict(v, HD_R_PARSE_ERROR,
                                            "YAML: the document is not a mapping");
                        else
                                r = yaml_node(&c, &ev, 1, &root);
                } else if (ev.type != want[step]) {
                        r = verdict(v, HD_R_PARSE_ERROR,
                                    step == 4 ? "YAML: more than one document"
                                              : "YAML: no document");
                }
                yaml_event_delete(&ev);
                if (r < 0)
                        goto out;
        }
        *ret = TAKE_PTR(root);
        r = 0;
out:
        yaml_parser_delete(&c.parser);
        return r;
}
