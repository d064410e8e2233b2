/* An earlier version's claimed items.  That version left the producer's
 * own file in claimed/ with a marker claimed/<id>.delivered; such an
 * item is verified before anything is done (the producer may have changed
 * it since its claim), then converted to a record at its first look
 * (item_legacy_convert()), or rejected as changed after its claim when it
 * no longer verifies (item_legacy_reject()). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "agents.h"
#include "deadline.h"
#include "delivery.h"
#include "files.h"
#include "intake.h"
#include "item_act.h"
#include "item_legacy.h"
#include "layout.h"
#include "log.h"
#include "parts.h"

/* One of our own small files (a marker), parsed. */
static int load_own(int dirfd, const char *name, size_t max, json_t **ret)
{
        hd_limits lim = { .max_size = max };
        hd_verdict v;

        return hd_load_at(dirfd, name, &lim, ret, &v);
}

int item_legacy_state(struct spool *sp, const char *id, int fd, struct stat *st,
                      struct item_files *f, enum item_state *ret)
{
        _cleanup_free_ char *buf = NULL;
        _cleanup_json_ json_t *doc = NULL;
        hd_limits lim = { .max_size = sp->cfg->max_file_size, .max_depth = HD_DEFAULT_MAX_DEPTH };
        size_t len;
        bool readable;
        int r;

        f->legacy = true;
        handoff_clear(&f->h);
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        r = read_fd_stat(fd, st, id, sp->cfg->max_file_size, &buf, &len, &f->v);
        if (r == -EBADMSG && f->v.reason == HD_R_HARDLINK) {
                /* Its other link a claim left in handoff/, its archive,
                 * or a producer's tmp/ name a power cut kept: not
                 * tampering. */
                char name[NAME_MAX + 1];
                if (store_drop_archived_leftover(sp, id)) {
                        *ret = IS_GONE;
                        return 0;
                }
                if (xsnprintf(name, sizeof(name), "%s.json", id) >= 0 &&
                    (store_drop_id_leftover(sp, name, id) || store_drop_claim_leftover(sp, name) ||
                     store_drop_tmp_twin(sp, SD_CLAIMED, name))) {
                        if (fstat(fd, st) < 0)
                                return -errno;
                        r = read_fd_stat(fd, st, id, sp->cfg->max_file_size, &buf, &len, &f->v);
                }
        }
        if (r == -ENOENT) {
                *ret = IS_GONE;
                return 0;
        }
        if (r < 0 && r != -EBADMSG)
                return r;
        readable = r == 0 && (r = hd_parse(buf, len, &lim, &doc, &f->v)) == 0;
        if (r < 0 && r != -EBADMSG)
                return r;
        /* Not authenticated yet: only says whose item it may be. */
        f->a = spool_agent(sp, readable ? handoff_unverified_to(doc) : NULL);
        if (!f->a && readable) {
                *ret = IS_NOT_OURS;     /* served by another daemon (or no more) */
                return 0;
        }
        /* Unreadable now: whose it was is lost with its bytes.  The
         * bootstrap name tells, if one of our agents has one. */
        for (size_t i = 0; i < sp->n_agents && !f->a; i++)
                if (spool_exists_at(sp->agents[i].handoffs_fd, f->bname) ||
                    spool_exists_at(sp->agents[i].handoffs_fd, f->pname))
                        f->a = &sp->agents[i];
        if (!f->a) {
                *ret = IS_NOT_OURS;
                return 0;
        }
        if (!readable || intake_verify_claimed(sp, doc, id, &f->h, &f->v) < 0) {
                *ret = IS_TAMPERED;
                return 0;
        }
        r = load_own(sp->fd[SD_CLAIMED], f->mname, 65536, &f->marker);
        if (r == -EBADMSG) {
                /* Being there is what says the bootstrap may have been seen. */
                f->marker = json_object();
                if (!f->marker)
                        return -ENOMEM;
        } else if (r < 0 && r != -ENOENT) {
                return r;
        }
        *ret = IS_LEGACY;      /* the caller reads f->files */
        return 0;
}

/* No longer verifies: nothing of it may reach the agent from now on.  A
 * bootstrap not yet taken is withdrawn, the marker and a hidden bootstrap
 * go, and the item ends in rejected/ with the reason. */
int item_legacy_reject(struct parts *p, struct item_files *f, int64_t now)
{
        struct spool *sp = p->sp;
        struct agent_rt *a = f->a;
        char detail[HD_DETAIL_MAX + 64], q[300];
        int r;

        log_warning("Claimed item %s no longer verifies (%s: %s): not delivered",
                    log_quote(f->id, q, sizeof(q)), hd_reason_name(f->v.reason), f->v.detail);
        r = store_boot_rename(sp, a, f->bname, f->xname);
        if (r == 0 || r == -ENOENT)
                (void) store_boot_remove(sp, a, f->xname);
        (void) store_boot_remove(sp, a, f->pname);
        snprintf(detail, sizeof(detail), "changed after its claim: %s", f->v.detail);
        r = store_reject_claimed(sp, f->id, f->v.reason, detail, now, NULL);
        if (r < 0)
                return r;
        (void) store_remove(sp, SD_CLAIMED, f->mname);
        dict_del(&p->delivery->failed, f->id);
        return 0;
}

/* A verified legacy item becomes a record.  Its bootstrap, which the
 * daemon built from the bytes verified at the claim, replaces the
 * producer's file in one rename, and the marker goes after.  An item
 * never made visible (no marker, no published bootstrap) is delivered
 * as new; one marked and taken is archived as it is. */
int item_legacy_convert(struct parts *p, struct item_files *f, int64_t now)
{
        struct spool *sp = p->sp;
        const char *src = (f->files & F_EXPIRE) ? f->xname : (f->files & F_BOOT) ? f->bname :
                          (f->files & F_PENDING) ? f->pname : NULL;
        int r;

        if (!f->marker && !(f->files & F_BOOT)) {
                (void) store_boot_remove(sp, f->a, f->xname);
                r = delivery_run(p, f->a, &f->h, now, true);
                if (r == -EAGAIN) {     /* the baton lock: soon again */
                        deadline_note(&p->deadline, now + 100000);
                        return 0;
                }
                if (r < 0)
                        return r;
                sp->st.recovered++;
                log_decision(LOG_NOTICE, f->id, f->a->cfg->name, "recovered", NULL,
                             "Delivered %s to %s after a restart (claimed by an earlier "
                             "version, never delivered)", f->id, f->a->cfg->name);
                return 0;
        }
        if (!src)
                return item_act_archive_consumed(p, f, now);
        r = delivery_record_from(p, f->a, f->id, src);
        if (r < 0)
                return r;
        r = store_flush(sp);
        if (r < 0)
                return r;
        (void) store_remove(sp, SD_CLAIMED, f->mname);
        log_info("Converted claimed item %s of an earlier version to a record", f->id);
        /* Looked at again as a record at once. */
        deadline_note(&p->deadline, now);
        return 0;
}
