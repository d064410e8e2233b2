/* handoffctl keygen: a new random key.  HMAC (default): 32 bytes as 64
 * lowercase hex chars and a newline, on stdout or into a new file (mode
 * 0600, never replaced).  --ed25519: an Ed25519 key pair, the secret key
 * line into FILE (0600) and the public key line into FILE.pub (0644, with
 * a trailing ".key" of FILE replaced), both new; the public line also on
 * stdout.
 *
 * Exit: 0 written; 2 bad usage or a file exists; 4 I/O error. */
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
#include "key.h"
#include "util.h"

#define KEYGEN_BYTES 32

static void keygen_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl keygen [-o FILE]\n"
                "       handoffctl keygen --ed25519 [--kid KID] -o FILE\n"
                "\n"
                "Write a new random HMAC key: %d bytes as %d lowercase hex chars and a\n"
                "newline.  Without -o it goes to stdout.  With --ed25519, an Ed25519\n"
                "key pair: the secret key into FILE, the public key line\n"
                "\"ed25519 KEY KID\" into FILE.pub (a trailing .key of FILE replaced)\n"
                "and on stdout.\n"
                "\n"
                "  -o, --output FILE  create FILE with mode 0600; an existing FILE\n"
                "                     is never overwritten (exit 2)\n"
                "      --ed25519      an Ed25519 key pair (needs -o)\n"
                "      --kid KID      its key id (default: the first 16 hex chars of\n"
                "                     SHA-256 of the public key)\n"
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

static int keygen_to_file(const char *path, const char *line, size_t len,
                          mode_t mode)
{
        _cleanup_close_ int fd = -1;
        int r;

        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                  mode);
        if (fd < 0) {
                if (errno == EEXIST)
                        return ctl_fail(CTL_EXIT_USAGE,
                                        "keygen: %s: exists, not overwriting",
                                        path);
                return ctl_fail(CTL_EXIT_ERROR, "keygen: %s: %s", path,
                                strerror(errno));
        }
        /* exactly this mode whatever the umask says */
        r = fchmod(fd, mode) < 0 ? -errno : 0;
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

/* FILE.pub beside FILE, a trailing ".key" replaced. */
static int keygen_pub_path(const char *out, char *buf, size_t n)
{
        size_t l = strlen(out);

        if (l > 4 && !strcmp(out + l - 4, ".key"))
                l -= 4;
        return xsnprintf(buf, n, "%.*s.pub", (int)l, out) < 0 ? -ENAMETOOLONG : 0;
}

static int keygen_ed25519(const char *out, const char *kid)
{
        _cleanup_(hd_key_freep) hd_key *k = NULL;
        char sec[HD_KEY_LINE_MAX], pub[HD_KEY_LINE_MAX], pubpath[4096];
        int r;

        if (kid && !hd_agent_valid(kid))
                return ctl_fail(CTL_EXIT_USAGE,
                                "keygen: --kid '%s' is not [a-z0-9][a-z0-9_-]{0,63}", kid);
        if (keygen_pub_path(out, pubpath, sizeof(pubpath)) < 0)
                return ctl_fail(CTL_EXIT_USAGE, "keygen: %s: name too long", out);
        /* both names free before anything is written */
        if (access(pubpath, F_OK) == 0 || errno != ENOENT)
                return ctl_fail(CTL_EXIT_USAGE, "keygen: %s: exists, not overwriting",
                                pubpath);
        r = hd_key_generate(kid, &k);
        if (r < 0)
                return ctl_fail(CTL_EXIT_ERROR, "keygen: %s", strerror(-r));
        if (hd_key_format(k, true, sec, sizeof(sec)) < 0 ||
            hd_key_format(k, false, pub, sizeof(pub)) < 0)
                return ctl_fail(CTL_EXIT_ERROR, "keygen: cannot format the key");
        r = keygen_to_file(out, sec, strlen(sec), 0600);
        explicit_bzero(sec, sizeof(sec));
        if (r != CTL_EXIT_OK)
                return r;
        r = keygen_to_file(pubpath, pub, strlen(pub), 0644);
        if (r != CTL_EXIT_OK) {
                /* no secret without its public half */
                unlink(out);
                return r;
        }
        if (fputs(pub, stdout) == EOF || fflush(stdout) == EOF)
                return ctl_fail(CTL_EXIT_ERROR, "keygen: stdout: %s", strerror(errno));
        return CTL_EXIT_OK;
}

int cmd_keygen(int argc, char **argv)
{
        enum { OPT_ED25519 = 0x100, OPT_KID };
        static const struct option opts[] = {
                { "output",  required_argument, NULL, 'o' },
                { "ed25519", no_argument,       NULL, OPT_ED25519 },
                { "kid",     required_argument, NULL, OPT_KID },
                { "help",    no_argument,       NULL, 'h' },
                { "version", no_argument,       NULL, 'V' },
                {}
        };
        const char *out = NULL, *kid = NULL;
        char line[2 * KEYGEN_BYTES + 2];
        bool ed25519 = false;
        int c, r;

        while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'o':
                        out = optarg;
                        break;
                case OPT_ED25519:
                        ed25519 = true;
                        break;
                case OPT_KID:
                        kid = optarg;
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
        if (kid && !ed25519)
                return ctl_fail(CTL_EXIT_USAGE, "keygen: --kid goes with --ed25519");
        if (ed25519) {
                if (!out)
                        return ctl_fail(CTL_EXIT_USAGE,
                                        "keygen: --ed25519 needs -o FILE (two files are written)");
                return keygen_ed25519(out, kid);
        }

        r = random_hex(line, KEYGEN_BYTES);
        if (r < 0)
                return ctl_fail(CTL_EXIT_ERROR, "keygen: no randomness: %s",
                                strerror(-r));
        line[2 * KEYGEN_BYTES] = '\n';
        line[2 * KEYGEN_BYTES + 1] = '\0';

        if (out)
                r = keygen_to_file(out, line, 2 * KEYGEN_BYTES + 1, 0600);
        else if (fputs(line, stdout) == EOF || fflush(stdout) == EOF)
                r = ctl_fail(CTL_EXIT_ERROR, "keygen: stdout: %s",
                             strerror(errno));
        else
                r = CTL_EXIT_OK;
        explicit_bzero(line, sizeof(line));
        return r;
}
