/* Lifecycle after the claim (DESIGN.md "Lifecycle after claim" and
 * "Durability and recovery").  A claimed item is claimed/<id>.json; once
 * its bootstrap is written, claimed/<id>.delivered records where and when.
 *
 *   no marker, no bootstrap  -> deliver (again: the at-least-once window)
 *   no marker, bootstrap     -> write the marker (crash after delivery)
 *   marker, no bootstrap     -> consumed: archive
 *   marker, bootstrap, late  -> expire: take the bootstrap, archive
 *
 * Every step holds the lock of the id (lock.h), as the claimer does, so
 * two daemons never act on one item at once; a busy item is looked at
 * again later, never waited for.  The content of claimed/<id>.json is
 * verified again each time it is read: the producer still owns that inode
 * and may have rewritten it since the claim. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "delivery.h"
#include "files.h"
#include "intake.h"
#include "lifecycle.h"
#include "lock.h"
#include "log.h"
#include "metrics.h"
#include "retention.h"

#define BUSY_RETRY_USEC 1000000LL

/* One of our own small files (a marker, a bootstrap), parsed. */
static int load_own(int dirfd, const char *name, size_t max, json_t **ret)
{
        hd_limits lim = { .max_size = max };
        hd_verdict v;

        return hd_load_at(dirfd, name, &lim, ret, &v);
}

/* A consumer has renamed the bootstrap to its private name and is reading
 * it: the item is not consumed until that name is gone too. */
static bool consume_in_progress(struct agent_rt *a, const char *bname)
{
        struct dirent *de;
        bool found = false;
        size_t bl = strlen(bname);
        DIR *d;

        d = opendir_at(a->handoffs_fd);
        if (!d)
                return false;
        while (!found && (de = readdir(d))) {
                size_t l = strlen(de->d_name);
                found = !strncmp(de->d_name, ".consume.", 9) && l > bl &&
                        !strcmp(de->d_name + l - bl, bname);
        }
        closedir(d);
        return found;
}

static int write_marker(struct spool *sp, const char *mname, json_t *m)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r;

        r = hd_canon_dump(m, NULL, &buf, &len);
        if (r < 0)
                return r;
        r = hd_write_atomic(sp->fd[SD_CLAIMED], mname, buf, len, 0640, false);
        if (r == 0)
                sp->dirty[SD_CLAIMED] = true;
        return r;
}

/* Whether id already names the two agents: "FROM-TO-..." or, as the real
 * writer makes them, "UNIXTIME-FROM-TO-...". */
static bool id_names_agents(const char *id, const char *from, const char *to)
{
        size_t lf = strlen(from), lt = strlen(to);

        if (isdigit((unsigned char)*id)) {
                const char *p = id + strspn(id, "0123456789");
                if (*p == '-' && !strncmp(p + 1, from, lf) && p[1 + lf] == '-' &&
                    !strncmp(p + 2 + lf, to, lt) && p[2 + lf + lt] == '-')
                        return true;
        }
        return !strncmp(id, from, lf) && id[lf] == '-' && !strncmp(id + lf + 1, to, lt) &&
               id[lf + 1 + lt] == '-';
}

/* Move claimed/<id>.json to archive/ with its .outcome.  The archive name
 * (the real implementation's "{unix_ts}-{from}-{to}-{id}.json", ts = when
 * it ended; "{unix_ts}-{id}.json" when the id already names from and to)
 * is chosen once and kept in the marker first, so a crash in the middle
 * and the retry after it end with one name and one sidecar. */
