/* Making and publishing a handoff; see submit.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "agent.h"
#include "submit.h"
#include "util.h"

#define SUBMIT_FILE_MODE 0640
#define SUBMIT_OUTPUT_MODE 0600

_printf_(3, 4) static int submit_fail(struct submit_err *e, int code,
                                      const char *fmt, ...)
{
        va_list ap;

        e->code = code;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
        va_end(ap);
        return code;
}

static int submit_refuse(struct submit_err *e, const hd_verdict *v)
{
        return submit_fail(e, AG_NEGATIVE, "%s: %s",
                           hd_reason_name(v->reason), v->detail);
}

int submit_key_check(const hd_key *key, const char *path, const char *kid,
                     struct submit_err *e)
{
        if (hd_key_kind_of(key) == HD_KEY_ED25519_PUBLIC)
                return submit_fail(e, AG_USAGE,
                                   "%s is a public key: sign with the secret key", path);
        if (kid && hd_key_kid(key) && strcmp(kid, hd_key_kid(key)))
                return submit_fail(e, AG_USAGE, "--kid '%s': the key in %s has kid '%s'",
                                   kid, path, hd_key_kid(key));
        return 0;
}

static int submit_doc(const struct submit_req *rq, json_t **ret,
                      struct submit_err *e)
{
        _cleanup_json_ json_t *doc = NULL, *empty = NULL;
        char id[SUBMIT_ID_MAX], rnd[17], ini[HD_TIME_MAX], exp[HD_TIME_MAX];
        const json_t *transcript = rq->transcript;
        int64_t now = hd_now_usec();
        int r;

        /* before they go into the default handoff_id: a bad name is a
         * bad_agent, not a bad_id */
        if (!rq->id) {
                if (!hd_agent_valid(rq->from))
                        return submit_fail(e, AG_NEGATIVE,
                                           "bad_agent: from_agent \"%.64s\" is not an agent name",
                                           rq->from);
                if (!hd_agent_valid(rq->to))
                        return submit_fail(e, AG_NEGATIVE,
                                           "bad_agent: to_agent \"%.64s\" is not an agent name",
                                           rq->to);
        }
        r = hd_time_format(now, ini, sizeof(ini));
        if (r >= 0)
                r = hd_time_format(now + rq->ttl * 1000000, exp, sizeof(exp));
        if (r < 0)
                return submit_fail(e, AG_ERROR, "time: %s", strerror(-r));
        if (rq->id) {
                r = xsnprintf(id, sizeof(id), "%s", rq->id);
        } else {
                r = random_hex(rnd, 8);
                if (r < 0)
                        return submit_fail(e, AG_ERROR,
                                           "no randomness: %s", strerror(-r));
                /* as the real writer: {int(at.timestamp())}-{from}-{to}-{hex} */
                r = xsnprintf(id, sizeof(id), "%" PRId64 "-%s-%s-%s",
                              now / 1000000, rq->from, rq->to, rnd);
        }
        if (r < 0)
                return submit_fail(e, AG_NEGATIVE,
                                   "bad_id: handoff_id too long");
        if (!transcript)
                transcript = empty = json_array();

        doc = json_object();
        if (!doc || !transcript)
                return submit_fail(e, AG_ERROR, "out of memory");
        r = 0;
        r |= json_object_set_new(doc, "protocol_version",
                                 json_integer(HD_PROTOCOL_VERSION));
        r |= json_object_set_new(doc, "handoff_id", json_string(id));
        if (rq->caller_hash)
                r |= json_object_set_new(doc, "caller_hash",
                                         json_string(rq->caller_hash));
        r |= json_object_set_new(doc, "from_agent", json_string(rq->from));
        r |= json_object_set_new(doc, "to_agent", json_string(rq->to));
        r |= json_object_set_new(doc, "reason", json_string(rq->reason));
        r |= json_object_set_new(doc, "initiated_at", json_string(ini));
        r |= json_object_set_new(doc, "expires_at", json_string(exp));
        r |= json_object_set(doc, "transcript", (json_t *)transcript);
        if (rq->context)
                r |= json_object_set_new(doc, "context_summary",
                                         json_string(rq->context));
        if (rq->kid)
                r |= json_object_set_new(doc, "kid", json_string(rq->kid));
        if (rq->payload) {
                r |= json_object_set_new(doc, "payload_type",
                                         json_string(rq->type));
                r |= json_object_set(doc, "payload", (json_t *)rq->payload);
        }
        /* json_string() of invalid UTF-8 is NULL and makes set_new fail */
        if (r != 0)
                return submit_fail(e, AG_NEGATIVE,
                                   "bad_type: a text argument is not valid UTF-8");
        *ret = TAKE_PTR(doc);
        return 0;
}

