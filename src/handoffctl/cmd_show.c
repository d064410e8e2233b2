/* handoffctl show: one item by handoff_id, wherever it is.
 *
 * Exit: 0 found; 1 no such item; 2 usage or config error; 4 an error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "handoffctl.h"
#include "items.h"
#include "util.h"

static void show_usage(FILE *f)
{
        fprintf(f,
                "Usage: handoffctl show [-c CONF] HANDOFF_ID [--json]\n"
                "\n"
                "Show where an item is (state = handoff, outbox, claimed, archive or\n"
                "rejected), its path, times, its outcome or reject reason, and the\n"
                "result its agent reported (handoffctl complete); status is its final\n"
                "outcome (for a relayed item, the receiving host's when its receipt\n"
                "says it).\n"
                "\n"
                CTL_USAGE_CONFIG_JSON
                "\n"
                "Exit: 0 found, 1 not found, 2 usage, 4 error.\n",
                CONFIG_DEFAULT_PATH);
}

/* The status of a relayed item is its outcome on the receiving host once
 * that host's signed receipt reports a final one (the relay's details stay
 * in relayed_to and remote_*): what a script asks show for. */
static void show_final_status(json_t *it)
{
        const char *ro = json_string_value(json_object_get(it, "remote_outcome"));
        const char *st = json_string_value(json_object_get(it, "status"));

        if (st && !strcmp(st, "relayed") && ro &&
            (!strcmp(ro, "consumed") || !strcmp(ro, "expired") || !strcmp(ro, "rejected")))
                json_object_set_new(it, "status", json_string(ro));
}

/* A field the item does not have is no line; the keys in one column as
 * wide as the longest. */
static void show_text(const json_t *found)
{
        const char *k;
        json_t *v;
        int w = 0;

        json_object_foreach((json_t *)found, k, v)
                if ((json_is_string(v) && json_string_length(v) > 0) || json_is_integer(v))
                        w = (int)strlen(k) > w ? (int)strlen(k) : w;
        json_object_foreach((json_t *)found, k, v) {
                if (json_is_string(v) && json_string_length(v) > 0)
                        printf("%-*s %s\n", w, k, esc_line(json_string_value(v)));
                else if (json_is_integer(v))
                        printf("%-*s %lld\n", w, k, (long long)json_integer_value(v));
        }
}

/* What the agent that consumed it reported (items.h "result"). */
static void show_result(const json_t *res)
{
        const char *text = json_string_value(json_object_get(res, "text"));
        const char *reason = json_string_value(json_object_get(res, "reason"));
        const json_t *data = json_object_get(res, "data");

        if (!res)
                return;
        printf("%-12s %s by %s at %s (recorded %s)\n", "result",
               esc_line(json_string_value(json_object_get(res, "status"))) ?: "?",
               esc_line(json_string_value(json_object_get(res, "agent"))) ?: "?",
               esc_line(json_string_value(json_object_get(res, "completed_at"))) ?: "?",
               esc_line(json_string_value(json_object_get(res, "recorded_at"))) ?: "?");
        if (reason)
                printf("%-12s %s\n", "why", esc_line(reason));
        /* the agent's words, a line each, marked as its own */
        if (text) {
                _cleanup_free_ char *t = strdup(esc_text(text));
                char *save = NULL;
                for (char *l = t ? strtok_r(t, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save))
                        printf("%-12s %s\n", "text", l);
        }
        if (data) {
                _cleanup_free_ char *d = json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS |
                                                    JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
                printf("%-12s %s\n", "data", d ? d : "?");
        }
}

/* The end of a task an A2A remote ran (a2a_out.c): what vouches for it
 * is that server's answer, over the channel the config names (rm NULL:
 * a remote removed since). */
static void show_a2a_end(const json_t *it, const struct config_remote *rm)
{
        const char *url = rm ? rm->a2a : NULL;

        printf("there %s (the answer of %s's server for task %s, %s; no signature, A2A "
               "carries no receipt; %s)\n",
               esc_line(json_string_value(json_object_get(it, "remote_outcome"))),
               esc_line(json_string_value(json_object_get(it, "remote_host"))) ?: "?",
               esc_line(json_string_value(json_object_get(it, "a2a_task"))) ?: "?",
               !url ? "from a server no longer in the configuration"
               : !strncmp(url, "https://", 8) ? "over TLS verified against its CAs, with the "
                                                 "bearer token of its token_file"
                                              : "over plain http to this host's loopback, "
                                                "with the bearer token of its token_file",
               esc_line(json_string_value(json_object_get(it, "remote_at"))) ?: "?");
}

int cmd_show(int argc, char **argv)
{
        const char *conf = NULL, *id;
        bool as_json = false;
        struct config *cfg = NULL;
        json_t *found = NULL;
        int ex, r;

        if (ctl_opts_config_json(argc, argv, show_usage, &conf, &as_json, &ex))
                return ex;
        if (optind != argc - 1)
                return ctl_fail(CTL_EXIT_USAGE, "show: one HANDOFF_ID is needed");
        id = argv[optind];
        if (!hd_id_valid(id))
                return ctl_fail(CTL_EXIT_USAGE, "show: '%s' is not a handoff_id", id);
        r = ctl_config(conf, &cfg);
        if (r)
                return r;
        /* The same rule as wait and the MCP server's handoff_status: an id
         * is where its highest-ranked item is, and a file in rejected/
         * counts for an id by its .reason or its own name, never by what
         * it says inside. */
        r = items_find(cfg->spool_dir, id, &found);
        if (r < 0) {
                if (r == -ENOENT)
                        r = ctl_fail(CTL_EXIT_NEGATIVE, "show: no item with handoff_id %s", id);
                else
                        r = ctl_fail(CTL_EXIT_ERROR, "show: cannot read %s: %s",
                                     cfg->spool_dir, strerror(-r));
                config_free(cfg);
                return r;
        }
        show_final_status(found);
        if (as_json) {
                ctl_print_json(found, "{}");
        } else {
                show_text(found);
                show_result(json_object_get(found, "result"));
                if (json_string_value(json_object_get(found, "relayed_to")))
                        printf("relayed to %s\n", esc_line(json_string_value(json_object_get(found, "relayed_to"))));
                const char *rh = json_string_value(json_object_get(found, "remote_host"));
                /* An A2A server signs nothing: its answer is the word. */
                if (rh && !strncmp(rh, "a2a:", 4) &&
                    json_string_value(json_object_get(found, "remote_outcome")))
                        show_a2a_end(found, config_remote_a2a(cfg, rh + 4));
                /* The receipt of the receiving host (receipt.c). */
                else if (json_string_value(json_object_get(found, "remote_outcome")))
                        printf("there %s (receipt signed by %s, %s)\n",
                               esc_line(json_string_value(json_object_get(found, "remote_outcome"))),
                               esc_line(json_string_value(json_object_get(found, "remote_host"))) ?: "?",
                               esc_line(json_string_value(json_object_get(found, "remote_at"))) ?: "?");
                else if (json_string_value(json_object_get(found, "relayed_to")))
                        printf("there: no receipt yet\n");
        }
        config_free(cfg);
        json_decref(found);
        return CTL_EXIT_OK;
}