static int archive(struct spool *sp, const char *id, const json_t *doc, json_t *marker,
                   const char *mname, const char *outcome, int64_t now)
{
        const char *from = json_string_value(json_object_get(doc, "from_agent"));
        const char *to = json_string_value(json_object_get(doc, "to_agent"));
        const char *acc = json_string_value(json_object_get(marker, "accepted_at"));
        const char *name = json_string_value(json_object_get(marker, "archive_as"));
        char fresh[NAME_MAX + 1], side[NAME_MAX + 16], src[NAME_MAX + 1], at[HD_TIME_MAX];
        _cleanup_free_ char *buf = NULL;
        json_t *o;
        size_t len;
        int r;

        if (!name || !hd_name_safe(name)) {
                struct stat st;
                for (unsigned n = 0;; n++) {
                        if (n >= 100)
                                return -EEXIST;
                        if (from && to && id_names_agents(id, from, to))
                                snprintf(fresh, sizeof(fresh), n ? "%lld-%s~%u.json" : "%lld-%s.json",
                                         (long long)(now / 1000000), id, n);
                        else
                                snprintf(fresh, sizeof(fresh),
                                         n ? "%lld-%s-%s-%s~%u.json" : "%lld-%s-%s-%s.json",
                                         (long long)(now / 1000000), from ? from : "unknown",
                                         to ? to : "unknown", id, n);
                        if (fstatat(sp->fd[SD_ARCHIVE], fresh, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                break;
                }
                name = fresh;
                json_object_set_new(marker, "archive_as", json_string(fresh));
                json_object_set_new(marker, "outcome", json_string(outcome));
                r = write_marker(sp, mname, marker);
                if (r < 0)
                        return r;
        } else {
                /* A retry: the outcome decided first stands. */
                const char *o0 = json_string_value(json_object_get(marker, "outcome"));
                if (o0 && (!strcmp(o0, "consumed") || !strcmp(o0, "expired")))
                        outcome = o0;
        }
        hd_time_format(now, at, sizeof(at));
        snprintf(side, sizeof(side), "%s.outcome", name);
        snprintf(src, sizeof(src), "%s.json", id);
        o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "handoff_id", id, "outcome", outcome,
                      "from_agent", from ? from : "", "to_agent", to ? to : "",
                      "archived_at", at, "accepted_at", acc ? acc : "");
        if (!o)
                return -ENOMEM;
        r = hd_canon_dump(o, NULL, &buf, &len);
        json_decref(o);
        if (r < 0)
                return r;
        /* Outcome first: an archived item always says how it ended.  And
         * the id is remembered before the item leaves claimed/, so a
         * replay is recognised at every moment. */
        r = hd_write_atomic(sp->fd[SD_ARCHIVE], side, buf, len, 0640, false);
        if (r < 0)
                return r;
        r = spool_id_mark(sp, id);
        if (r < 0)
                return r;
        r = move_noreplace(sp->fd[SD_CLAIMED], src, sp->fd[SD_ARCHIVE], name);
        if (r < 0)
                return r == -ENOENT ? 0 : r;    /* another daemon archived it */
        unlinkat(sp->fd[SD_CLAIMED], mname, 0);
        sp->dirty[SD_ARCHIVE] = sp->dirty[SD_CLAIMED] = true;
        if (!strcmp(outcome, "consumed"))
                sp->st.consumed++;
        else
                sp->st.expired++;
        log_decision(LOG_INFO, id, to, outcome, NULL, "Archived %s as %s", id, outcome);
        return 1;
}

static bool exists_at(int dirfd, const char *name)
{
        struct stat st;
        return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A claimed item that no longer verifies: nothing of it may reach the
 * agent from now on.  A bootstrap not yet taken is withdrawn (it was built
 * from the verified bytes, but the item's record is gone), the marker and
 * a hidden bootstrap go, and the item ends in rejected/ with the reason. */
static int reject_tampered(struct spool *sp, struct agent_rt *a, const char *id,
                           const char *bname, const char *pname, const char *xname,
                           const hd_verdict *v, int64_t now)
{
        char mname[NAME_MAX + 1], detail[HD_DETAIL_MAX + 64];
        int r;

        if (renameat(a->handoffs_fd, bname, a->handoffs_fd, xname) == 0 || errno == ENOENT)
                unlinkat(a->handoffs_fd, xname, 0);
        unlinkat(a->handoffs_fd, pname, 0);
        a->dirty = true;
        snprintf(detail, sizeof(detail), "changed after its claim: %s", v->detail);
        r = spool_reject_claimed(sp, id, v->reason, detail, now);
        if (r < 0)
                return r;
        snprintf(mname, sizeof(mname), "%s.delivered", id);
        if (unlinkat(sp->fd[SD_CLAIMED], mname, 0) == 0)
                sp->dirty[SD_CLAIMED] = true;
        json_object_del(sp->failed, id);
        return 0;
}

static int check_locked(struct spool *sp, const char *id, int fd, int64_t now)
{
        _cleanup_json_ json_t *doc = NULL, *marker = NULL;
        _cleanup_free_ char *buf = NULL;
        char bname[NAME_MAX + 1], mname[NAME_MAX + 1], pname[NAME_MAX + 1];
        char xname[NAME_MAX + 16];
        const char *to, *acc;
        struct agent_rt *a;
        hd_verdict v;
        int64_t accepted;
        size_t len;
        int r;

        hd_limits lim = { .max_size = sp->cfg->max_file_size, .max_depth = HD_DEFAULT_MAX_DEPTH };
        bool readable;

        r = hd_read_fd(fd, id, sp->cfg->max_file_size, &buf, &len, &v);
        if (r == -ENOENT)
                return 0;       /* archived by another daemon since our open */
        if (r < 0 && r != -EBADMSG)
                return r;
        readable = r == 0 && (r = hd_parse(buf, len, &lim, &doc, &v)) == 0;
        if (r < 0 && r != -EBADMSG)
                return r;
        free(TAKE_PTR(buf));
        /* Not authenticated yet: only says whose item it may be. */
        to = readable ? json_string_value(json_object_get(doc, "to_agent")) : NULL;
        a = spool_agent(sp, to);
        if (!a && readable)
                return 0;       /* served by another daemon (or no more) */
        if (!a) {
                /* Unreadable now: whose it was is lost with its bytes.
                 * The bootstrap name tells, if one of our agents has one. */
                r = hd_bootstrap_name(id, bname, sizeof(bname));
                if (r < 0)
                        return r;
                for (size_t i = 0; i < sp->n_agents && !a; i++) {
                        char pn[NAME_MAX + 1];
                        if (delivery_pending_name(bname, pn, sizeof(pn)) == 0 &&
                            (exists_at(sp->agents[i].handoffs_fd, bname) ||
                             exists_at(sp->agents[i].handoffs_fd, pn)))
                                a = &sp->agents[i];
                }
                if (!a)
                        return 0;
        }
        r = hd_bootstrap_name(id, bname, sizeof(bname));
        if (r == 0)
                r = delivery_pending_name(bname, pname, sizeof(pname));
        if (r < 0)
                return r;
        snprintf(xname, sizeof(xname), ".expire.%s", bname);
        if (!readable || intake_verify_claimed(sp, doc, id, &v) < 0) {
                char q[300];
                log_warning("Claimed item %s no longer verifies (%s: %s): not delivered",
                            log_quote(id, q, sizeof(q)), hd_reason_name(v.reason), v.detail);
                return reject_tampered(sp, a, id, bname, pname, xname, &v, now);
        }
        snprintf(mname, sizeof(mname), "%s.delivered", id);
        r = load_own(sp->fd[SD_CLAIMED], mname, 65536, &marker);
        if (r == -EBADMSG) {
                /* Its name is synced, its bytes are not (one fsync less per
                 * item): after a power loss it may be empty.  Being there is
                 * what says the bootstrap may have been seen. */
                marker = json_object();
                if (!marker)
                        return -ENOMEM;
        } else if (r < 0 && r != -ENOENT) {
                return r;
        }
        bool have_boot = exists_at(a->handoffs_fd, bname);
        bool have_pending = exists_at(a->handoffs_fd, pname);
        bool have_expire = exists_at(a->handoffs_fd, xname);

        if (!marker) {
                if (have_boot) {
                        /* Published by a version that wrote no marker
                         * first: record it as it is. */
                        _cleanup_json_ json_t *boot = NULL;
                        load_own(a->handoffs_fd, bname, sp->cfg->max_file_size, &boot);
                        acc = boot ? json_string_value(json_object_get(boot, "accepted_at")) : NULL;
                        if (!acc || hd_time_parse(acc, &accepted) < 0)
                                accepted = now;
                        r = delivery_mark(sp, a, id, accepted);
                        return r < 0 ? r : spool_flush(sp);
                }
                /* Never visible to the agent: deliver it (the first time,
                 * as far as the agent can tell). */
                bool retry = json_object_get(sp->failed, id) != NULL;
                r = delivery_run(sp, a, doc, now);
                if (r == -EAGAIN) {     /* the baton lock: soon again */
                        deadline_note(&sp->deadline, now + 100000);
                        return 0;
                }
                if (r < 0)
                        return r;
                json_object_del(sp->failed, id);
                if (retry)
                        sp->st.retried++;
                else
                        sp->st.recovered++;
                log_decision(LOG_NOTICE, id, a->cfg->name, retry ? "retried" : "recovered", NULL,
                             "Delivered %s to %s %s", id, a->cfg->name,
                             retry ? "after an earlier failure" : "after a restart (it was claimed, never delivered)");
                return 0;
        }

        acc = json_string_value(json_object_get(marker, "accepted_at"));
        if (!acc || hd_time_parse(acc, &accepted) < 0)
                accepted = now;
        if (!have_boot && have_pending && !have_expire) {
                /* The marker is on disk, the publish was not done. */
                r = delivery_publish(sp, a, id);
                if (r < 0)
                        return r;
                json_object_del(sp->failed, id);
                sp->st.recovered++;
                log_decision(LOG_NOTICE, id, a->cfg->name, "recovered", NULL,
                             "Published %s to %s after a restart or failure", id, a->cfg->name);
                return spool_flush(sp);
        }
        if (have_expire) {
                /* An expiry that was cut short: finish it. */
                if (have_boot)
                        unlinkat(a->handoffs_fd, bname, 0);
                r = archive(sp, id, doc, marker, mname, "expired", now);
                if (r >= 0)
                        unlinkat(a->handoffs_fd, xname, 0);
                return r;
        }
        if (!have_boot) {
                if (consume_in_progress(a, bname)) {
                        deadline_note(&sp->deadline, now + BUSY_RETRY_USEC);
                        return 0;
                }
                return archive(sp, id, doc, marker, mname, "consumed", now);
        }
        int64_t deadline = accepted + sp->cfg->resume_window * 1000000LL;
        if (now < deadline) {
                deadline_note(&sp->deadline, deadline);
                return 0;
        }
        /* Take the bootstrap as a consumer would, so a consumer racing us
         * either got it (consumed) or finds nothing.  The taken name is
         * also the record of the expiry, should we die before the end. */
        if (renameat(a->handoffs_fd, bname, a->handoffs_fd, xname) < 0) {
                if (errno != ENOENT)
                        return -errno;
                return archive(sp, id, doc, marker, mname, "consumed", now);
        }
        r = archive(sp, id, doc, marker, mname, "expired", now);
        if (r < 0)
                return r;       /* .expire.NAME tells the retry */
        unlinkat(a->handoffs_fd, xname, 0);
        a->dirty = true;
        return r;
}

int lifecycle_check(struct spool *sp, const char *id, int64_t now)
{
        char name[NAME_MAX + 1];
        _cleanup_close_ int fd = -1;
        uint64_t off;
        hd_verdict v;
        int r;

        if (!hd_id_valid(id))
                return 0;
        snprintf(name, sizeof(name), "%s.json", id);
        off = lock_off_id(id);
        r = lock_try(sp->lock_fd, off, true);
        if (r == -EAGAIN) {
                deadline_note(&sp->deadline, now + BUSY_RETRY_USEC);
                return 0;
        }
        if (r < 0)
                return r;
        /* Opened under the lock: what another daemon finished before it
         * is no longer here. */
        r = hd_open_at(sp->fd[SD_CLAIMED], name, &fd, &v);
        if (r == 0)
                r = check_locked(sp, id, fd, now);
        else if (r == -EBADMSG) {
                /* A claimed name that is no regular file: not something we
                 * claimed (its id stays remembered). */
                r = spool_reject_claimed(sp, id, v.reason, v.detail, now);
        } else if (r == -ENOENT)
                r = 0;
        lock_release(sp->lock_fd, off);
        return r;
}

int lifecycle_bootstrap_gone(struct spool *sp, struct agent_rt *a,
                             const char *name, int64_t now)
{
        char id[NAME_MAX + 1];
        size_t l = strlen(name);
        int r;

        (void)a;
        /* A consumer that took NAME by renaming it to .consume.PID.RAND.NAME
         * (hd_consume) has now deleted that: look at NAME's item at once,
         * rather than at the next sweep. */
        if (!strncmp(name, ".consume.", 9)) {
                const char *p = strchr(name + 9, '.');
                p = p ? strchr(p + 1, '.') : NULL;
                if (!p)
                        return 0;
                name = p + 1;
                l = strlen(name);
        }
        /* A valid id's bootstrap name is the id plus ".json". */
        if (name[0] == '.' || l < 6 || l - 5 >= sizeof(id) || strcmp(name + l - 5, ".json"))
                return 0;
        memcpy(id, name, l - 5);
        id[l - 5] = '\0';
        r = lifecycle_check(sp, id, now);
        spool_flush(sp);
        return r;
}

/* Our own temp files (".NAME.XXXXXX" from hd_write_atomic) left in a
 * directory by a crash, at start.  When another daemon runs on the same
 * spool it may be writing one right now: then only those a minute old. */
#define TEMP_MIN_AGE_S 60
static void remove_temps(int dirfd, bool sole)
{
        struct dirent *de;
        DIR *d;

        d = opendir_at(dirfd);
        if (!d)
                return;
        while ((de = readdir(d))) {
                const char *n = de->d_name;
                if (n[0] != '.' || !strcmp(n, ".") || !strcmp(n, ".."))
                        continue;
                if (!strncmp(n, ".consume.", 9))
                        continue;       /* a consumer's, not ours */
                /* Records of deliveries and expiries in flight: the sweep
                 * reads and finishes them (or removes them as orphans). */
                if (!strncmp(n, ".pending.", 9) || !strncmp(n, ".expire.", 8))
                        continue;
                struct stat st;
                if (fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    (!sole && st.st_mtime > time(NULL) - TEMP_MIN_AGE_S))
                        continue;
                if (unlinkat(dirfd, n, 0) == 0)
                        log_info("Removed temp file '%s' left by a crash", n);
        }
        closedir(d);
}

/* .pending.NAME and .expire.NAME whose item is no longer claimed (a crash
 * after the archive, before the unlink). */
static void remove_orphans(struct spool *sp, struct agent_rt *a)
{
        struct dirent *de;
        DIR *d;

        d = opendir_at(a->handoffs_fd);
        if (!d)
                return;
        while ((de = readdir(d))) {
                const char *n = de->d_name, *base;
                char claimed[NAME_MAX + 1];
                if (!strncmp(n, ".pending.", 9))
                        base = n + 9;
                else if (!strncmp(n, ".expire.", 8))
                        base = n + 8;
                else
                        continue;
                /* The bootstrap name is the id + ".json", the claimed name too. */
                if (xsnprintf(claimed, sizeof(claimed), "%s", base) < 0 || exists_at(sp->fd[SD_CLAIMED], claimed))
                        continue;
                if (unlinkat(a->handoffs_fd, n, 0) == 0)
                        log_info("Removed '%s', left by a crash after its item was archived", n);
        }
        closedir(d);
}

int lifecycle_sweep(struct spool *sp, int64_t now, bool at_start)
{
        json_t *set = json_object(), *v;
        const char *k;
        int r, first = 0;

        if (!set)
                return -ENOMEM;
        if (at_start) {
                static const int dirs[] = { SD_CLAIMED, SD_ARCHIVE, SD_REJECTED, SD_IDS, SD_BATON };
                /* Every daemon holds its running byte shared while it
                 * runs; getting it exclusively means we are alone.  Another
                 * daemon holds it exclusively only for this instant. */
                bool sole = lock_try(sp->lock_fd, LOCK_OFF_RUNNING, true) == 0;
                for (int i = 0; i < 100; i++) {
                        if (lock_try(sp->lock_fd, LOCK_OFF_RUNNING, false) != -EAGAIN)
                                break;
                        usleep(1000);
                }
                for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
                        remove_temps(sp->fd[dirs[i]], sole);
                for (size_t i = 0; i < sp->n_agents; i++)
                        remove_temps(sp->agents[i].handoffs_fd, sole);
        }
        deadline_reset(&sp->deadline);
        r = spool_list(sp, SD_CLAIMED, set);
        if (r == 0 && at_start)
                for (size_t i = 0; i < sp->n_agents; i++)
                        remove_orphans(sp, &sp->agents[i]);
        if (r < 0)
                goto out;
        json_object_foreach(set, k, v) {
                size_t l = strlen(k);
                char id[NAME_MAX + 1];
                if (l > 10 && !strcmp(k + l - 10, ".delivered") && l - 10 < sizeof(id)) {
                        /* A marker outlives its item only when the archive
                         * was cut short after the move: it is done with. */
                        char item[NAME_MAX + 1];
                        snprintf(item, sizeof(item), "%.*s.json", (int)(l - 10), k);
                        if (!exists_at(sp->fd[SD_CLAIMED], item) &&
                            unlinkat(sp->fd[SD_CLAIMED], k, 0) == 0)
                                sp->dirty[SD_CLAIMED] = true;
                        continue;
                }
                if (l < 6 || strcmp(k + l - 5, ".json") || l - 5 >= sizeof(id))
                        continue;
                memcpy(id, k, l - 5);
                id[l - 5] = '\0';
                int q = lifecycle_check(sp, id, now);
                if (q < 0 && first == 0) {
                        first = q;
                        spool_error(sp, q, "Cannot finish claimed item %s", id);
                        log_error_errno(q, "Cannot finish claimed item %s", id);
                }
        }
        intake_foreign_due(sp, now);
        /* Sweeps also come at every deadline; retention and metrics list
         * whole directories, so they run at most once per rescan_interval. */
        if (at_start || now - sp->housekeeping_at >= sp->cfg->rescan_interval * 1000000LL) {
                sp->housekeeping_at = now;
                retention_run(sp, now);
                int q = metrics_write(sp, now);
                if (q < 0)
                        log_warning_errno(q, "Cannot write the metrics textfile %s",
                                          sp->cfg->metrics_textfile);
        }
        r = spool_flush(sp);
        if (r < 0)
                spool_error(sp, r, "Cannot fsync the spool");
out:
        json_decref(set);
        return first ? first : r;
}
