/* handoffctl keygen: a new random key, 32 bytes as 64 lowercase hex chars
 * and a newline, on stdout or into a new file (mode 0600, never replaced).
 *
 * Exit: 0 written; 2 bad usage or the file exists; 4 I/O error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "handoff.h"
#include "handoffctl.h"
#include "util.h"

#define KEYGEN_BYTES 32

static void keygen_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl keygen [-o FILE]\n"
                "\n"
                "Write a new random key: %d bytes as %d lowercase hex chars and a\n"
                "newline.  Without -o it goes to stdout.\n"
                "\n"
                "  -o, --output FILE  create FILE with mode 0600; an existing FILE\n"
                "                     is never overwritten (exit 2)\n"
                "  -h, --help         this text\n"
                "      --version      the version\n"
                "\n"
                "Exit: 0 written, 2 bad usage or FILE exists, 4 I/O error.\n",
                KEYGEN_BYTES, 2 * KEYGEN_BYTES);
}

static int write_all_fd(int fd, const char *buf, size_t len)
{
        while (len > 0) {
                ssize_t n = write(fd, buf, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                buf += n;
                len -= (size_t)n;
        }
        return 0;
}

static int keygen_to_file(const char *path, const char *line, size_t len)
{
        _cleanup_close_ int fd = -1;
        int r;

        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                  0600);
        if (fd < 0) {
                if (errno == EEXIST)
                        return ctl_fail(CTL_EXIT_USAGE,
                                        "keygen: %s: exists, not overwriting",
                                        path);
                return ctl_fail(CTL_EXIT_ERROR, "keygen: %s: %s", path,
                                strerror(errno));
        }
        /* exactly 0600 whatever the umask says */
        r = fchmod(fd, 0600) < 0 ? -errno : 0;
        if (r == 0)
                r = write_all_fd(fd, line, len);
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (r == 0 && close(TAKE_FD(fd)) < 0 && errno != EINTR)
                r = -errno;
        if (r < 0) {
                /* no half-written key left behind */
                unlink(path);
                return ctl_fail(CTL_EXIT_ERROR, "keygen: %s: %s", path,
                                strerror(-r));
        }
        return CTL_EXIT_OK;
}

int cmd_keygen(int argc, char **argv)
{
        static const struct option opts[] = {
                { "output",  required_argument, NULL, 'o' },
                { "help",    no_argument,       NULL, 'h' },
                { "version", no_argument,       NULL, 'V' },
                {}
        };
        const char *out = NULL;
        char line[2 * KEYGEN_BYTES + 2];
        int c, r;

        while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'o':
                        out = optarg;
                        break;
                case 'h':
                        keygen_usage(stdout);
                        return CTL_EXIT_OK;
                case 'V':
                        printf("handoffctl %s\n", HD_VERSION_STRING);
                        return CTL_EXIT_OK;
                default:
                        keygen_usage(stderr);
                        return CTL_EXIT_USAGE;
                }
        }
        if (optind < argc)
                return ctl_fail(CTL_EXIT_USAGE,
                                "keygen: unexpected argument '%s' (try --help)",
                                argv[optind]);
        if (out && !*out)
                return ctl_fail(CTL_EXIT_USAGE, "keygen: empty file name");

        r = random_hex(line, KEYGEN_BYTES);
        if (r < 0)
                return ctl_fail(CTL_EXIT_ERROR, "keygen: no randomness: %s",
                                strerror(-r));
        line[2 * KEYGEN_BYTES] = '\n';
        line[2 * KEYGEN_BYTES + 1] = '\0';

        if (out)
                r = keygen_to_file(out, line, 2 * KEYGEN_BYTES + 1);
        else if (fputs(line, stdout) == EOF || fflush(stdout) == EOF)
                r = ctl_fail(CTL_EXIT_ERROR, "keygen: stdout: %s",
                             strerror(errno));
        else
                r = CTL_EXIT_OK;
        explicit_bzero(line, sizeof(line));
        return r;
}
