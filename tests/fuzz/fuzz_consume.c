/* libFuzzer target: one bootstrap as hd_consume reads it from an agent's
 * handoffs/ directory (src/lib/consume.c), where any process that can
 * write there may have put anything.  The input is the file; its name is
 * the bootstrap name of its handoff_id when it has one (else a fixed one),
 * so the checks past the name are reached.  Each input is tried with the
 * proof of origin (the TEST-ONLY vector key, agent alice) and without,
 * peeked and taken.  Properties: a bootstrap taken has the fields the real
 * consumer relies on; a refusal's detail is UTF-8; a refused file is left
 * in place, a taken one is gone; nothing else is left in the directory. */
#include <dirent.h>
#include <fcntl.h>
#include <string.h>

#include "fuzz.h"

static int dirfd_ = -1;
static char dir[PATH_MAX - 128];
static hd_key *key;

static const hd_key *lookup(void *userdata, const char *kid, const char *from)
{
        (void)userdata;
        (void)from;
        /* As the vectors' lookup: the default key and kid "test-2026". */
        if (kid && strcmp(kid, "test-2026") != 0)
                return NULL;
        return key;
}

/* The directory was left in /tmp by every run before. */
static void at_exit(void)
{
        fuzz_remove_tree(dir, "fuzz_consume");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        static const char secret[] = "TEST-ONLY handoffd vector key, not a secret, 0001";

        (void)argc;
        (void)argv;
        fuzz_temp_root(dir, sizeof(dir), "consume");
        atexit(at_exit);
        if ((dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                perror("fuzz_consume: temp dir");
                abort();
        }
        if (hd_key_from_bytes(secret, strlen(secret), &key) < 0)
                abort();
        return 0;
}

static void clean(void)
{
        int fd = openat(dirfd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;

        if (!d)
                abort();
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        unlinkat(dirfd_, de->d_name, 0);
        closedir(d);
}

static size_t entries(void)
{
        int fd = openat(dirfd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        size_t n = 0;

        if (!d)
                abort();
        while ((de = readdir(d)))
                n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
        closedir(d);
        return n;
}

static void put(const char *name, const uint8_t *data, size_t size)
{
        int fd = openat(dirfd_, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
                abort();
        close(fd);
}

static void check_taken(const json_t *b, const char *how)
{
        const char *ctx = json_string_value(json_object_get(b, "resume_context"));

        FUZZ_ASSERT(json_is_object(b), "%s: taken, not an object", how);
        FUZZ_ASSERT(json_number_value(json_object_get(b, "protocol_version")) == 1,
                    "%s: taken without protocol_version 1", how);
        FUZZ_ASSERT(ctx && *ctx, "%s: taken without a resume_context", how);
        FUZZ_ASSERT(json_is_string(json_object_get(b, "handoff_id")),
                    "%s: taken without a handoff_id", how);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char name[NAME_MAX + 1] = "handoff.json";
        json_t *doc, *got = NULL;
        hd_verdict v;
        int64_t now = fuzz_now();

        if (size > 256 * 1024)
                return 0;
        doc = json_loadb((const char *)data, size, 0, NULL);
        const char *id = json_string_value(json_object_get(doc, "handoff_id"));
        if (id && hd_bootstrap_name(id, name, sizeof(name)) < 0)
                snprintf(name, sizeof(name), "handoff.json");
        json_decref(doc);

        for (int proof = 0; proof < 2; proof++) {
                hd_consume_opts o = { .resume_window_s = 300, .agent = proof ? "alice" : NULL,
                                      .lookup = proof ? lookup : NULL };
                const char *how = proof ? "with proof" : "without proof";
                int r;

                clean();
                put(name, data, size);
                memset(&v, 0, sizeof(v));
                r = hd_consume_peek(dirfd_, name, &o, now, &got, &v);
                if (r == 0) {
                        check_taken(got, how);
                        json_decref(TAKE_PTR(got));
                } else if (r == -EBADMSG) {
                        FUZZ_DETAIL_OK(&v, how);
                }
                FUZZ_ASSERT(entries() == 1, "%s: peek changed the directory", how);
                int peeked = r;

                memset(&v, 0, sizeof(v));
                r = hd_consume_with(dirfd_, NULL, &o, now, &got, &v);
                if (r == 0) {
                        check_taken(got, how);
                        json_decref(TAKE_PTR(got));
                        FUZZ_ASSERT(entries() == 0, "%s: taken but still there", how);
                        FUZZ_ASSERT(peeked == 0, "%s: taken, but peek said %d", how, peeked);
                } else {
                        if (r == -EBADMSG)
                                FUZZ_DETAIL_OK(&v, how);
                        FUZZ_ASSERT(r == -EBADMSG || r == -ENOENT || r == -ESTALE ||
                                    r == -EINVAL || r == -ENAMETOOLONG,
                                    "%s: unexpected error %d", how, r);
                        FUZZ_ASSERT(entries() == 1, "%s: refused (%d) but not left in place", how, r);
                }
        }
        clean();
        return 0;
}
