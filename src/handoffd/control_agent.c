/* The control socket's agent commands (control.h): an agent's inbox listed,
 * one of its handoffs taken, its result written, and what the daemon made
 * of that result, done by the daemon for the peer that asks on the agent's
 * behalf: handoff-hubd's /mcp, whose user ([control] hub_user) reads no
 * agent's state_dir.  Each agent's handoffs/ stays the agent's and the
 * daemon's (2770, owner the daemon, group the agent's own): the hub gets
 * the answer of one request for the one agent its token speaks for, never
 * a descriptor or a path it could open.
 *
 *   {"command":"inbox","agent":A}                  -> handoffs, not_shown
 *   {"command":"take","agent":A,"id":ID?}  -> bootstrap
 *   {"command":"peek","agent":A,"id":ID}   -> bootstrap, left in place
 *   {"command":"complete","agent":A,"id":ID,"result":{text|data,failed,input_required}}
 *   {"command":"complete_word","agent":A,"id":ID,"status":S} -> taken, code, msg
 *   {"command":"stamp","agent":A}                  -> stamp (the inbox's mtime)
 *
 * (An id is the handoff's, under a key of the control protocol's own: the
 * handoff's keys are handoff_doc.c's to spell.)
 * A refusal is {"ok":false,"errno":N,"error":LINE} (with "reason" and
 * "detail" for a take whose file failed its checks); the tool the hub
 * runs turns it into the same words handoffctl mcp says. */
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "complete.h"
#include "control.h"
#include "inbox.h"
#include "parts.h"
#include "util.h"

bool control_hub_peer(const struct config *cfg, uid_t uid)
{
        const struct passwd *pw;
        int64_t n;

        if (!cfg->control_hub_user)
                return false;
        if (parse_int64(cfg->control_hub_user, 0, UINT32_MAX - 1, &n) == 0)
                return (uid_t)n == uid;
        pw = getpwnam(cfg->control_hub_user);
        return pw && pw->pw_uid == uid;
}

bool control_agent_peer(const struct config *cfg, uid_t uid)
{
        return uid == 0 || uid == geteuid() || control_hub_peer(cfg, uid);
}

static json_t *refusal(int err, const char *line)
{
        return json_pack("{s:b, s:i, s:s}", "ok", 0, "errno", err, "error", line);
}

/* The inbox of the request's agent, opened: NULL, or the refusal in
 * *ret.  An agent out of service is not one the daemon serves. */
static bool agent_inbox(const struct parts *p, const json_t *doc, struct inbox *ib,
                        hd_consume_opts *copts, json_t **ret)
{
        struct config *cfg = p->sp->cfg;
        const char *agent = json_string_value(json_object_get(doc, "agent"));
        const struct config_agent *a;
        char err[512];

        ib->fd = -1;
        if (!agent || !hd_agent_valid(agent) || !(a = config_agent(cfg, agent)) || !a->state_dir) {
                *ret = refusal(ENXIO, "not an agent of this daemon");
                return false;
        }
        if (dict_get(&p->unserved, agent)) {
                *ret = refusal(EPERM, "this agent is out of service (handoffctl status says why)");
                return false;
        }
        if (inbox_init(ib, cfg, agent, NULL, 0, err, sizeof(err)) != 0) {
                *ret = refusal(EIO, err);
                return false;
        }
        *copts = (hd_consume_opts){ 0 };
        (void)consume_opts_from_config(cfg, false, copts);
        copts->lookup = config_key_lookup;
        copts->userdata = cfg;
        copts->agent = agent;
        ib->copts = copts;
        return true;
}

static json_t *do_inbox(struct inbox *ib)
{
        _cleanup_json_ json_t *list = NULL;
        size_t more = 0;
        int r;

        if (ib->fd < 0)
                return json_pack("{s:b, s:[], s:i}", "ok", 1, "handoffs", "not_shown", 0);
        r = inbox_list(ib, hd_now_usec(), &list, &more);
        if (r < 0)
                return refusal(-r, strerror(-r));
        return json_pack("{s:b, s:O, s:I}", "ok", 1, "handoffs", list, "not_shown",
                         (json_int_t)more);
}

static json_t *do_take(struct inbox *ib, const hd_consume_opts *copts, const json_t *doc)
{
        const char *id = json_string_value(json_object_get(doc, "id"));
        _cleanup_json_ json_t *b = NULL;
        hd_verdict v = { 0 };
        int r;

        if (id && !hd_id_valid(id))
                return refusal(EINVAL, "not a handoff_id");
        if (ib->fd < 0)
                return refusal(ENOTDIR, "no handoffs/ (yet)");
        r = hd_consume_with(ib->fd, id, copts, hd_now_usec(), &b, &v);
        if (r == -EBADMSG)
                return json_pack("{s:b, s:i, s:s, s:s, s:s}", "ok", 0, "errno", EBADMSG,
                                 "error", strerror(EBADMSG), "reason", hd_reason_name(v.reason),
                                 "detail", v.detail);
        if (r < 0)
                return refusal(-r, strerror(-r));
        return json_pack("{s:b, s:O}", "ok", 1, "bootstrap", b);
}

