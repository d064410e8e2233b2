/* handoffctl render [--type TYPE] FILE: the Markdown rendering of a whole
 * handoff (its payload_type/payload) or, with --type, of a bare payload.
 *
 * Exit: 0 rendered; 1 the handoff or payload is invalid, or the handoff has
 * no payload; 2 bad usage or an unreadable FILE; 4 a system error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "handoff.h"
#include "files.h"
#include "handoffctl.h"
#include "util.h"

static void render_usage(FILE *f)
{
        fprintf(f, "Usage: handoffctl render [--type TYPE] FILE\n\n"
                   "Print the Markdown rendering of a handoff's payload, or of a\n"
                   "bare payload of TYPE (" CTL_PAYLOAD_TYPES ").\n"
                   "FILE '-' reads stdin.\n"
                   "\n"
                   "  -t, --type TYPE    FILE is a bare payload of TYPE\n"
                   "  -h, --help         this text\n"
                   "      --version      the version\n"
                   "\n"
                   "Exit: 0 rendered, 1 invalid or no payload, 2 usage or unreadable FILE,\n"
                   "4 error.\n");
}

/* A whole handoff document from path ("-" = stdin), size-limited.  The
 * file is the user's own: symlinks and hard links are fine here. */
static int render_read_doc(const char *path, json_t **ret, hd_verdict *v)
{
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r;

        fd = !strcmp(path, "-") ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)
                                : open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = read_all(fd, HD_DEFAULT_MAX_SIZE, 0, &buf, &len);
        if (r == -EFBIG)
                return verdict(v, HD_R_TOO_LARGE, "larger than %d bytes", HD_DEFAULT_MAX_SIZE);
        if (r < 0)
                return r;
        return hd_parse(buf, len, NULL, ret, v);
}

int cmd_render(int argc, char **argv)
{
        static const struct option opts[] = {
                { "type", required_argument, NULL, 't' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        _cleanup_json_ json_t *doc = NULL, *p = NULL;
        _cleanup_free_ char *md = NULL;
        const char *type = NULL, *path;
        hd_verdict v = {};
        int c, r;

        optind = 1;
        while ((c = getopt_long(argc, argv, "t:h", opts, NULL)) >= 0) {
                switch (c) {
                case 't':
                        type = optarg;
                        break;
                case 'h':
                        render_usage(stdout);
                        return CTL_EXIT_OK;
                case 'V':
                        printf("handoffctl %s\n", HD_VERSION_STRING);
                        return CTL_EXIT_OK;
                default:
                        render_usage(stderr);
                        return CTL_EXIT_USAGE;
                }
        }
        if (optind + 1 != argc)
                return ctl_fail(CTL_EXIT_USAGE, "render: one FILE is needed (try --help)");
        path = argv[optind];

        if (type) {
                r = ctl_check_type("render", type);
                if (r != 0)
                        return r;
                r = hd_payload_load(type, path, &p, &v);
        } else {
                r = render_read_doc(path, &doc, &v);
                if (r == -EBADMSG && v.reason == HD_R_PARSE_ERROR)
                        return ctl_fail(CTL_EXIT_NEGATIVE,
                                        "render: %s: %s: %s (a bare payload needs --type TYPE: "
                                        CTL_PAYLOAD_TYPES ")", path,
                                        hd_reason_name(v.reason), v.detail);
                if (r >= 0 && !json_object_get(doc, "payload_type")) {
                        if (!json_object_get(doc, "handoff_id"))
                                return ctl_fail(CTL_EXIT_NEGATIVE,
                                                "render: %s: not a handoff (no handoff_id); a bare "
                                                "payload needs --type TYPE (" CTL_PAYLOAD_TYPES ")",
                                                path);
                        return ctl_fail(CTL_EXIT_NEGATIVE,
                                        "render: %s: the handoff has no payload_type/payload to render",
                                        path);
                }
                if (r >= 0)
                        r = hd_payload_validate(doc, NULL, &v);
                if (r >= 0) {
                        type = json_string_value(json_object_get(doc, "payload_type"));
                        p = json_incref(json_object_get(doc, "payload"));
                }
        }
        if (r == -EBADMSG)
                return ctl_fail(CTL_EXIT_NEGATIVE, "render: %s: %s: %s", path,
                                hd_reason_name(v.reason), v.detail);
        if (r == -ENOENT || r == -EACCES || r == -EISDIR)
                return ctl_fail(CTL_EXIT_USAGE, "render: %s: %s", path, strerror(-r));
        if (r < 0)
                return ctl_fail(CTL_EXIT_ERROR, "render: %s: %s", path, strerror(-r));
        r = hd_payload_render(type, p, &md);
        if (r < 0)
                return ctl_fail(CTL_EXIT_ERROR, "render: %s: cannot render: %s", path,
                                strerror(-r));
        fputs(esc_text(md), stdout);
        if (fflush(stdout) != 0)
                return ctl_fail(CTL_EXIT_ERROR, "render: writing output: %s", strerror(errno));
        return CTL_EXIT_OK;
}
