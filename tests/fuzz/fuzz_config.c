/* libFuzzer target: handoffd.conf, through inih and config_load()'s
 * checks (key files are not read). */
#include "config.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct config *c = NULL;
        char *err = NULL;
        int r;

        r = config_load(fuzz_path_of(data, size), false, &c, &err);
        if (r < 0) {
                FUZZ_ASSERT(c == NULL, "config_load failed and returned a config");
                free(err);
                return 0;
        }
        /* No [agent] section is allowed (the packaged config has none). */
        FUZZ_ASSERT(c && c->spool_dir && c->spool_dir[0] == '/' &&
                    c->control_socket && c->roles && c->roles[0],
                    "config_load accepted a config without spool dir, socket or roles");
        FUZZ_ASSERT(c->max_window >= c->max_clock_skew,
                    "config_load accepted max_window < max_clock_skew");
        for (size_t i = 0; i < c->n_agents; i++) {
                const struct config_agent *a = &c->agents[i];
                FUZZ_ASSERT(hd_agent_valid(a->name) && a->state_dir &&
                            a->delivery && a->act_format,
                            "config_load accepted an incomplete [agent] section");
                FUZZ_ASSERT(config_agent(c, a->name) == a, "agent '%s' found twice",
                            a->name);
        }
        free(err);
        config_free(c);
        return 0;
}
