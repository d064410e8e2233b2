/* libnats on demand; see nats_dl.h. */
#include <dlfcn.h>
#include <errno.h>

#include "log.h"
#include "nats_dl.h"

#define NATS_DL_DEFINE(f) typeof(f) *sym_##f;
NATS_DL_SYMBOLS(NATS_DL_DEFINE)
#undef NATS_DL_DEFINE

static const struct {
        const char *name;
        void **ptr;
} nats_dl_table[] = {
#define NATS_DL_ENTRY(f) { #f, (void **)&sym_##f },
        NATS_DL_SYMBOLS(NATS_DL_ENTRY)
#undef NATS_DL_ENTRY
};

int nats_dl_open(void)
{
        static void *dl;
        void *h;

        if (dl)
                return 0;
        /* Never closed: libnats threads may outlive the relay (see
         * relay_free()), and a second start finds it loaded. */
        h = dlopen(NATS_DL_SONAME, RTLD_NOW);
        if (!h) {
                log_error("Relay: cannot load %s, which [relay] needs: %s", NATS_DL_SONAME,
                          dlerror());
                return -ELIBACC;
        }
        for (size_t i = 0; i < ELEMENTSOF(nats_dl_table); i++) {
                void *p = dlsym(h, nats_dl_table[i].name);
                if (!p) {
                        for (size_t j = 0; j < i; j++)
                                *nats_dl_table[j].ptr = NULL;
                        dlclose(h);
                        log_error("Relay: %s has no %s: not the library handoffd was built for",
                                  NATS_DL_SONAME, nats_dl_table[i].name);
                        return -ELIBBAD;
                }
                *nats_dl_table[i].ptr = p;
        }
        dl = h;
        return 0;
}
