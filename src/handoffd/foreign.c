/* The memory of what is left in handoff/ for agents not served here:
 * see foreign.h.  The entry and the bytes it counts change together. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "files.h"
#include "foreign.h"
#include "util.h"

static int64_t ctime_ns(const struct stat *st)
{
        return (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

/* Names get reused (the real writer's "{caller_hash}-{seq}.json"), so the
 * inode and ctime must match too. */
bool foreign_fresh(struct spool *sp, const char *name, int64_t now)
{
        const struct foreign_entry *e = dict_get(&sp->foreign, name);
        struct stat st;

        if (!e || e->again || e->expires < now)
                return false;
        if (fstatat(sp->fd[SD_HANDOFF], name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return false;
        return st.st_ino == e->ino && ctime_ns(&st) == e->ctime_ns;
}

void foreign_remove(struct spool *sp, struct foreign_entry *e)
{
        sp->foreign_bytes -= e->bytes <= sp->foreign_bytes ? e->bytes : sp->foreign_bytes;
        dict_remove(&sp->foreign, e);
}

static void foreign_drop(struct spool *sp, const char *name)
{
        struct foreign_entry *e = dict_get(&sp->foreign, name);

        if (e)
                foreign_remove(sp, e);
}

/* Put last in order, as a new entry: the one of the name there goes. */
static void foreign_put(struct spool *sp, const char *name, const struct foreign_entry *v)
{
        struct foreign_entry *e;

        foreign_drop(sp, name);
        e = dict_put(&sp->foreign, name, NULL);
        if (!e)
                return;
        *e = *v;
        sp->foreign_bytes += e->bytes;
}

void foreign_clear(struct spool *sp)
{
        dict_clear(&sp->foreign);
        sp->foreign_bytes = 0;
}

void foreign_note(struct spool *sp, const char *name, const struct stat *st, int64_t expires,
                  const char *to)
{
        struct foreign_entry e = {
                .expires = expires, .ino = st->st_ino, .ctime_ns = ctime_ns(st),
                .bytes = st_bytes(st),
        };

        snprintf(e.to, sizeof(e.to), "%s", to && hd_agent_valid(to) ? to : "(invalid)");
        foreign_put(sp, name, &e);
}

void foreign_again(struct spool *sp, const char *name, int64_t now)
{
        foreign_put(sp, name, &(struct foreign_entry){ .expires = now, .again = true });
}

/* Entries whose file is gone or replaced (another daemon claimed it, its
 * producer took it back) are let go before a refusal, a look at all of
 * them at most once a second. */
bool foreign_full(struct spool *sp, const char *name, uint64_t bytes)
{
        const struct config *c = sp->cfg;
        struct foreign_entry *v, *nx;

        if (!c->unclaimed_max_items && !c->unclaimed_max_bytes)
                return false;
        foreign_drop(sp, name);
        for (int pass = 0; pass < 2; pass++) {
                bool over = (c->unclaimed_max_items &&
                             dict_count(&sp->foreign) + 1 > c->unclaimed_max_items) ||
                            (c->unclaimed_max_bytes &&
                             sp->foreign_bytes + bytes > c->unclaimed_max_bytes);
                if (!over || pass == 1 || mono_usec() - sp->foreign_purged < 1000000)
                        return over;
                sp->foreign_purged = mono_usec();
                DICT_FOREACH_SAFE(v, nx, &sp->foreign) {
                        struct stat st;
                        if (v->again ||
                            fstatat(sp->fd[SD_HANDOFF], dict_key(v), &st,
                                    AT_SYMLINK_NOFOLLOW) < 0 ||
                            st.st_ino != v->ino)
                                foreign_remove(sp, v);
                }
        }
        return true;
}