int submit_build(const struct submit_req *rq, const hd_key *key,
                 char **ret_buf, size_t *ret_len,
                 char ret_id[static SUBMIT_ID_MAX], struct submit_err *e)
{
        _cleanup_json_ json_t *doc = NULL;
        _cleanup_free_ char *buf = NULL;
        hd_verdict v;
        size_t len;
        int r;

        r = submit_doc(rq, &doc, e);
        if (r != 0)
                return r;
        verdict_clear(&v);
        r = hd_validate(doc, &v);
        if (r == -EBADMSG)
                return submit_refuse(e, &v);
        if (r < 0)
                return submit_fail(e, AG_ERROR, "validate: %s", strerror(-r));
        r = hd_payload_validate(doc, NULL, &v);
        if (r == -EBADMSG)
                return submit_refuse(e, &v);
        if (r < 0)
                return submit_fail(e, AG_ERROR, "payload: %s", strerror(-r));

        r = hd_sign(doc, key);
        if (r < 0)
                return submit_fail(e, AG_ERROR, "sign: %s", strerror(-r));
        /* the whole file in canonical form: what the real writer emits */
        r = hd_canon_dump(doc, NULL, &buf, &len);
        if (r == -ERANGE)
                return submit_fail(e, AG_NEGATIVE,
                                   "number_out_of_range: a number has no JSON form");
        if (r < 0)
                return submit_fail(e, AG_ERROR, "serialize: %s", strerror(-r));
        /* hd_validate() checked it: a valid id, shorter than the buffer */
        snprintf(ret_id, SUBMIT_ID_MAX, "%s",
                 json_string_value(json_object_get(doc, "handoff_id")));
        *ret_buf = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

/* A spool state directory: created with exactly mode when missing. */
static int submit_ensure_dir(int spoolfd, const char *spool, const char *name,
                             mode_t mode, struct submit_err *e)
{
        if (mkdirat(spoolfd, name, mode) == 0) {
                if (fchmodat(spoolfd, name, mode, 0) < 0)
                        return submit_fail(e, AG_ERROR, "%s/%s: %s",
                                           spool, name, strerror(errno));
        } else if (errno != EEXIST) {
                return submit_fail(e, AG_ERROR, "%s/%s: %s", spool,
                                   name, strerror(errno));
        }
        return 0;
}

static int submit_open_dirs(const char *spool, bool create, int *ret_tmp,
                            int *ret_ho, struct submit_err *e)
{
        static const struct {
                const char *name;
                mode_t mode;
        } dirs[] = {
                /* agents in the spool's group submit into tmp/ and handoff/;
                 * the modes of systemd/handoffd.tmpfiles */
                { "tmp", 03770 }, { "handoff", 03770 }, { "claimed", 0750 },
                { "archive", 0750 }, { "rejected", 0750 },
        };
        _cleanup_close_ int spoolfd = -1, tmpfd = -1, hofd = -1;
        int r;

        if (create) {
                r = mkdir_p_at(AT_FDCWD, spool, 0750);
                if (r < 0)
                        return submit_fail(e, AG_ERROR, "%s: %s", spool,
                                           strerror(-r));
        }
        spoolfd = open(spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (spoolfd < 0)
                return submit_fail(e, AG_ERROR, "%s: %s", spool,
                                   strerror(errno));
        if (create) {
                for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                        r = submit_ensure_dir(spoolfd, spool, dirs[i].name,
                                              dirs[i].mode, e);
                        if (r != 0)
                                return r;
                }
                r = fsync_dir(spoolfd);
                if (r < 0)
                        return submit_fail(e, AG_ERROR, "%s: fsync: %s",
                                           spool, strerror(-r));
        }
        tmpfd = openat(spoolfd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (tmpfd < 0)
                return submit_fail(e, AG_ERROR, "%s/tmp: %s", spool,
                                   strerror(errno));
        hofd = openat(spoolfd, "handoff", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (hofd < 0)
                return submit_fail(e, AG_ERROR, "%s/handoff: %s", spool,
                                   strerror(errno));
        *ret_tmp = TAKE_FD(tmpfd);
        *ret_ho = TAKE_FD(hofd);
        return 0;
}

int submit_publish(const char *spool, const char *id, const char *buf,
                   size_t len, bool create, struct submit_err *e)
{
        _cleanup_close_ int tmpfd = -1, hofd = -1;
        char name[NAME_MAX + 1];
        int r;

        if (xsnprintf(name, sizeof(name), "%s.json", id) < 0 ||
            !hd_name_safe(name))
                return submit_fail(e, AG_NEGATIVE,
                                   "bad_id: '%s' makes no safe file name", id);
        r = submit_open_dirs(spool, create, &tmpfd, &hofd, e);
        if (r != 0)
                return r;

        r = hd_write_atomic(tmpfd, name, buf, len, SUBMIT_FILE_MODE, true);
        if (r < 0)
                return submit_fail(e, AG_ERROR, "%s/tmp/%s: %s", spool,
                                   name, strerror(-r));
        r = move_noreplace(tmpfd, name, hofd, name);
        if (r < 0) {
                unlinkat(tmpfd, name, 0);
                if (r == -EEXIST)
                        return submit_fail(e, AG_NEGATIVE,
                                           "%s/handoff/%s: exists, not replacing",
                                           spool, name);
                return submit_fail(e, AG_ERROR, "%s/handoff/%s: %s",
                                   spool, name, strerror(-r));
        }
        /* the file is in handoff/ only once both directories say so */
        r = fsync_dir(hofd);
        if (r == 0)
                r = fsync_dir(tmpfd);
        if (r < 0)
                return submit_fail(e, AG_ERROR, "%s: fsync: %s", spool,
                                   strerror(-r));
        return 0;
}

int submit_write_file(const char *path, const char *buf, size_t len,
                      struct submit_err *e)
{
        _cleanup_free_ char *d = strdup(path), *b = strdup(path);
        _cleanup_close_ int dirfd = -1;
        const char *name;
        int r;

        if (!d || !b)
                return submit_fail(e, AG_ERROR, "out of memory");
        name = basename(b);
        if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, "/"))
                return submit_fail(e, AG_USAGE, "--output '%s': not a file name", path);
        dirfd = open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0)
                return submit_fail(e, errno == ENOENT || errno == ENOTDIR
                                   ? AG_USAGE : AG_ERROR,
                                   "--output %s: %s", path, strerror(errno));
        r = hd_write_atomic(dirfd, name, buf, len, SUBMIT_OUTPUT_MODE, true);
        if (r < 0)
                return submit_fail(e, AG_ERROR, "--output %s: %s", path, strerror(-r));
        return 0;
}
