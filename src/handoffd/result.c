/* Agents' results (DESIGN.md "A2A"; handoffd(8), RESULTS): the word of
 * the agent that consumed a handoff on what came of it.
 *
 * The agent writes its signed result (hd_complete()) as .result.<id> into
 * its own handoffs/: the one directory it may write that the daemon
 * already watches, whose permissions already say who the agent is (they
 * are what a consume trusts).  archive/ stays the daemon's alone: a
 * result reaches it as a file the daemon wrote, archive/NAME.result
 * beside the item, after the daemon read it with the spool's limits,
 * verified it as a document from that agent (its own key where it has
 * one, hd_result_check()) and found that agent's consumed item of that
 * id.  The first result stands.  A refusal is .refused.<id> in the same
 * directory (the reason and a detail), so that the agent learns why.
 *
 * A result is looked at when it arrives (inotify), when its item is
 * archived (one written between the consume and the archive), and by the
 * sweep (inotify is a hint).  Every look holds the lock of the id, as the
 * archive does.  Durable as the outcome: NAME.result synced with
 * archive/ before the agent's file goes, so a crash between leaves the
 * agent's file, which the next look finds recorded already. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "delivery.h"
#include "files.h"
#include "layout.h"
#include "lifecycle.h"
#include "lock.h"
#include "log.h"
#include "result.h"
#include "verified.h"

#define RESULT_RETRY_USEC 1000000LL

static const char *const refusal_names[_RR_MAX] = {
        [RR_NOT_CONSUMED] = "not_consumed",
        [RR_ALREADY_COMPLETED] = "already_completed",
};

const char *result_refusal_name(enum result_refusal r)
{
        return (unsigned)r < _RR_MAX ? refusal_names[r] : NULL;
}

/* Tell the agent why (.refused.<id>, written before its result goes:
 * whoever waits for the result to go finds the refusal there), and
 * remove its result. */
static int refuse(struct spool *sp, struct agent_rt *a, const char *id, const char *rname,
                  const char *reason, const char *detail, int64_t now)
{
        _cleanup_free_ char *buf = NULL;
        char fname[NAME_MAX + 1], at[HD_TIME_MAX], q[300];
        json_t *o;
        size_t len;
        int r;

        hd_time_format(now, at, sizeof(at));
        o = json_pack("{s:s, s:s, s:s, s:s}", "handoff_id", id, "reason", reason, "detail",
                      detail, "at", at);
        if (!o)
                return -ENOMEM;
        r = hd_canon_dump(o, NULL, &buf, &len);
        json_decref(o);
        if (r == 0)
                r = layout_prefixed(LAYOUT_REFUSED, id, fname, sizeof(fname));
        if (r == 0)
                r = write_atomic(a->handoffs_fd, fname, buf, len, 0640, 0);
        if (r < 0)
                return r;
        if (unlinkat(a->handoffs_fd, rname, 0) < 0 && errno == EISDIR)
                unlinkat(a->handoffs_fd, rname, AT_REMOVEDIR);
        sp->st.results_refused++;
        log_decision(LOG_WARNING, id, a->cfg->name, "result_refused", reason,
                     "Refused the result of %s from %s: %s: %s", id, a->cfg->name, reason,
                     log_quote(detail, q, sizeof(q)));
        return 0;
}

/* The newest item of id in archive/: its name and .outcome. */
static int find_archived(struct spool *sp, const char *id, char *name, size_t n, json_t **ret_side)
{
        hd_limits lim = { .max_size = 65536 };
        _cleanup_json_ json_t *best = NULL;
        int64_t best_t = INT64_MIN;
        struct dirent *de;
        DIR *d;

        d = opendir_at(sp->fd[SD_ARCHIVE]);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char sname[NAME_MAX + 16];
                json_t *side = NULL;
                hd_verdict v;
                int64_t t;

                if (de->d_name[0] == '.' || !layout_has_suffix(de->d_name, ".json") ||
                    !layout_archive_is(de->d_name, id) ||
                    layout_suffixed(de->d_name, LAYOUT_OUTCOME, sname, sizeof(sname)) < 0 ||
                    hd_load_at(sp->fd[SD_ARCHIVE], sname, &lim, &side, &v) < 0)
                        continue;
                const char *sid = json_string_value(json_object_get(side, "handoff_id"));
                const char *at = json_string_value(json_object_get(side, "archived_at"));
                if (!sid || strcmp(sid, id) || !at || hd_time_parse(at, &t) < 0 || t <= best_t ||
                    xsnprintf(name, n, "%s", de->d_name) < 0) {
                        json_decref(side);
                        continue;
                }
                json_decref(best);
                best = side;
                best_t = t;
        }
        closedir(d);
        if (!best)
                return -ENOENT;
        *ret_side = TAKE_PTR(best);
        return 0;
}

/* id is still in claimed/: refused when it is not a's or not taken yet;
 * else (a consume in progress, an archive not done) looked at again. */
