/* handoffctl: one file per subcommand (cmd_NAME.c defines cmd_NAME). */
#ifndef HANDOFFCTL_H
#define HANDOFFCTL_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "agent.h"
#include "handoff.h"
#include "payload.h"

/* Exit codes, documented in handoffctl(1). */
enum {
        CTL_EXIT_OK = AG_OK,
        CTL_EXIT_NEGATIVE = AG_NEGATIVE,        /* rejected, none there, degraded */
        CTL_EXIT_USAGE = AG_USAGE,              /* bad usage, bad config or key */
        CTL_EXIT_STALE = AG_STALE,              /* consume: stale; status: not running */
        CTL_EXIT_ERROR = AG_ERROR,              /* a system error (I/O, permissions) */
};

int cmd_keygen(int argc, char **argv);
int cmd_submit(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_consume(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_render(int argc, char **argv);
int cmd_baton(int argc, char **argv);
int cmd_inbox(int argc, char **argv);
int cmd_wait(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_complete(int argc, char **argv);
int cmd_mcp(int argc, char **argv);

struct mcp;
/* The MCP server for m->agent (and m->kid) as handoffctl mcp sets it up
 * (cmd_mcp.c): the configuration conf (NULL: the default), the inbox,
 * the checks of a take, the signing key (key, else the configuration's),
 * the tools.  Returns 0 or a CTL_EXIT_* code (printed).  mcp_close()
 * frees it either way. */
int mcp_open(struct mcp *m, const char *conf, const char *key);
void mcp_close(struct mcp *m);

struct config;
/* Load the config for a subcommand: -c path or the default.  Prints the
 * error and returns a CTL_EXIT_* code (non-zero) on failure. */
int ctl_config(const char *path, struct config **ret);
/* The payload types --type takes, as one string (payload.h). */
#define CTL_PAYLOAD_TYPES PAYLOAD_TYPE_NAMES
/* 0 for a supported payload type, else the usage error of cmd printed
 * (naming the supported types) and CTL_EXIT_USAGE. */
int ctl_check_type(const char *cmd, const char *type);


/* The options of a subcommand that takes -c FILE and --json alone (show,
 * status): *ret_conf, *ret_json set as given.  0: go on, optind at the
 * first operand; 1: the subcommand ends with *ret_exit (--help and
 * --version printed, or a usage error with usage(stderr)). */
int ctl_opts_config_json(int argc, char **argv, void (*usage)(FILE *f), const char **ret_conf,
                         bool *ret_json, int *ret_exit);
/* Those options as --help says them (%s: the default config file). */
#define CTL_USAGE_CONFIG_JSON \
        "  -c, --config FILE  daemon configuration (default %s)\n" \
        "  -j, --json         one JSON object\n" \
        "  -h, --help         this text\n" \
        "      --version      the version\n"

/* --json: j on stdout, indented, keys sorted; none when it cannot be
 * written (out of memory). */
void ctl_print_json(const json_t *j, const char *none);

/* "handoffctl: " + message (escaped: esc_line()) + newline on stderr;
 * returns code. */
int ctl_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
