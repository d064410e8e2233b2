/* Cancel requests and their answers; see cancelreq.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cancelreq.h"
#include "files.h"
#include "util.h"

static const char *const answer_names[_CA_MAX] = {
        [CA_CANCELED] = "canceled",
        [CA_NOT_CANCELABLE] = "not_cancelable",
        [CA_REFUSED] = "refused",
        [CA_UNKNOWN] = "unknown",
        [CA_BUSY] = "busy",
};

const char *cancelreq_answer_name(enum cancelreq_answer a)
{
        return (unsigned)a < _CA_MAX ? answer_names[a] : NULL;
}

int cancelreq_build(const char *id, const char *from, const hd_key *k, int64_t now_usec,
                    int64_t ttl_s, char **ret_buf, size_t *ret_len)
{
        _cleanup_json_ json_t *doc = NULL;
        char init[HD_TIME_MAX], exp[HD_TIME_MAX];
        int r;

        if (!hd_id_valid(id) || !hd_agent_valid(from) || !k || ttl_s <= 0 ||
            hd_key_kind_of(k) == HD_KEY_ED25519_PUBLIC)
                return -EINVAL;
        if (hd_time_format(now_usec, init, sizeof(init)) < 0 ||
            hd_time_format(now_usec + ttl_s * 1000000LL, exp, sizeof(exp)) < 0)
                return -EINVAL;
        doc = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s}", "protocol_version", 1,
                        "type", CANCELREQ_TYPE, "handoff_id", id, "from_agent", from,
                        "initiated_at", init, "expires_at", exp);
        if (!doc)
                return -ENOMEM;
        r = hd_sign(doc, k);
        if (r < 0)
                return r;
        return hd_canon_dump(doc, NULL, ret_buf, ret_len);
}

void cancelreq_fields(const json_t *doc, struct cancelreq_fields *ret)
{
        ret->id = json_string_value(json_object_get(doc, "handoff_id"));
        ret->from = json_string_value(json_object_get(doc, "from_agent"));
        ret->kid = json_string_value(json_object_get(doc, "kid"));
        ret->expires_at = json_string_value(json_object_get(doc, "expires_at"));
}

int cancelreq_check(const json_t *doc, hd_key_lookup_fn lookup, void *userdata,
                    const hd_policy *p, int64_t now_usec, hd_verdict *v)
{
        const json_t *pv = json_object_get(doc, "protocol_version");
        const char *type = json_string_value(json_object_get(doc, "type"));
        const char *id = json_string_value(json_object_get(doc, "handoff_id"));
        const char *from = json_string_value(json_object_get(doc, "from_agent"));
        int r;

        verdict_clear(v);
        if (!json_is_object(doc))
                return verdict(v, HD_R_BAD_TYPE, "a cancel request is a JSON object");
        if (!json_is_integer(pv) || json_integer_value(pv) != 1)
                return verdict(v, HD_R_BAD_VERSION, "protocol_version is not the integer 1");
        /* A handoff names its recipient; a request never does. */
        if (!type || strcmp(type, CANCELREQ_TYPE) || json_object_get(doc, "to_agent"))
                return verdict(v, HD_R_BAD_TYPE, "not a cancel request (type %s, no to_agent)",
                               CANCELREQ_TYPE);
        if (!id || !from)
                return verdict(v, HD_R_MISSING_FIELD, "handoff_id and from_agent are required");
        if (!hd_id_valid(id))
                return verdict(v, HD_R_BAD_ID, "handoff_id is not one");
        if (!hd_agent_valid(from))
                return verdict(v, HD_R_BAD_AGENT, "from_agent is not an agent name");
        r = hd_auth_check(doc, lookup, userdata, v);
        if (r < 0)
                return r;
        return hd_check_fresh(doc, p, now_usec, v);
}

int cancelreq_name(const char *id, char *buf, size_t n)
{
        char rnd[17];
        int r;

        if (!hd_id_valid(id))
                return -EINVAL;
        r = random_hex(rnd, 8);
        if (r < 0)
                return r;
        return xsnprintf(buf, n, "%s.%s", id, rnd) < 0 ? -ENAMETOOLONG : 0;
}

int cancelreq_answer_file(const char *name, enum cancelreq_answer a, char *buf, size_t n)
{
        const char *w = cancelreq_answer_name(a);

        if (!w)
                return -EINVAL;
        return xsnprintf(buf, n, ".%s.%s", w, name) < 0 ? -ENAMETOOLONG : 0;
}

