/* floor: the reference program of `make bench`.
 *
 * A plain loop, no event loop, that does the work one handoff needs and
 * nothing else, with the same library calls as handoffd: open, fstat and
 * read (hd_read_at), parse (canon_src_parse), MAC over the canonical bytes
 * (the file's own when they are), fields, payload and freshness
 * (canon_src_verify), the target, the replay check
 * (two stats), the claim (renameat2 NOREPLACE into claimed/), the bootstrap
 * (hd_bootstrap_build, hd_canon_dump), its write under a hidden name and
 * its rename into the agent's handoffs/.  With --fsync, per item, the
 * syncs that make the claim durable before the bootstrap exists (claimed/
 * and handoff/) and the bootstrap durable before it is visible (the file,
 * then handoffs/ after the rename).
 *
 * What it leaves out is what handoffd adds on top: the event loop, locks
 * between daemons, the replay memory written when an item leaves claimed/,
 * the delivered marker and hidden-then-published bootstrap, rejections with
 * their reason files, logs, counters, control socket, timers.  So
 * handoffd/floor in the bench reads "what the daemon's machinery costs".
 *
 *   floor --watch SPOOL --key FILE --agent NAME --state DIR [--fsync]
 *         raw inotify on SPOOL/handoff/ (IN_MOVED_TO), after a first scan;
 *         READY=1 on $NOTIFY_SOCKET once watching; stops on SIGTERM/SIGINT
 *   floor --batch SPOOL ...   every file already in SPOOL/handoff/, then exit
 *
 * On exit one line on stdout: FLOOR {json} with its counters, CPU time and
 * memory (bench/bench.py reads it).  Exit 0, or 1 on a setup or I/O error. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "canon_src.h"
#include "files.h"
#include "handoff.h"
#include "notify.h"
#include "util.h"

struct floor {
        int handoff_fd, claimed_fd, ids_fd, handoffs_fd;
        const char *agent;
        hd_key *key;
        bool fsync;
        size_t max_size;
        /* counters, printed at exit */
        uint64_t claimed, left, refused, duplicate, gone, errors, events, overflows;
};

static const hd_key *floor_key_lookup(void *userdata, const char *kid, const char *from_agent)
{
        (void)kid;          /* one key for everything */
        (void)from_agent;
        return userdata;
}

/* A file the floor does not claim stays where it is: the floor has no
 * rejected/ (the bench drops only valid items); it says why, a few times. */
static int floor_refuse(struct floor *f, const char *name, const hd_verdict *v)
{
        if (f->refused++ < 5)
                fprintf(stderr, "floor: not claimed: %s: %s: %s\n", name,
                        hd_reason_name(v->reason), v->detail);
        return 0;
}