/* What the resource of id shows: the bootstrap a take would give. */
static json_t *do_peek(struct inbox *ib, const hd_consume_opts *copts, const json_t *doc)
{
        const char *id = json_string_value(json_object_get(doc, "id"));
        _cleanup_json_ json_t *b = NULL;
        char name[NAME_MAX + 1];
        hd_verdict v = { 0 };
        int r;

        if (!id || !hd_id_valid(id) || hd_bootstrap_name(id, name, sizeof(name)) < 0)
                return refusal(EINVAL, "not a handoff_id");
        if (ib->fd < 0)
                return refusal(ENOTDIR, "no handoffs/ (yet)");
        r = hd_consume_peek(ib->fd, name, copts, hd_now_usec(), &b, &v);
        if (r < 0)
                return refusal(-r, r == -EBADMSG ? v.detail : strerror(-r));
        return json_pack("{s:b, s:O}", "ok", 1, "bootstrap", b);
}

static json_t *do_complete(const struct parts *p, struct inbox *ib, const char *agent,
                           const json_t *doc)
{
        const char *id = json_string_value(json_object_get(doc, "id"));
        const json_t *rj = json_object_get(doc, "result");
        const hd_key *k = config_key_lookup(p->sp->cfg, NULL, agent);
        hd_result res = {
                .text = json_string_value(json_object_get(rj, "text")),
                .data = json_object_get(rj, "data"),
                .failed = json_string_value(json_object_get(rj, "failed")),
                .input_required = json_string_value(json_object_get(rj, "input_required")),
        };
        struct complete_out out;

        if (!id || !hd_id_valid(id) || !json_is_object(rj))
                return refusal(EINVAL, "a handoff_id and a result are required");
        /* The result is signed as the agent's, with the key the daemon
         * checks it with: an agent that must sign (require = sig) has no
         * key here that may. */
        if (!k || hd_key_kind_of(k) != HD_KEY_HMAC)
                return refusal(EPERM, "the daemon holds no key that signs for this agent "
                               "(require = sig: only the agent holds its secret key; use "
                               "handoffctl complete on the spool's host)");
        if (ib->fd < 0)
                return refusal(ENOTDIR, "no handoffs/: this agent consumed nothing");
        complete_write(ib->dir, ib->fd, id, agent, &res, k, p->sp->cfg->fsync, &out);
        return json_pack("{s:b, s:i, s:s}", "ok", 1, "code", out.code, "msg", out.msg);
}

static json_t *do_complete_word(struct inbox *ib, const json_t *doc)
{
        const char *id = json_string_value(json_object_get(doc, "id"));
        const char *status = json_string_value(json_object_get(doc, "status"));
        struct complete_out out;

        if (!id || !hd_id_valid(id) || !status)
                return refusal(EINVAL, "a handoff_id and a status are required");
        if (ib->fd >= 0 && !complete_taken(ib->fd, id))
                return json_pack("{s:b, s:b}", "ok", 1, "taken", 0);
        if (ib->fd < 0)
                return json_pack("{s:b, s:b, s:i, s:s}", "ok", 1, "taken", 1, "code", AG_OK,
                                 "msg", "");
        complete_answer(ib->dir, ib->fd, id, status, &out);
        return json_pack("{s:b, s:b, s:i, s:s}", "ok", 1, "taken", 1, "code", out.code,
                         "msg", out.msg);
}

static json_t *do_stamp(struct inbox *ib)
{
        struct stat st;
        char s[64] = "";

        if (ib->fd >= 0 && fstat(ib->fd, &st) == 0)
                snprintf(s, sizeof(s), "%lld.%09ld", (long long)st.st_mtim.tv_sec,
                         st.st_mtim.tv_nsec);
        return json_pack("{s:b, s:s}", "ok", 1, "stamp", s);
}

bool control_agent_command(const struct parts *p, const char *cmd, const json_t *doc,
                           bool agent_peer, json_t **ret)
{
        static const char *const cmds[] = { "inbox", "take", "peek", "complete",
                                            "complete_word", "stamp" };
        hd_consume_opts copts;
        struct inbox ib;
        size_t i;

        for (i = 0; i < ELEMENTSOF(cmds); i++)
                if (!strcmp(cmd, cmds[i]))
                        break;
        if (i == ELEMENTSOF(cmds))
                return false;
        if (!agent_peer) {
                *ret = refusal(EPERM, "only [control] hub_user (or root, or the daemon's "
                               "user) may act for an agent");
                return true;
        }
        if (!agent_inbox(p, doc, &ib, &copts, ret))
                return true;
        if (!strcmp(cmd, "inbox"))
                *ret = do_inbox(&ib);
        else if (!strcmp(cmd, "take"))
                *ret = do_take(&ib, &copts, doc);
        else if (!strcmp(cmd, "peek"))
                *ret = do_peek(&ib, &copts, doc);
        else if (!strcmp(cmd, "complete"))
                *ret = do_complete(p, &ib, copts.agent, doc);
        else if (!strcmp(cmd, "complete_word"))
                *ret = do_complete_word(&ib, doc);
        else
                *ret = do_stamp(&ib);
        inbox_done(&ib);
        return true;
}
