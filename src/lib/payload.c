/* The payload types as one table: what each type's validator, reader,
 * renderer, target and delivery profile are, and the public calls that
 * dispatch through it (validate, load a payload file for handoffctl submit,
 * render, target, deliver). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "deliver.h"
#include "files.h"
#include "handoff.h"
#include "payload.h"
#include "payload_a2a.h"
#include "payload_act.h"
#include "payload_baton.h"
#include "payload_str.h"
#include "payload_uah.h"
#include "payload_vox.h"
#include "render.h"
#include "util.h"

/* ---- the types' hooks, where a type's own call does not fit ----------- */

/* baton.c calls it too, with the payload alone. */
static int baton_check(const json_t *p, const json_t *envelope,
                       const char *const *roles, hd_verdict *v)
{
        return payload_baton_validate(p, v);
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

/* YAML, unless it is plainly a JSON object. */
static int uah_load(const char *buf, size_t len, json_t **ret, hd_verdict *v)
{
        if (looks_like_json(buf, len))
                return hd_parse(buf, len, NULL, ret, v);
        return payload_uah_yaml(buf, len, ret, v);
}

static int act_load(const char *buf, size_t len, json_t **ret, hd_verdict *v)
{
        /* The text travels as a JSON string: it must be UTF-8. */
        *ret = json_stringn(buf, len);
        if (!*ret)
                return verdict(v, HD_R_PAYLOAD_INVALID,
                               "act/1.0: text is not UTF-8 or holds a NUL byte");
        return 0;
}

static const char *vox_target(const json_t *p)
{
        const char *s = json_string_value(json_object_get(p, "target_agent"));

        return s && *s ? s : NULL;
}

static const char *act_target(const json_t *p)
{
        /* The ACT target lives inside text; keep a per-thread copy so the
         * caller gets a string like for vox (valid until the next call). */
        static __thread char target[PAYLOAD_MAX_NAME];
        struct act_doc d = {};
        const char *s;

        if (!json_is_string(p))
                return NULL;
        if (act_parse(json_string_value(p), json_string_length(p), &d,
                      NULL) < 0)
                return NULL;
        s = NULL;
        if (d.f[ACT_TO_AGENT] && *d.f[ACT_TO_AGENT] &&
            strlen(d.f[ACT_TO_AGENT]) < sizeof(target)) {
                strcpy(target, d.f[ACT_TO_AGENT]);
                s = target;
        }
        act_doc_done(&d);
        return s;
}

/* ---- the table -------------------------------------------------------- */

static const struct payload_type payload_types[] = {
        {
                .name = PT_VOX,
                .max_file = HD_DEFAULT_MAX_SIZE,
                .validate = payload_vox_validate,
                .render = render_vox,
                .target = vox_target,
                .profile = "vox",
                .deliver = deliver_vox,
        },
        {
                .name = PT_BATON,
                .session_store = true,
                .max_file = HD_DEFAULT_MAX_SIZE,
                .validate = baton_check,
                .render = render_baton,
        },
        {
                .name = PT_UAH,
                .max_file = HD_DEFAULT_MAX_SIZE,
                .validate = payload_uah_validate,
                .load = uah_load,
                .render = render_uah,
        },
        {
                .name = PT_ACT,
                .text = true,
                .max_file = ACT_MAX_SIZE,
                .validate = payload_act_validate,
                .load = act_load,
                .render = render_act,
                .target = act_target,
                .profile = "act",
                .deliver = deliver_act,
        },
        {
                /* written by handoff-hubd from an A2A SendMessage */
                .name = PT_A2A,
                .max_file = HD_DEFAULT_MAX_SIZE,
                .validate = payload_a2a_validate,
                .render = render_a2a,
        },
};

const struct payload_type *payload_type_find(const char *name)
{
        if (!name)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(payload_types); i++)
                if (!strcmp(payload_types[i].name, name))
                        return &payload_types[i];
        return NULL;
}

static int payload_unsupported(const char *type, hd_verdict *v)
{
        char q[72];

        return verdict(v, HD_R_PAYLOAD_INVALID,
                       "payload_type '%s' is not supported",
                       payload_quote(type, q));
}

/* ---- dispatch --------------------------------------------------------- */

int hd_payload_validate(const json_t *doc, const hd_payload_opts *o,
                        hd_verdict *v)
{
        const json_t *t = json_object_get(doc, "payload_type");
        const json_t *p = json_object_get(doc, "payload");
        const struct payload_type *pt;
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
        pt = payload_type_find(json_string_value(t));
        if (!pt)
                return payload_unsupported(json_string_value(t), v);
        r = pt->validate(p, doc, o ? o->roles : NULL, v);
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

int hd_payload_load(const char *type, const char *path, json_t **ret,
                    hd_verdict *v)
{
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_t *p = NULL;
        const struct payload_type *t;
        size_t len = 0;
        int r;

        verdict_clear(v);
        if (!type || !path)
                return -EINVAL;
        t = payload_type_find(type);
        if (!t)
                return payload_unsupported(type, v);
        r = payload_read(path, t->max_file, &buf, &len, v);
        if (r < 0)
                return r;
        if (t->load)
                r = t->load(buf, len, &p, v);
        else
                r = hd_parse(buf, len, NULL, &p, v);
        if (r < 0)
                return r;
        r = t->validate(p, NULL, NULL, v);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

const char *hd_payload_target(const char *type, const json_t *payload)
{
        const struct payload_type *t = payload_type_find(type);

        if (!t || !t->target || !payload)
                return NULL;
        return t->target(payload);
}

int hd_payload_render(const char *type, const json_t *payload, char **ret_md)
{
        const struct payload_type *t;

        if (!type || !payload || !ret_md)
                return -EINVAL;
        t = payload_type_find(type);
        if (!t)
                return -EOPNOTSUPP;
        if (t->text ? !json_is_string(payload) : !json_is_object(payload))
                return -EINVAL;
        return t->render(payload, ret_md);
}

int hd_deliver_profile(int state_dirfd, const json_t *doc,
                       const hd_deliver_opts *o, int64_t now_usec)
{
        const char *type = json_string_value(json_object_get(doc, "payload_type"));
        const json_t *p = json_object_get(doc, "payload");
        const struct payload_type *t;
        bool known = false;

        if (!o || !o->profile || !strcmp(o->profile, "bootstrap"))
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(payload_types); i++)
                if (payload_types[i].profile &&
                    !strcmp(payload_types[i].profile, o->profile))
                        known = true;
        if (!known)
                return -EINVAL;
        /* A handoff without a payload of the profile's type has nothing
         * for it: the bootstrap alone carries it. */
        t = payload_type_find(type);
        if (!t || !p || !t->profile || strcmp(t->profile, o->profile))
                return 0;
        return t->deliver(state_dirfd, p, o, now_usec);
}