static int floor_write_bootstrap(struct floor *f, const char *bname, const char *buf, size_t len)
{
        char tmp[NAME_MAX + 1];
        _cleanup_close_ int fd = -1;
        size_t off = 0;
        int r;

        r = xsnprintf(tmp, sizeof(tmp), ".%s.tmp", bname);
        if (r < 0)
                return r;
        fd = openat(f->handoffs_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
        if (fd < 0)
                return -errno;
        while (off < len) {
                ssize_t n = write(fd, buf + off, len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                off += (size_t)n;
        }
        if (f->fsync && fsync(fd) < 0)
                return -errno;
        if (close(TAKE_FD(fd)) < 0)
                return -errno;
        if (renameat(f->handoffs_fd, tmp, f->handoffs_fd, bname) < 0)
                return -errno;
        return f->fsync ? fsync_dir(f->handoffs_fd) : 0;
}

/* One name in handoff/: 0 whatever became of it, -errno on an I/O error. */
static int floor_one(struct floor *f, const char *name)
{
        _cleanup_free_ char *buf = NULL, *out = NULL;
        _cleanup_json_ json_t *doc = NULL, *boot = NULL;
        char claimed[NAME_MAX + 1], bname[NAME_MAX + 1];
        const char *to, *id;
        hd_verdict v;
        size_t len, olen;
        struct stat st;
        int64_t now;
        int r;

        if (name[0] == '.' || !hd_name_safe(name))
                return 0;
        r = hd_read_at(f->handoff_fd, name, f->max_size, &buf, &len, &v);
        if (r == -ENOENT) {
                f->gone++;
                return 0;
        }
        if (r == -EBADMSG)
                return floor_refuse(f, name, &v);
        if (r < 0)
                return r;
        hd_limits lim = { .max_size = f->max_size, .max_depth = HD_DEFAULT_MAX_DEPTH };
        struct canon_src src;
        r = canon_src_parse(buf, len, &lim, &doc, &src, &v);
        if (r == -EBADMSG)
                return floor_refuse(f, name, &v);
        if (r < 0)
                return r;

        now = hd_now_usec();
        hd_policy pol = { .max_clock_skew_s = HD_DEFAULT_MAX_CLOCK_SKEW,
                          .max_window_s = HD_DEFAULT_MAX_WINDOW };
        hd_payload_opts po = { .roles = NULL };
        r = canon_src_verify(doc, &src, floor_key_lookup, f->key, &pol, &po, now, &v);
        if (r == -EBADMSG)
                return floor_refuse(f, name, &v);
        if (r < 0)
                return r;
        to = json_string_value(json_object_get(doc, "to_agent"));
        if (!to || strcmp(to, f->agent)) {
                f->left++;
                return 0;
        }

        /* Replay: handoffd's two places, ids/ and claimed/. */
        id = json_string_value(json_object_get(doc, "handoff_id"));
        r = xsnprintf(claimed, sizeof(claimed), "%s.json", id);
        if (r < 0)
                return r;
        if (fstatat(f->ids_fd, id, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
            fstatat(f->claimed_fd, claimed, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                f->duplicate++;
                return 0;
        }
        r = move_noreplace(f->handoff_fd, name, f->claimed_fd, claimed);
        if (r == -ENOENT) {
                f->gone++;
                return 0;
        }
        if (r == -EEXIST) {
                f->duplicate++;
                return 0;
        }
        if (r < 0)
                return r;
        /* The claim is on disk before any bootstrap exists. */
        if (f->fsync) {
                r = fsync_dir(f->claimed_fd);
                if (r == 0)
                        r = fsync_dir(f->handoff_fd);
                if (r < 0)
                        return r;
        }

        r = hd_bootstrap_build(doc, now, &boot);
        if (r < 0)
                return r;
        r = hd_canon_dump(boot, NULL, &out, &olen);
        if (r < 0)
                return r;
        r = hd_bootstrap_name(id, bname, sizeof(bname));
        if (r < 0)
                return r;
        r = floor_write_bootstrap(f, bname, out, olen);
        if (r < 0)
                return r;
        f->claimed++;
        return 0;
}

static int floor_name(struct floor *f, const char *name)
{
        int r = floor_one(f, name);

        if (r < 0 && f->errors++ < 5)
                fprintf(stderr, "floor: %s: %s\n", name, strerror(-r));
        return r;
}

/* Every name in handoff/, as it comes from readdir: nothing is kept. */
static int floor_scan(struct floor *f)
{
        struct dirent *de;
        DIR *d;

        d = opendir_at(f->handoff_fd);
        if (!d)
                return -errno;
        while ((de = readdir(d)))
                if (de->d_type == DT_REG || de->d_type == DT_UNKNOWN)
                        (void)floor_name(f, de->d_name);   /* counted, go on */
        closedir(d);
        return 0;
}

static int floor_watch(struct floor *f, const char *handoff_path)
{
        /* inotify events are aligned to the struct, names follow. */
        char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
        _cleanup_close_ int ifd = -1, sfd = -1;
        sigset_t mask;
        int r;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return -errno;
        sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        ifd = inotify_init1(IN_CLOEXEC);
        if (sfd < 0 || ifd < 0)
                return -errno;
        if (inotify_add_watch(ifd, handoff_path, IN_MOVED_TO | IN_ONLYDIR) < 0)
                return -errno;
        /* Watch first, then scan: nothing dropped before falls between. */
        r = floor_scan(f);
        if (r < 0)
                return r;
        (void)notify_send("READY=1");   /* no NOTIFY_SOCKET: nothing to tell */

        for (;;) {
                struct pollfd p[2] = { { .fd = ifd, .events = POLLIN },
                                       { .fd = sfd, .events = POLLIN } };
                ssize_t n;

                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (p[1].revents)
                        return 0;
                n = read(ifd, buf, sizeof(buf));
                if (n < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        return -errno;
                }
                for (char *q = buf; q < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *)q;

                        q += sizeof(*ev) + ev->len;
                        f->events++;
                        if (ev->mask & IN_Q_OVERFLOW) {
                                f->overflows++;
                                r = floor_scan(f);
                                if (r < 0)
                                        return r;
                        } else if (ev->len > 0 && (ev->mask & IN_MOVED_TO)) {
                                (void)floor_name(f, ev->name);  /* counted, go on */
                        }
                }
        }
}

static int floor_open_dir(int dirfd, const char *path, int *ret)
{
        int fd;

        if (mkdirat(dirfd, path, 0750) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret = fd;
        return 0;
}

static void floor_report(const struct floor *f, const char *mode, double elapsed)
{
        long hwm = -1, rss = -1;
        struct rusage ru;
        char line[256];
        FILE *st;

        st = fopen("/proc/self/status", "re");
        if (st) {
                while (fgets(line, sizeof(line), st)) {
                        if (!strncmp(line, "VmHWM:", 6))
                                hwm = strtol(line + 6, NULL, 10);
                        else if (!strncmp(line, "VmRSS:", 6))
                                rss = strtol(line + 6, NULL, 10);
                }
                fclose(st);
        }
        if (getrusage(RUSAGE_SELF, &ru) < 0)
                memset(&ru, 0, sizeof(ru));
        printf("FLOOR {\"mode\":\"%s\",\"fsync\":%s,\"claimed\":%ju,\"left\":%ju,"
               "\"refused\":%ju,\"duplicate\":%ju,\"gone\":%ju,\"errors\":%ju,"
               "\"events\":%ju,\"overflows\":%ju,\"elapsed_s\":%.6f,"
               "\"utime_s\":%.6f,\"stime_s\":%.6f,\"vmhwm_kb\":%ld,\"vmrss_kb\":%ld}\n",
               mode, f->fsync ? "true" : "false", (uintmax_t)f->claimed, (uintmax_t)f->left,
               (uintmax_t)f->refused, (uintmax_t)f->duplicate, (uintmax_t)f->gone,
               (uintmax_t)f->errors, (uintmax_t)f->events, (uintmax_t)f->overflows, elapsed,
               ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
               ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6, hwm, rss);
        fflush(stdout);
}

static double floor_now(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void floor_usage(FILE *out)
{
        fprintf(out,
                "usage: floor (--watch SPOOL | --batch SPOOL) --key FILE --agent NAME --state DIR\n"
                "             [--fsync] [--max-size BYTES]\n"
                "The reference loop of `make bench` (see bench/README.md).\n");
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "watch", required_argument, NULL, 'w' },
                { "batch", required_argument, NULL, 'b' },
                { "key", required_argument, NULL, 'k' },
                { "agent", required_argument, NULL, 'a' },
                { "state", required_argument, NULL, 's' },
                { "fsync", no_argument, NULL, 'f' },
                { "max-size", required_argument, NULL, 'm' },
                { "help", no_argument, NULL, 'h' },
                { NULL, 0, NULL, 0 }
        };
        struct floor f = { .handoff_fd = -1, .claimed_fd = -1, .ids_fd = -1,
                           .handoffs_fd = -1, .max_size = HD_DEFAULT_MAX_SIZE };
        const char *spool = NULL, *mode = NULL, *key = NULL, *state = NULL;
        char err[256], path[PATH_MAX];
        _cleanup_close_ int spool_fd = -1, state_fd = -1;
        int64_t v;
        double t0 = floor_now();
        int c, r;

        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case 'w':
                case 'b':
                        if (mode) {
                                floor_usage(stderr);
                                return 2;
                        }
                        mode = c == 'w' ? "watch" : "batch";
                        spool = optarg;
                        break;
                case 'k':
                        key = optarg;
                        break;
                case 'a':
                        f.agent = optarg;
                        break;
                case 's':
                        state = optarg;
                        break;
                case 'f':
                        f.fsync = true;
                        break;
                case 'm':
                        if (parse_int64(optarg, 1, INT32_MAX, &v) < 0) {
                                fprintf(stderr, "floor: bad --max-size '%s'\n", optarg);
                                return 2;
                        }
                        f.max_size = (size_t)v;
                        break;
                case 'h':
                        floor_usage(stdout);
                        return 0;
                default:
                        floor_usage(stderr);
                        return 2;
                }
        }
        if (!mode || !key || !f.agent || !state || optind != argc) {
                floor_usage(stderr);
                return 2;
        }

        r = hd_key_load(key, &f.key, err, sizeof(err));
        if (r < 0) {
                fprintf(stderr, "floor: %s\n", err);
                return 1;
        }
        r = floor_open_dir(AT_FDCWD, spool, &spool_fd);
        if (r == 0)
                r = floor_open_dir(spool_fd, "handoff", &f.handoff_fd);
        if (r == 0)
                r = floor_open_dir(spool_fd, "claimed", &f.claimed_fd);
        if (r == 0)
                r = floor_open_dir(spool_fd, "ids", &f.ids_fd);
        if (r == 0)
                r = floor_open_dir(AT_FDCWD, state, &state_fd);
        if (r == 0)
                r = floor_open_dir(state_fd, "handoffs", &f.handoffs_fd);
        if (r < 0) {
                fprintf(stderr, "floor: cannot open the spool or state dir: %s\n", strerror(-r));
                goto out;
        }

        if (!strcmp(mode, "batch")) {
                r = floor_scan(&f);
        } else {
                r = xsnprintf(path, sizeof(path), "%s/handoff", spool);
                if (r >= 0)
                        r = floor_watch(&f, path);
        }
        if (r < 0)
                fprintf(stderr, "floor: %s: %s\n", mode, strerror(-r));
        floor_report(&f, mode, floor_now() - t0);
out:
        closep(&f.handoff_fd);
        closep(&f.claimed_fd);
        closep(&f.ids_fd);
        closep(&f.handoffs_fd);
        hd_key_free(f.key);
        return r < 0 || f.errors ? 1 : 0;
}
