/* handoffctl list: the items of a spool, by state and agent.
 *
 * Exit: 0 listed (even none); 2 usage or config error; 4 a read error. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "handoffctl.h"
#include "items.h"
#include "util.h"

static void list_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl list [-c CONF] [--state STATE] [--agent NAME] [--json]\n"
                "\n"
                "List the items of the spool: STATE is handoff, outbox (waiting for the\n"
                "relay), claimed, archive or rejected (default all); --agent keeps items\n"
                "from or to NAME.\n"
                "\n"
                "  -c, --config FILE  daemon configuration (default %s)\n"
                "  -s, --state STATE  one state directory\n"
                "  -a, --agent NAME   only items from or to NAME\n"
                "  -j, --json         a JSON array of items\n"
                "  -h, --help         this text\n"
                "      --version      the version\n"
                "\n"
                "Exit: 0 listed, 2 usage, 4 error.\n",
                CONFIG_DEFAULT_PATH);
}

static bool item_has_agent(json_t *it, const char *agent)
{
        const char *f = json_string_value(json_object_get(it, "from_agent"));
        const char *t = json_string_value(json_object_get(it, "to_agent"));
        return (f && !strcmp(f, agent)) || (t && !strcmp(t, agent));
}

/* list reads at most this much of each file: a spool of large files
 * (a flood) is listed from names and stat, and says how many it did not
 * read, rather than parse them all. */
#define LIST_READ_MAX 65536

/* One row's cells: state, id, from, to, time, outcome or reason. */
#define LIST_COLS 6

static void list_cells(json_t *it, const char *cell[LIST_COLS])
{
        cell[0] = json_string_value(json_object_get(it, "state"));
        cell[1] = json_string_value(json_object_get(it, "handoff_id")) ?:
                  json_string_value(json_object_get(it, "name"));
        cell[2] = json_string_value(json_object_get(it, "from_agent")) ?: "?";
        cell[3] = json_string_value(json_object_get(it, "to_agent")) ?: "?";
        cell[4] = json_string_value(json_object_get(it, "at"));
        cell[5] = json_string_value(json_object_get(it, "outcome")) ?:
                  json_string_value(json_object_get(it, "reason")) ?: "";
        for (size_t i = 0; i < LIST_COLS; i++)
                cell[i] = cell[i] ? esc_line(cell[i]) : "-";
}

/* A header, columns as wide as their widest cell, no trailing blanks, and
 * the count (as postqueue -p ends). */
static void list_print(json_t *all)
{
        static const char *const head[LIST_COLS] = {
                "STATE", "HANDOFF_ID", "FROM", "TO", "AT", "OUTCOME",
        };
        size_t w[LIST_COLS], n = json_array_size(all), j;
        const char *cell[LIST_COLS];
        json_t *it;

        if (n == 0) {
                printf("no items\n");
                return;
        }
        for (size_t i = 0; i < LIST_COLS; i++)
                w[i] = strlen(head[i]);
        json_array_foreach(all, j, it) {
                list_cells(it, cell);
                for (size_t i = 0; i < LIST_COLS; i++)
                        if (strlen(cell[i]) > w[i])
                                w[i] = strlen(cell[i]);
        }
        for (size_t row = 0; row <= n; row++) {
                if (row == 0)
                        memcpy(cell, head, sizeof(cell));
                else
                        list_cells(json_array_get(all, row - 1), cell);
                /* the last non-empty cell ends the line */
                size_t last = LIST_COLS - 1;
                while (last > 0 && !*cell[last])
                        last--;
                for (size_t i = 0; i < last; i++)
                        printf("%-*s  ", (int)w[i], cell[i]);
                printf("%s\n", cell[last]);
        }
        size_t unread = 0;
        json_array_foreach(all, j, it)
                unread += json_is_true(json_object_get(it, "unread"));
        if (unread)
                printf("%zu item%s, %zu not read (over %d bytes each: their name and time only)\n",
                       n, n == 1 ? "" : "s", unread, LIST_READ_MAX);
        else
                printf("%zu item%s\n", n, n == 1 ? "" : "s");
}

int cmd_list(int argc, char **argv)
{
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "state", required_argument, NULL, 's' },
                { "agent", required_argument, NULL, 'a' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        const char *conf = NULL, *state = NULL, *agent = NULL;
        bool as_json = false;
        struct config *cfg = NULL;
        json_t *all;
        int c, r, code = CTL_EXIT_OK;

        while ((c = getopt_long(argc, argv, "c:s:a:jh", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': conf = optarg; break;
                case 's': state = optarg; break;
                case 'a': agent = optarg; break;
                case 'j': as_json = true; break;
                case 'h': list_usage(stdout); return CTL_EXIT_OK;
                case 'V': printf("handoffctl %s\n", HD_VERSION_STRING); return CTL_EXIT_OK;
                default: list_usage(stderr); return CTL_EXIT_USAGE;
                }
        }
        if (optind < argc)
                return ctl_fail(CTL_EXIT_USAGE, "list: unexpected argument '%s'", argv[optind]);
        bool known = !state;
        for (size_t i = 0; i < ELEMENTSOF(items_find_states); i++)
                known = known || !strcmp(state, items_find_states[i]);
        if (!known)
                return ctl_fail(CTL_EXIT_USAGE, "list: state '%s' is not handoff, outbox, claimed, "
                                "archive or rejected", state);
        r = ctl_config(conf, &cfg);
        if (r)
                return r;
        all = json_array();
        if (!all) {
                config_free(cfg);
                return ctl_fail(CTL_EXIT_ERROR, "list: out of memory");
        }
        /* outbox/: handoffs for another host, waiting for the relay */
        for (size_t i = 0; i < ELEMENTSOF(items_find_states); i++) {
                const char *st = items_find_states[i];
                json_t *items = NULL, *it;
                size_t j;
                if (state && strcmp(state, st))
                        continue;
                r = items_list(cfg->spool_dir, st, LIST_READ_MAX, &items);
                if (r == -ENOENT && !strcmp(st, "outbox"))
                        continue;       /* no relay here, ever */
                if (r < 0) {
                        ctl_fail(CTL_EXIT_ERROR, "list: %s/%s: %s", cfg->spool_dir,
                                 st, strerror(-r));
                        code = CTL_EXIT_ERROR;
                        continue;
                }
                json_array_foreach(items, j, it)
                        if (!agent || item_has_agent(it, agent))
                                json_array_append(all, it);
                json_decref(items);
        }
        config_free(cfg);
        if (as_json) {
                ctl_print_json(all, "[]");
        } else {
                list_print(all);
        }
        json_decref(all);
        return code;
}
