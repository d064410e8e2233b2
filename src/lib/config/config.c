/* handoffd.conf loaded: the warnings of a config that loaded, its
 * release, and the lookups (an agent, a remote, whether the relay is on).
 * Loading is config_load.c's. */
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "util.h"

int config_warnings(const struct config *c,
                    void (*emit)(void *userdata, const char *msg), void *userdata)
{
        int n = 0;

        /* Handoffs to a [remote] leave this host: not nothing claimed. */
        if (c->n_agents == 0 && c->n_remotes == 0) {
                char *m = NULL;
                if (asprintf(&m, "%s has no [agent NAME] section: nothing will be claimed, "
                                 "only rejected and expired", c->path) >= 0) {
                        emit(userdata, m);
                        free(m);
                }
                n++;
        }
        if (c->empty_agents) {
                char *m = NULL;
                if (asprintf(&m, "%s: [agent %s] has no key at all (state_dir is required): "
                                 "ignored", c->path, c->empty_agents) >= 0) {
                        emit(userdata, m);
                        free(m);
                }
                n++;
        }
        const char *relayed = NULL;
        for (size_t i = c->n_remotes; i-- > 0;)
                if (c->remotes[i].host)
                        relayed = c->remotes[i].name;
        if (relayed && !config_relay_on(c)) {
                char *m = NULL;
                if (asprintf(&m, "%s: [remote %s] but no [relay] servers: handoffs to it are "
                                 "not relayed, they wait and are rejected as expired_unclaimed",
                             c->path, relayed) >= 0) {
                        emit(userdata, m);
                        free(m);
                }
                n++;
        }
        if (c->control_group && !getgrnam(c->control_group)) {
                char *m = NULL;
                if (asprintf(&m, "[control] group '%s' does not exist: the control socket "
                                 "stays with the daemon's own group", c->control_group) >= 0) {
                        emit(userdata, m);
                        free(m);
                }
                n++;
        }
        int64_t uid;
        if (c->control_hub_user && parse_int64(c->control_hub_user, 0, UINT32_MAX - 1, &uid) < 0 &&
            !getpwnam(c->control_hub_user)) {
                char *m = NULL;
                if (asprintf(&m, "[control] hub_user '%s' does not exist: handoff-hubd's /mcp "
                                 "cannot list or take an agent's handoffs", c->control_hub_user) >= 0) {
                        emit(userdata, m);
                        free(m);
                }
                n++;
        }
        return n;
}

void config_free(struct config *c)
{
        if (!c)
                return;
        free(c->path);
        free(c->empty_agents);
        free(c->spool_dir);
        free(c->default_key_path);
        hd_key_free(c->default_key);
        for (size_t i = 0; i < c->n_kids; i++) {
                free(c->kid_names[i]);
                free(c->kid_paths[i]);
                hd_key_free(c->kid_keys[i]);
        }
        free(c->kid_names);
        free(c->kid_paths);
        free(c->kid_keys);
        free(c->pubkey_dir);
        for (size_t i = 0; i < c->n_pubkeys; i++)
                hd_key_free(c->pubkeys[i]);
        free(c->pubkeys);
        for (size_t i = 0; i < c->n_agents; i++) {
                struct config_agent *a = &c->agents[i];
                free(a->name);
                free(a->state_dir);
                free(a->key_path);
                hd_key_free(a->key);
                for (size_t j = 0; j < a->n_pubkey_paths; j++)
                        free(a->pubkey_paths[j]);
                free(a->pubkey_paths);
                free(a->delivery);
                free(a->act_format);
                free(a->description);
                for (size_t j = 0; j < a->n_skills; j++) {
                        free(a->skill_ids[j]);
                        free(a->skill_descs[j]);
                }
                free(a->skill_ids);
                free(a->skill_descs);
        }
        free(c->agents);
        free(c->control_socket);
        free(c->control_group);
        free(c->control_hub_user);
        free(c->metrics_textfile);
        struct config_relay *rl = &c->relay;
        free(rl->servers);
        free(rl->host);
        free(rl->stream);
        free(rl->credentials);
        free(rl->user);
        if (rl->password)
                explicit_bzero(rl->password, strlen(rl->password));
        free(rl->password);
        free(rl->nkey);
        free(rl->nkey_seed);
        free(rl->tls_ca);
        free(rl->tls_cert);
        free(rl->tls_key);
        free(rl->host_key);
        free(rl->host_pubkey_dir);
        for (size_t i = 0; i < c->n_remotes; i++) {
                free(c->remotes[i].name);
                free(c->remotes[i].host);
                free(c->remotes[i].a2a);
                free(c->remotes[i].token_file);
                free(c->remotes[i].ca_file);
                free(c->remotes[i].a2a_card_key);
                free(c->remotes[i].description);
                for (size_t j = 0; j < c->remotes[i].n_skills; j++) {
                        free(c->remotes[i].skill_ids[j]);
                        free(c->remotes[i].skill_descs[j]);
                }
                free(c->remotes[i].skill_ids);
                free(c->remotes[i].skill_descs);
        }
        free(c->remotes);
        if (c->roles)
                for (char **p = c->roles; *p; p++)
                        free(*p);
        free(c->roles);
        free(c->hub.listen);
        free(c->hub.tls_cert);
        free(c->hub.tls_key);
        free(c->hub.token_dir);
        free(c->hub.state_dir);
        free(c->hub.default_agent);
        free(c->hub.signing_key);
        free(c->hub.push_allow);
        free(c->hub.mcp_origins);
        free(c);
}

const struct config_agent *config_agent(const struct config *c,
                                        const char *name)
{
        if (!name)
                return NULL;
        for (size_t i = 0; i < c->n_agents; i++)
                if (!strcmp(c->agents[i].name, name))
                        return &c->agents[i];
        return NULL;
}

const char *config_remote(const struct config *c, const char *name)
{
        if (!name)
                return NULL;
        for (size_t i = 0; i < c->n_remotes; i++)
                if (!strcmp(c->remotes[i].name, name))
                        return c->remotes[i].host;
        return NULL;
}

bool config_reachable(const struct config *c, const char *name)
{
        if (!name)
                return false;
        if (config_agent(c, name))
                return true;
        for (size_t i = 0; i < c->n_remotes; i++)
                if (!strcmp(c->remotes[i].name, name))
                        return true;
        return false;
}

const struct config_remote *config_remote_a2a(const struct config *c, const char *name)
{
        if (!name)
                return NULL;
        for (size_t i = 0; i < c->n_remotes; i++)
                if (c->remotes[i].a2a && !strcmp(c->remotes[i].name, name))
                        return &c->remotes[i];
        return NULL;
}

bool config_a2a_on(const struct config *c)
{
        for (size_t i = 0; i < c->n_remotes; i++)
                if (c->remotes[i].a2a)
                        return true;
        return false;
}

bool config_relay_on(const struct config *c)
{
        const char *s = c->relay.servers;

        return s && s[strspn(s, " \t,")];
}
