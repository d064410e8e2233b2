/* Payload formats: dispatch by payload_type, the field checks the types
 * share, loading a payload file for handoffctl submit, and the target an
 * payload names. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff.h"
#include "payload.h"
#include "files.h"
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

/* A bare payload, no envelope; roles may be NULL. */
static int payload_check(const char *type, const json_t *p,
                         const json_t *envelope, const char *const *roles,
                         hd_verdict *v)
{
        char q[72];

        if (!strcmp(type, PT_VOX))
                return payload_vox_validate(p, envelope, v);
        if (!strcmp(type, PT_BATON))
                return payload_baton_validate(p, v);
        if (!strcmp(type, PT_UAH))
                return payload_uah_validate(p, roles, v);
        if (!strcmp(type, PT_ACT))
                return payload_act_validate(p, v);
        return verdict(v, HD_R_PAYLOAD_INVALID,
                       "payload_type '%s' is not supported",
                       payload_quote(type, q));
}

int hd_payload_validate(const json_t *doc, const hd_payload_opts *o,
                        hd_verdict *v)
{
        const json_t *t = json_object_get(doc, "payload_type");
        const json_t *p = json_object_get(doc, "payload");
        int r;

        verdict_clear(v);
        if (!t && !p)
                return 0;
        if (!t)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "payload without payload_type");
        if (!p)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "payload_type without payload");
        if (!json_is_string(t))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "payload_type is not a string");
        r = payload_check(json_string_value(t), p, doc, o ? o->roles : NULL, v);
        if (r >= 0)
                verdict_clear(v);
        return r;
}

/* Read path ("-" = stdin) whole, at most max bytes. */
static int payload_read(const char *path, size_t max, char **ret_buf,
                        size_t *ret_len, hd_verdict *v)
{
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        struct stat st;
        int r;

        if (!strcmp(path, "-")) {
                fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
        } else {
                fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
                if (fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode))
                        return verdict(v, HD_R_NOT_REGULAR,
                                       "not a regular file");
        }
        if (fd < 0)
                return -errno;
        r = read_all(fd, max, 0, &buf, &len);
        if (r == -EFBIG)
                return verdict(v, HD_R_TOO_LARGE, "larger than %zu bytes", max);
        if (r < 0)
                return r;
        *ret_buf = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

static bool looks_like_json(const char *buf, size_t len)
{
        for (size_t i = 0; i < len; i++) {
                if (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' ||
                    buf[i] == '\n')
                        continue;
                return buf[i] == '{';
        }
        return false;
}

int hd_payload_load(const char *type, const char *path, json_t **ret,
                    hd_verdict *v)
{
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_t *p = NULL;
        size_t len = 0;
        char q[72];
        int r;

        verdict_clear(v);
        if (!type || !path)
                return -EINVAL;
        if (strcmp(type, PT_VOX) && strcmp(type, PT_BATON) &&
            strcmp(type, PT_UAH) && strcmp(type, PT_ACT))
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "payload_type '%s' is not supported",
                               payload_quote(type, q));
        r = payload_read(path, !strcmp(type, PT_ACT) ? ACT_MAX_SIZE
                                                    : HD_DEFAULT_MAX_SIZE,
                         &buf, &len, v);
        if (r < 0)
                return r;
        if (!strcmp(type, PT_ACT)) {
                /* The text travels as a JSON string: it must be UTF-8. */
                p = json_stringn(buf, len);
                if (!p)
                        return verdict(v, HD_R_PAYLOAD_INVALID,
                                       "act/1.0: text is not UTF-8 or holds a NUL byte");
        } else if (!strcmp(type, PT_UAH) && !looks_like_json(buf, len)) {
                r = payload_uah_yaml(buf, len, &p, v);
        } else {
                r = hd_parse(buf, len, NULL, &p, v);
        }
        if (r < 0)
                return r;
        r = payload_check(type, p, NULL, NULL, v);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

const char *hd_payload_target(const char *type, const json_t *payload)
{
        /* The ACT target lives inside text; keep a per-thread copy so the
         * caller gets a string like for vox (valid until the next call). */
        static __thread char act_target[PAYLOAD_MAX_NAME];
        struct act_doc d = {};
        const char *s;

        if (!type || !payload)
                return NULL;
        if (!strcmp(type, PT_VOX)) {
                s = json_string_value(json_object_get(payload, "target_agent"));
                return s && *s ? s : NULL;
        }
        if (!strcmp(type, PT_ACT) && json_is_string(payload)) {
                if (act_parse(json_string_value(payload),
                              json_string_length(payload), &d, NULL) < 0)
                        return NULL;
                s = NULL;
                if (d.f[ACT_TO_AGENT] && *d.f[ACT_TO_AGENT] &&
                    strlen(d.f[ACT_TO_AGENT]) < sizeof(act_target)) {
                        strcpy(act_target, d.f[ACT_TO_AGENT]);
                        s = act_target;
                }
                act_doc_done(&d);
                return s;
        }
        return NULL;
}
