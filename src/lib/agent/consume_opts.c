/* The checks of a take as the configuration sets them (agent.h). */
#include <sodium.h>

#include "agent.h"
#include "config.h"
#include "key.h"

/* A sender's own key this user cannot read verifies nothing: a random
 * key bound to that agent stands in for it, so its handoffs fail their
 * MAC (never checked with the default key instead) and a kid key is still
 * refused for it, as the daemon refuses it. */
static int consume_stand_ins(struct config *c)
{
        unsigned char rnd[HD_KEY_MIN_LEN];
        int r;

        for (size_t i = 0; i < c->n_agents; i++) {
                struct config_agent *a = &c->agents[i];
                if (!a->key_path || a->key)
                        continue;
                randombytes_buf(rnd, sizeof(rnd));
                r = hd_key_from_bytes(rnd, sizeof(rnd), &a->key);
                sodium_memzero(rnd, sizeof(rnd));
                if (r < 0)
                        return r;
                hd_key_set_agent(a->key, a->name);
        }
        return 0;
}

int consume_opts_from_config(struct config *cfg, bool verify, hd_consume_opts *o)
{
        int r;

        o->resume_window_s = cfg->resume_window;
        o->max_size = cfg->max_file_size;
        o->policy.max_clock_skew_s = cfg->max_clock_skew;
        o->policy.max_window_s = cfg->max_window;
        if (!verify || config_load_keys_readable(cfg) <= 0)
                return 0;
        r = consume_stand_ins(cfg);
        if (r < 0)
                return r;
        o->lookup = config_key_lookup;
        o->userdata = cfg;
        return 1;
}
