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
bool foreign_fresh(struct foreign *fg, const struct spool *sp, const char *name, int64_t now)
{
        const struct foreign_entry *e = dict_get(&fg->names, name);
        struct stat st;

        if (!e || e->again || e->expires < now)
                return false;
        if (fstatat(sp->fd[SD_HANDOFF], name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return false;
        return st.st_ino == e->ino && ctime_ns(&st) == e->ctime_ns;
}

void foreign_remove(struct foreign *fg, struct foreign_entry *e)
{
        fg->bytes -= e->bytes <= fg->bytes ? e->bytes : fg->bytes;
        dict_remove(&fg->names, e);
}

static void foreign_drop(struct foreign *fg, const char *name)
{
        struct foreign_entry *e = dict_get(&fg->names, name);

        if (e)
                foreign_remove(fg, e);
}

/* Put last in order, as a new entry: the one of the name there goes. */
static void foreign_put(struct foreign *fg, const char *name, const struct foreign_entry *v)
{
        struct foreign_entry *e;

        foreign_drop(fg, name);
        e = dict_put(&fg->names, name, NULL);
        if (!e)
                return;
        *e = *v;
        fg->bytes += e->bytes;
}

void foreign_init(struct foreign *fg)
{
        *fg = (struct foreign){ 0 };
        dict_init(&fg->names, sizeof(struct foreign_entry));
}

void foreign_clear(struct foreign *fg)
{
        dict_clear(&fg->names);
        fg->bytes = 0;
}

void foreign_note(struct foreign *fg, const char *name, const struct stat *st, int64_t expires,
                  const char *to)
{
        struct foreign_entry e = {
                .expires = expires, .ino = st->st_ino, .ctime_ns = ctime_ns(st),
                .bytes = st_bytes(st),
        };

        snprintf(e.to, sizeof(e.to), "%s", to && hd_agent_valid(to) ? to : "(invalid)");
        foreign_put(fg, name, &e);
}

void foreign_again(struct foreign *fg, const char *name, int64_t now)
{
        foreign_put(fg, name, &(struct foreign_entry){ .expires = now, .again = true });
}

/* Entries whose file is gone or replaced (another daemon claimed it, its
 * producer took it back) are let go before a refusal, a look at all of
 * them at most once a second. */
bool foreign_full(struct foreign *fg, const struct spool *sp, const char *name, uint64_t bytes)
{
        const struct config *c = sp->cfg;
        struct foreign_entry *v, *nx;

        if (!c->unclaimed_max_items && !c->unclaimed_max_bytes)
                return false;
        foreign_drop(fg, name);
        for (int pass = 0; pass < 2; pass++) {
                bool over = (c->unclaimed_max_items &&
                             dict_count(&fg->names) + 1 > c->unclaimed_max_items) ||
                            (c->unclaimed_max_bytes &&
                             fg->bytes + bytes > c->unclaimed_max_bytes);
                if (!over || pass == 1 || mono_usec() - fg->purged < 1000000)
                        return over;
                fg->purged = mono_usec();
                DICT_FOREACH_SAFE(v, nx, &fg->names) {
                        struct stat st;
                        if (v->again ||
                            fstatat(sp->fd[SD_HANDOFF], dict_key(v), &st,
                                    AT_SYMLINK_NOFOLLOW) < 0 ||
                            st.st_ino != v->ino)
                                foreign_remove(fg, v);
                }
        }
        return true;
}