static int while_claimed(struct spool *sp, struct agent_rt *a, const char *id,
                         const char *rname, int64_t now)
{
        char cname[NAME_MAX + 1], bname[NAME_MAX + 1], pname[NAME_MAX + 1], detail[200];
        _cleanup_close_ int fd = -1;
        _cleanup_json_ json_t *rec = NULL;
        struct stat st;
        int r;

        if (xsnprintf(cname, sizeof(cname), "%s.json", id) < 0)
                return -ENAMETOOLONG;
        fd = openat(sp->fd[SD_CLAIMED], cname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 1 : -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        rec = verified_lookup(sp, id, &st);
        if (!rec && delivery_record_read(sp, fd, &st, &rec) < 0)
                rec = NULL;     /* an earlier version's item: its archive decides */
        const char *to = json_string_value(json_object_get(rec, "to_agent"));
        if (to && strcmp(to, a->cfg->name)) {
                snprintf(detail, sizeof(detail), "%s was delivered to %s, not to %s", id, to,
                         a->cfg->name);
                return refuse(sp, a, id, rname, result_refusal_name(RR_NOT_CONSUMED), detail, now);
        }
        r = hd_bootstrap_name(id, bname, sizeof(bname));
        if (r == 0)
                r = delivery_pending_name(id, pname, sizeof(pname));
        if (r < 0)
                return r;
        if (spool_exists_at(a->handoffs_fd, bname) || spool_exists_at(a->handoffs_fd, pname)) {
                snprintf(detail, sizeof(detail), "%s is delivered and not taken yet: consume it "
                         "first", id);
                return refuse(sp, a, id, rname, result_refusal_name(RR_NOT_CONSUMED), detail, now);
        }
        sp->results_due = true;
        deadline_note(&sp->deadline, now + RESULT_RETRY_USEC);
        return 0;
}

/* Why the item archived as side is not one a's result may be given for,
 * into detail; NULL when it is. */
static const char *not_completable(const json_t *side, const char *agent, char *detail, size_t n)
{
        const char *outcome = json_string_value(json_object_get(side, "outcome")) ?: "?";
        const char *to = json_string_value(json_object_get(side, "to_agent")) ?: "";
        const char *id = json_string_value(json_object_get(side, "handoff_id")) ?: "?";

        if (strcmp(outcome, "relayed") && *to && strcmp(to, agent))
                snprintf(detail, n, "%s was for %s, not for %s", id, to, agent);
        else if (!strcmp(outcome, "relayed"))
                snprintf(detail, n, "%s was relayed to host %s: its agent reports there", id,
                         json_string_value(json_object_get(side, "relayed_to")) ?: "?");
        else if (strcmp(outcome, "consumed"))
                snprintf(detail, n, "%s was not consumed: archived as %s", id, outcome);
        else
                return NULL;
        return detail;
}

/* The result .result.<id> of a, the lock of id held; aname: its item's
 * archive name when known.  0 (nothing there, refused, or waits), 1
 * recorded, -errno (looked at again by the sweep). */
static int take_locked(struct spool *sp, struct agent_rt *a, const char *id, const char *aname,
                       int64_t now)
{
        hd_limits lim = { .max_size = HD_RESULT_MAX_SIZE, .max_depth = HD_DEFAULT_MAX_DEPTH };
        _cleanup_json_ json_t *doc = NULL, *side = NULL, *had = NULL, *env = NULL;
        _cleanup_free_ char *buf = NULL, *out = NULL;
        char rname[NAME_MAX + 1], found[NAME_MAX + 1], xname[NAME_MAX + 16], fname[NAME_MAX + 1];
        char detail[HD_DETAIL_MAX + 64], at[HD_TIME_MAX];
        const char *agent = a->cfg->name;
        size_t len;
        hd_verdict v;
        int r;

        r = hd_result_name(id, rname, sizeof(rname));
        if (r < 0)
                return r;
        r = hd_read_at(a->handoffs_fd, rname, HD_RESULT_MAX_SIZE, &buf, &len, &v);
        if (r == -ENOENT)
                return 0;
        if (r == 0)
                r = hd_parse(buf, len, &lim, &doc, &v);
        if (r == 0)
                r = hd_result_check(doc, id, agent, config_key_lookup, sp->cfg, &v);
        if (r == -EBADMSG)
                return refuse(sp, a, id, rname, hd_reason_name(v.reason), v.detail, now);
        if (r < 0)
                return r;
        if (!aname) {
                r = while_claimed(sp, a, id, rname, now);
                if (r <= 0)
                        return r;
                r = find_archived(sp, id, found, sizeof(found), &side);
                if (r == -ENOENT) {
                        snprintf(detail, sizeof(detail), "no item of %s is archived here "
                                 "(never delivered here, or pruned)", id);
                        return refuse(sp, a, id, rname, result_refusal_name(RR_NOT_CONSUMED),
                                      detail, now);
                }
                if (r < 0)
                        return r;
                if (not_completable(side, agent, detail, sizeof(detail)))
                        return refuse(sp, a, id, rname, result_refusal_name(RR_NOT_CONSUMED),
                                      detail, now);
                aname = found;
        }
        r = layout_suffixed(aname, LAYOUT_RESULT, xname, sizeof(xname));
        if (r < 0)
                return r;
        r = hd_load_at(sp->fd[SD_ARCHIVE], xname, &lim, &had, &v);
        if (r == 0) {
                /* Recorded, and a crash kept the agent's file: done. */
                if (json_equal(json_object_get(had, "result"), doc)) {
                        unlinkat(a->handoffs_fd, rname, 0);
                        return 0;
                }
                snprintf(detail, sizeof(detail), "%s has a result already, recorded at %s: the "
                         "first stands", id,
                         json_string_value(json_object_get(had, "recorded_at")) ?: "?");
                return refuse(sp, a, id, rname, result_refusal_name(RR_ALREADY_COMPLETED),
                              detail, now);
        }
        if (r != -ENOENT && r != -EBADMSG)
                return r;
        hd_time_format(now, at, sizeof(at));
        const char *status = json_string_value(json_object_get(doc, "status"));
        env = json_pack("{s:s, s:s, s:s, s:s, s:O}", "handoff_id", id, "agent", agent,
                        "status", status, "recorded_at", at, "result", doc);
        if (!env)
                return -ENOMEM;
        r = hd_canon_dump(env, NULL, &out, &len);
        if (r < 0)
                return r;
        r = write_atomic(sp->fd[SD_ARCHIVE], xname, out, len, 0640,
                         sp->cfg->fsync ? WRITE_SYNC_FILE : 0);
        if (r < 0)
                return r;
        sp->dirty[SD_ARCHIVE] = true;
        /* On disk with archive/ (and whatever the archive moved) before the
         * agent's file goes. */
        r = spool_flush(sp);
        if (r < 0)
                return r;
        unlinkat(a->handoffs_fd, rname, 0);
        if (layout_prefixed(LAYOUT_REFUSED, id, fname, sizeof(fname)) == 0)
                unlinkat(a->handoffs_fd, fname, 0);     /* an earlier try's */
        if (!strcmp(status, "failed"))
                sp->st.failed++;
        else
                sp->st.completed++;
        log_decision(LOG_INFO, id, agent, status, NULL, "Result of %s from %s: %s", id, agent,
                     status);
        return 1;
}

int result_archived_locked(struct spool *sp, struct agent_rt *a, const char *id,
                           const char *aname, int64_t now)
{
        char rname[NAME_MAX + 1];

        /* One look per archive: most items have no result waiting. */
        if (hd_result_name(id, rname, sizeof(rname)) < 0 || !spool_exists_at(a->handoffs_fd, rname))
                return 0;
        return take_locked(sp, a, id, aname, now);
}

int result_arrived(struct spool *sp, struct agent_rt *a, const char *name, int64_t now)
{
        const char *id;
        uint64_t off;
        int r;

        if (layout_classify(name) != LK_RESULT)
                return 0;
        id = name + strlen(LAYOUT_RESULT_IN);
        /* Not a name hd_complete() writes (an agent's own temp name, say):
         * not ours to touch. */
        if (!hd_id_valid(id))
                return 0;
        /* Its item consumed and not archived yet: archived now, which
         * takes the result (result_archived_locked()). */
        r = lifecycle_check(sp, id, now);
        if (r < 0)
                return r;
        off = lock_off_id(id);
        r = lock_try(sp->lock_fd, off, true);
        if (r == -EAGAIN) {
                sp->results_due = true;
                deadline_note(&sp->deadline, now + RESULT_RETRY_USEC);
                return 0;
        }
        if (r < 0)
                return r;
        r = take_locked(sp, a, id, NULL, now);
        lock_release(sp->lock_fd, off);
        /* What lifecycle_check() archived is synced as every look's is. */
        int q = spool_flush(sp);
        return r < 0 ? r : q;
}

void result_scan(struct spool *sp, int64_t now)
{
        sp->results_due = false;
        for (size_t i = 0; i < sp->n_agents; i++) {
                struct agent_rt *a = &sp->agents[i];
                struct dirent *de;
                DIR *d;

                d = opendir_at(a->handoffs_fd);
                if (!d)
                        continue;
                while ((de = readdir(d))) {
                        enum layout_kind k = layout_classify(de->d_name);
                        struct stat st;
                        int r;

                        if (k == LK_REFUSED) {
                                if (fstatat(a->handoffs_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                                    st.st_mtime < now / 1000000 - RESULT_REFUSED_KEEP_S)
                                        unlinkat(a->handoffs_fd, de->d_name, 0);
                                continue;
                        }
                        if (k != LK_RESULT)
                                continue;
                        r = result_arrived(sp, a, de->d_name, now);
                        if (r < 0) {
                                char q[300];
                                spool_error(sp, r, "Cannot take the result %s of agent %s",
                                            log_quote(de->d_name, q, sizeof(q)), a->cfg->name);
                        }
                }
                closedir(d);
        }
}
