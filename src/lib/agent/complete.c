/* A result handed to the daemon and its word on it; see complete.h.  The
 * wait is inotify on the agent's handoffs/ (watch first, then write, then
 * look), for the result's name to go: the daemon removes it once it
 * recorded the result beside the archived item, or after it wrote the
 * refusal, .refused.<id>, which is then there to read. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "complete.h"
#include "agent.h"
#include "layout.h"
#include "util.h"

_printf_(3, 4) static int out_set(struct complete_out *out, int code, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(out->msg, sizeof(out->msg), fmt, ap);
        va_end(ap);
        utf8_fix(out->msg);
        return out->code = code;
}

const char *complete_status(const hd_result *res)
{
        return res->failed ? "failed" : res->input_required ? "input_required" : "completed";
}

static bool exists_at(int dirfd, const char *name)
{
        return faccessat(dirfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The daemon took the result: its refusal, if it wrote one. */
static int complete_word(int dirfd, const char *id, const char *fname, const char *status,
                         struct complete_out *out)
{
        hd_limits lim = { .max_size = 65536 };
        _cleanup_json_ json_t *o = NULL;
        hd_verdict v;
        int r;

        r = hd_load_at(dirfd, fname, &lim, &o, &v);
        if (r == -ENOENT)
                return out_set(out, AG_OK, "%s %s: handoffd recorded the result", id,
                               status);
        /* read once: the agent's directory is not a log */
        unlinkat(dirfd, fname, 0);
        if (r < 0)
                return out_set(out, AG_NEGATIVE, "%s: refused by handoffd (its reason "
                               "cannot be read: %s)", id, r == -EBADMSG ? v.detail : strerror(-r));
        return out_set(out, AG_NEGATIVE, "%s: refused by handoffd: %s: %s", id,
                       json_string_value(json_object_get(o, "reason")) ?: "?",
                       json_string_value(json_object_get(o, "detail")) ?: "");
}

int complete_write(const char *dir, int dirfd, const char *id, const char *agent,
                   const hd_result *res, const hd_key *k, bool do_fsync, struct complete_out *out)
{
        char rname[NAME_MAX + 1], fname[NAME_MAX + 1];
        hd_verdict v;
        int r;

        if (hd_result_name(id, rname, sizeof(rname)) < 0 ||
            layout_prefixed(LAYOUT_REFUSED, id, fname, sizeof(fname)) < 0)
                return out_set(out, AG_USAGE, "'%s' is not a handoff_id", id);
        /* An earlier try's refusal says nothing of this one. */
        if (unlinkat(dirfd, fname, 0) < 0 && errno != ENOENT)
                return out_set(out, AG_ERROR, "%s/%s: %s", dir, fname, strerror(errno));
        r = hd_complete(dirfd, id, agent, res, k, hd_now_usec(), do_fsync, &v);
        if (r == -EBADMSG)
                return out_set(out, AG_NEGATIVE, "%s: %s", hd_reason_name(v.reason), v.detail);
        if (r < 0)
                return out_set(out, AG_ERROR, "%s/%s: %s", dir, rname, strerror(-r));
        return out_set(out, AG_OK, "%s: result written to %s/%s for handoffd", id, dir, rname);
}

bool complete_taken(int dirfd, const char *id)
{
        char rname[NAME_MAX + 1];

        return hd_result_name(id, rname, sizeof(rname)) < 0 || !exists_at(dirfd, rname);
}

int complete_answer(const char *dir, int dirfd, const char *id, const char *status,
                    struct complete_out *out)
{
        char fname[NAME_MAX + 1], rname[NAME_MAX + 1];

        if (hd_result_name(id, rname, sizeof(rname)) < 0 ||
            layout_prefixed(LAYOUT_REFUSED, id, fname, sizeof(fname)) < 0)
                return out_set(out, AG_USAGE, "'%s' is not a handoff_id", id);
        if (!complete_taken(dirfd, id))
                return out_set(out, AG_STALE, "%s: result written to %s/%s; handoffd "
                               "has not taken it yet (is it running?): it will when it runs",
                               id, dir, rname);
        return complete_word(dirfd, id, fname, status, out);
}

int complete_run(const char *dir, int dirfd, const char *id, const char *agent,
                 const hd_result *res, const hd_key *k, bool do_fsync, int64_t timeout_ms,
                 struct complete_out *out)
{
        _cleanup_close_ int ifd = -1;
        struct timespec ts;
        int64_t deadline;
        int r;

        if (timeout_ms > 0) {
                ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
                if (ifd < 0 || inotify_add_watch(ifd, dir, IN_DELETE | IN_MOVED_FROM |
                                                 IN_DELETE_SELF | IN_ONLYDIR) < 0)
                        return out_set(out, AG_ERROR, "inotify on %s: %s", dir, strerror(errno));
        }
        r = complete_write(dir, dirfd, id, agent, res, k, do_fsync, out);
        if (r != AG_OK || timeout_ms == 0)
                return r;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        deadline = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + timeout_ms;
        while (!complete_taken(dirfd, id)) {
                char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
                struct pollfd p = { .fd = ifd, .events = POLLIN };
                int64_t left;

                clock_gettime(CLOCK_MONOTONIC, &ts);
                left = deadline - ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
                if (left <= 0)
                        break;
                r = poll(&p, 1, left > 60000 ? 60000 : (int)left);
                if (r < 0 && errno != EINTR)
                        return out_set(out, AG_ERROR, "poll: %s", strerror(errno));
                /* which name went does not matter: ours is looked at again */
                while (r > 0 && read(ifd, buf, sizeof(buf)) > 0)
                        ;
        }
        return complete_answer(dir, dirfd, id, complete_status(res), out);
}
