/* hubfloor: the least an HTTPS producer's way into the spool needs, the
 * reference for the hub rows of `make bench` (bench/bench_hub.py).
 *
 * libmicrohttpd as handoff-hubd runs it: the same TLS (GnuTLS, the same
 * certificate), a pool of 8 threads, keep-alive.  Each POST's body is
 * written to SPOOL/tmp/ under a temp name and renamed into SPOOL/handoff/
 * as ID.json, then answered 200 with a small JSON body.  Nothing else: no
 * token check, no parse, no verify, no record, no limits.  The name comes
 * from the query (?id=ID) so the bench can follow each item by its name.
 * With --fsync, what makes the item durable before the answer: the file,
 * then handoff/ after the rename.
 *
 *   hubfloor --listen PORT --cert FILE --key FILE --spool DIR [--fsync]
 *
 * READY=1 on $NOTIFY_SOCKET once listening; stops on SIGTERM or SIGINT and
 * prints one line, HUBFLOOR {json}, with its counters.  Exit 0, or 1 on a
 * setup error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>

#include <microhttpd.h>

#include "files.h"
#include "handoff.h"
#include "notify.h"
#include "util.h"

#define BODY_MAX (1024 * 1024)
#define THREADS 8

static int tmp_fd = -1, handoff_fd = -1;
static bool do_fsync;
static atomic_uint_fast64_t n_ok, n_bad;

struct body {
        char *buf;
        size_t len;
        bool too_big;
};

static char *slurp(const char *path)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        hd_verdict v;

        if (hd_read_at(AT_FDCWD, path, BODY_MAX, &buf, &len, &v) < 0)
                return NULL;
        return TAKE_PTR(buf);
}

/* The body into tmp/, renamed to handoff/ID.json.  0 or -errno. */
static int drop(const char *id, const struct body *b)
{
        char name[NAME_MAX + 1], tmp[NAME_MAX + 1];
        _cleanup_close_ int fd = -1;
        size_t off = 0;
        int r;

        r = xsnprintf(name, sizeof(name), "%s.json", id);
        if (r < 0 || !hd_name_safe(name))
                return -EINVAL;
        r = xsnprintf(tmp, sizeof(tmp), "hf.%s", name);
        if (r < 0)
                return r;
        fd = openat(tmp_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
        if (fd < 0)
                return -errno;
        while (off < b->len) {
                ssize_t n = write(fd, b->buf + off, b->len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                off += (size_t)n;
        }
        if (do_fsync && fsync(fd) < 0)
                return -errno;
        if (close(TAKE_FD(fd)) < 0)
                return -errno;
        r = move_noreplace(tmp_fd, tmp, handoff_fd, name);
        if (r < 0) {
                unlinkat(tmp_fd, tmp, 0);
                return r;
        }
        return do_fsync ? fsync_dir(handoff_fd) : 0;
}

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *text)
{
        struct MHD_Response *resp;
        enum MHD_Result ret;

        resp = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "application/json");
        ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls)
{
        struct body *b = *con_cls;
        const char *id;
        char text[256];
        int r;

        (void)cls;
        (void)url;
        (void)version;
        if (strcmp(method, "POST"))
                return answer(c, 405, "{\"error\":\"method\"}");
        if (!b) {
                b = calloc(1, sizeof(*b));
                if (!b)
                        return MHD_NO;
                *con_cls = b;
                return MHD_YES;
        }
        if (*upload_size) {
                if (b->len + *upload_size > BODY_MAX) {
                        b->too_big = true;
                } else {
                        char *p = realloc(b->buf, b->len + *upload_size);

                        if (!p)
                                return MHD_NO;
                        memcpy(p + b->len, upload, *upload_size);
                        b->buf = p;
                        b->len += *upload_size;
                }
                *upload_size = 0;
                return MHD_YES;
        }
        id = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "id");
        if (b->too_big || !id) {
                atomic_fetch_add(&n_bad, 1);
                return answer(c, b->too_big ? 413 : 400, "{\"error\":\"request\"}");
        }
        r = drop(id, b);
        if (r < 0) {
                atomic_fetch_add(&n_bad, 1);
                return answer(c, 503, "{\"error\":\"spool\"}");
        }
        atomic_fetch_add(&n_ok, 1);
        snprintf(text, sizeof(text), "{\"handoff_id\":\"%s\",\"status\":\"accepted\"}", id);
        return answer(c, 200, text);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct body *b = *con_cls;

        (void)cls;
        (void)c;
        (void)toe;
        if (b) {
                free(b->buf);
                free(b);
                *con_cls = NULL;
        }
}

static void usage(FILE *f)
{
        fprintf(f, "usage: hubfloor --listen PORT --cert FILE --key FILE --spool DIR [--fsync]\n");
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "listen", required_argument, NULL, 'l' },
                { "cert", required_argument, NULL, 'c' },
                { "key", required_argument, NULL, 'k' },
                { "spool", required_argument, NULL, 's' },
                { "fsync", no_argument, NULL, 'F' },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        const char *cert_path = NULL, *key_path = NULL, *spool = NULL;
        _cleanup_free_ char *cert = NULL, *key = NULL;
        struct sockaddr_in sa = { .sin_family = AF_INET };
        struct MHD_Daemon *d;
        unsigned port = 0;
        sigset_t mask;
        int o, sig;

        while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (o) {
                case 'l':
                        port = (unsigned)strtoul(optarg, NULL, 10);
                        break;
                case 'c':
                        cert_path = optarg;
                        break;
                case 'k':
                        key_path = optarg;
                        break;
                case 's':
                        spool = optarg;
                        break;
                case 'F':
                        do_fsync = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 1;
                }
        }
        if (!port || port > 65535 || !cert_path || !key_path || !spool) {
                usage(stderr);
                return 1;
        }
        cert = slurp(cert_path);
        key = slurp(key_path);
        if (!cert || !key) {
                fprintf(stderr, "hubfloor: cannot read %s\n", cert ? key_path : cert_path);
                return 1;
        }
        {
                _cleanup_close_ int sfd = open(spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

                if (sfd < 0) {
                        fprintf(stderr, "hubfloor: %s: %s\n", spool, strerror(errno));
                        return 1;
                }
                tmp_fd = openat(sfd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                handoff_fd = openat(sfd, "handoff", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (tmp_fd < 0 || handoff_fd < 0) {
                        fprintf(stderr, "hubfloor: %s/tmp or handoff: %s\n", spool, strerror(errno));
                        return 1;
                }
        }
        sa.sin_port = htons((uint16_t)port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        /* The signals are waited for below, not delivered to MHD's threads. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_TLS, (uint16_t)port, NULL, NULL,
                             on_request, NULL,
                             MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                             MHD_OPTION_THREAD_POOL_SIZE, (unsigned)THREADS,
                             MHD_OPTION_CONNECTION_TIMEOUT, 30u,
                             MHD_OPTION_HTTPS_MEM_CERT, cert,
                             MHD_OPTION_HTTPS_MEM_KEY, key,
                             MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                             MHD_OPTION_END);
        if (!d) {
                fprintf(stderr, "hubfloor: cannot listen on 127.0.0.1:%u\n", port);
                return 1;
        }
        if (notify_enabled())
                (void)notify_send("READY=1");
        while (sigwait(&mask, &sig) != 0)
                ;
        MHD_stop_daemon(d);
        printf("HUBFLOOR {\"fsync\":%s,\"accepted\":%ju,\"refused\":%ju}\n", do_fsync ? "true" : "false",
               (uintmax_t)atomic_load(&n_ok), (uintmax_t)atomic_load(&n_bad));
        return 0;
}