bool cancelreq_is_answer(const char *name, enum cancelreq_answer *ret)
{
        if (name[0] != '.')
                return false;
        for (int a = CA_NONE + 1; a < _CA_MAX; a++) {
                size_t l = strlen(answer_names[a]);
                if (!strncmp(name + 1, answer_names[a], l) && name[1 + l] == '.' &&
                    name[2 + l] != '\0') {
                        if (ret)
                                *ret = (enum cancelreq_answer)a;
                        return true;
                }
        }
        return false;
}

int cancelreq_drop(int tmp_fd, const char *tmp_name, int cancel_fd, const char *name,
                   const char *buf, size_t len, bool sync, struct cancelreq_ticket *ret)
{
        struct cancelreq_ticket t = {};
        struct stat st;
        int r;

        if (xsnprintf(t.name, sizeof(t.name), "%s", name) < 0)
                return -ENAMETOOLONG;
        r = write_atomic(tmp_fd, tmp_name, buf, len, 0640, sync ? WRITE_SYNC_FILE : 0);
        if (r < 0)
                return r;
        /* tmp/ is sticky: once ours, nobody else can swap the file
         * under this name, so this is the inode the daemon renames. */
        if (fstatat(tmp_fd, tmp_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                r = -errno;
                goto fail;
        }
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
                r = -EPERM;
                goto fail;
        }
        t.dev = st.st_dev;
        t.ino = st.st_ino;
        t.uid = st.st_uid;
        r = move_noreplace(tmp_fd, tmp_name, cancel_fd, name);
        if (r < 0)
                goto fail;
        if (sync) {
                r = fsync_dir(cancel_fd);
                if (r == 0)
                        r = fsync_dir(tmp_fd);
        }
        if (r == 0)
                *ret = t;
        return r;
fail:
        unlinkat(tmp_fd, tmp_name, 0);
        return r;
}

/* Is cancel/an the daemon's answer to t: t's inode, its owner's, with
 * one link, and the request's own name gone (a hard link would leave
 * both)?  Anything else is a file someone dropped there. */
static bool answer_is_ours(int cancel_fd, const char *an, const struct cancelreq_ticket *t)
{
        struct stat st;

        if (fstatat(cancel_fd, an, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return false;
        if (!S_ISREG(st.st_mode) || st.st_dev != t->dev || st.st_ino != t->ino ||
            st.st_uid != t->uid || st.st_nlink != 1)
                return false;
        return fstatat(cancel_fd, t->name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
}

/* The answer to t, if there is one: taken (removed) into *ret. */
static bool answer_take(int cancel_fd, const struct cancelreq_ticket *t,
                        enum cancelreq_answer *ret)
{
        char an[NAME_MAX + 1];

        for (int a = CA_NONE + 1; a < _CA_MAX; a++) {
                if (cancelreq_answer_file(t->name, (enum cancelreq_answer)a, an, sizeof(an)) < 0 ||
                    !answer_is_ours(cancel_fd, an, t))
                        continue;
                /* Ours to remove: in a sticky directory nobody else can
                 * have put another file under this name since. */
                unlinkat(cancel_fd, an, 0);
                *ret = (enum cancelreq_answer)a;
                return true;
        }
        return false;
}

int cancelreq_await(int cancel_fd, const struct cancelreq_ticket *t, int64_t timeout_ms,
                    enum cancelreq_answer *ret)
{
        int64_t until;
        _cleanup_close_ int ifd = -1;
        char path[64], buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

        *ret = CA_NONE;
        if (!t || !t->name[0] || timeout_ms < 0)
                return -EINVAL;
        if (timeout_ms > CANCELREQ_WAIT_MAX_MS)
                timeout_ms = CANCELREQ_WAIT_MAX_MS;
        until = mono_usec() + timeout_ms * 1000;
        /* Watch first, then look: an answer in between is not missed. */
        ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        snprintf(path, sizeof(path), "/proc/self/fd/%d", cancel_fd);
        if (ifd >= 0 && inotify_add_watch(ifd, path, IN_MOVED_TO | IN_ONLYDIR) < 0)
                closep(&ifd);
        for (;;) {
                int64_t left = until - mono_usec();
                struct pollfd pfd = { .fd = ifd, .events = POLLIN };

                if (answer_take(cancel_fd, t, ret))
                        return 0;
                if (left <= 0)
                        return 0;
                if (ifd < 0) {
                        /* No inotify to be had (its limits): looked at
                         * every 10 ms instead. */
                        struct timespec tick = { .tv_nsec = 10 * 1000 * 1000 };
                        nanosleep(&tick, NULL);
                        continue;
                }
                /* a day in ms fits an int; rounded up, never 0 early */
                int n = poll(&pfd, 1, (int)((left + 999) / 1000));
                if (n < 0 && errno != EINTR)
                        return -errno;
                while (n > 0 && read(ifd, buf, sizeof(buf)) > 0)
                        ;
        }
}
