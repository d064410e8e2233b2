/* handoffctl: dispatch to the subcommands, and what they share: the
 * config, the error line, the -c/--json options, the --json output. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "handoff.h"
#include "handoffctl.h"
#include "util.h"

static const struct {
        const char *name;
        int (*fn)(int, char **);
        const char *what;
} commands[] = {
        { "status",  cmd_status,  "show the daemon and the spool" },
        { "submit",  cmd_submit,  "sign a handoff and drop it into a spool" },
        { "verify",  cmd_verify,  "check handoff files (MAC, fields, freshness)" },
        { "consume", cmd_consume, "take an agent's bootstrap, once" },
        { "inbox",   cmd_inbox,   "the bootstraps waiting for an agent; --follow" },
        { "complete", cmd_complete, "report what came of a consumed handoff" },
        { "wait",    cmd_wait,    "block until a handoff has an outcome" },
        { "cancel",  cmd_cancel,  "take back a handoff its agent has not taken yet" },
        { "mcp",     cmd_mcp,     "serve an agent over the Model Context Protocol (stdio)" },
        { "list",    cmd_list,    "list items in the spool" },
        { "show",    cmd_show,    "show one item by handoff_id" },
        { "render",  cmd_render,  "print the Markdown rendering of a handoff or payload" },
        { "baton",   cmd_baton,   "show a Baton session and its history" },
        { "keygen",  cmd_keygen,  "write a new random key file" },
};

int ctl_config(const char *path, struct config **ret)
{
        char *err = NULL;
        int r;

        r = config_load(path ? path : CONFIG_DEFAULT_PATH, false, ret, &err);
        if (r < 0) {
                /* each mistake on a line of its own, "FILE:LINE: message" */
                char *save = NULL;
                if (!err)
                        ctl_fail(CTL_EXIT_USAGE, "%s", strerror(-r));
                for (char *l = err ? strtok_r(err, "\n", &save) : NULL; l;
                     l = strtok_r(NULL, "\n", &save))
                        ctl_fail(CTL_EXIT_USAGE, "%s", l);
                free(err);
                return CTL_EXIT_USAGE;
        }
        return 0;
}

int ctl_opts_config_json(int argc, char **argv, void (*usage)(FILE *f), const char **ret_conf,
                         bool *ret_json, int *ret_exit)
{
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "c:jh", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': *ret_conf = optarg; break;
                case 'j': *ret_json = true; break;
                case 'h':
                        usage(stdout);
                        *ret_exit = CTL_EXIT_OK;
                        return 1;
                case 'V':
                        printf("handoffctl %s\n", HD_VERSION_STRING);
                        *ret_exit = CTL_EXIT_OK;
                        return 1;
                default:
                        usage(stderr);
                        *ret_exit = CTL_EXIT_USAGE;
                        return 1;
                }
        }
        return 0;
}

void ctl_print_json(const json_t *j, const char *none)
{
        _cleanup_free_ char *s = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);

        printf("%s\n", s ? s : none);
}

int ctl_fail(int code, const char *fmt, ...)
{
        char msg[4096];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "handoffctl: %s\n", esc_line(msg));
        return code;
}

int ctl_check_type(const char *cmd, const char *type)
{
        if (payload_type_find(type))
                return 0;
        return ctl_fail(CTL_EXIT_USAGE, "%s: --type '%s' is not supported; the types are "
                        CTL_PAYLOAD_TYPES, cmd, type);
}

static void usage(FILE *f)
{
        fprintf(f, "Usage: handoffctl COMMAND [OPTIONS]\n\nCommands:\n");
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].what);
        fprintf(f, "\n  -h, --help     this text\n"
                   "  -V, --version  the version\n"
                   "\n'handoffctl COMMAND --help' for a command's options.\n"
                   "See handoffctl(1).\n");
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                usage(stderr);
                return CTL_EXIT_USAGE;
        }
        if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
                usage(stdout);
                return CTL_EXIT_OK;
        }
        if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
                printf("handoffctl %s\n", HD_VERSION_STRING);
                return CTL_EXIT_OK;
        }
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (!strcmp(argv[1], commands[i].name))
                        return commands[i].fn(argc - 1, argv + 1);
        return ctl_fail(CTL_EXIT_USAGE, "unknown command '%s' (try --help)",
                        argv[1]);
}
