/* handoffctl: one file per subcommand (cmd_NAME.c defines cmd_NAME). */
#ifndef HANDOFFCTL_H
#define HANDOFFCTL_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "handoff.h"
#include "payload.h"

/* Exit codes, documented in handoffctl(1). */
enum {
        CTL_EXIT_OK = 0,
        CTL_EXIT_NEGATIVE = 1,  /* rejected, none there, degraded */
        CTL_EXIT_USAGE = 2,     /* bad usage, bad config or key */
        CTL_EXIT_STALE = 3,     /* consume: stale; status: not running */
        CTL_EXIT_ERROR = 4,     /* a system error (I/O, permissions) */
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

struct config;
/* Load the config for a subcommand: -c path or the default.  Prints the
 * error and returns a CTL_EXIT_* code (non-zero) on failure. */
int ctl_config(const char *path, struct config **ret);
/* The consume options of cfg (resume window, size cap, clock policy) and,
 * with verify, the keys this user can read for the proof of origin (a
 * sender's own key that cannot be read stands in as a random one, so its
 * handoffs fail rather than verify with another key).  > 0 when keys
 * were loaded (o->lookup set), 0 when none, or -errno. */
int consume_opts_from_config(struct config *cfg, bool verify, hd_consume_opts *o);
/* The payload types --type takes, as one string (payload.h). */
#define CTL_PAYLOAD_TYPES PAYLOAD_TYPE_NAMES
/* 0 for a supported payload type, else the usage error of cmd printed
 * (naming the supported types) and CTL_EXIT_USAGE. */
int ctl_check_type(const char *cmd, const char *type);

/* A producer's text as shown to a person (esc.c): control characters,
 * C1 controls, line separators and bidi overrides written as \e, \n,
 * \x1b, \u2028...  ctl_esc_text() keeps newlines and tabs (a multi-line
 * text whose lines the caller marks).  NULL stays NULL; the result lives
 * until 16 more calls. */
const char *ctl_esc(const char *s);
const char *ctl_esc_text(const char *s);

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

/* "handoffctl: " + message (escaped: ctl_esc()) + newline on stderr;
 * returns code. */
int ctl_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
