/* libFuzzer target: handoffd.conf as `handoffd -n` reads it: inih and
 * config_load()'s checks, the keys loaded (config_load_keys()), the
 * relay's keys and host_pubkey_dir (config_relay_keys()) and the
 * warnings (config_warnings()).
 *
 * Key paths in a config are absolute, so the input names the fixture
 * below as "@F": every "@F" in the input becomes the fixture's directory
 * before it is read, and $CREDENTIALS_DIRECTORY is its keys/ (for
 * "credential:NAME").  The fixture, made once per process:
 *
 *     keys/default.key keys/k1.key   HMAC secrets, 0600
 *     keys/loose.key                 an HMAC secret of mode 0644
 *     keys/h1.key keys/alice-1.key   Ed25519 secret keys (kids h1, alice-1)
 *     keys/h1.pub keys/alice.pub     their public keys
 *     keys/two.pub                   two public keys (bob-1, carol-1)
 *     pub/bob.pub pub/carol.pub      a pubkey_dir (0755)
 *     pub-open/bob.pub               one writable by others (0777)
 *     hosts/h2.pub hosts/h3.pub      a host_pubkey_dir (0755)
 *     hosts-open/ hosts-empty/       one of mode 0777, one without keys
 *     token token-empty token-open   A2A token files (0600, empty, 0644)
 *
 * so that the seeds can give every kind of key file and every kind of
 * [remote] (host and a2a) together.  HD_FUZZ_VERBOSE=1 says what each
 * input came to. */
#include <sodium.h>

#include "config.h"
#include "fuzz.h"

static char root[PATH_MAX - 256];
static bool verbose;

/* Ed25519 seeds 0x10.., 0x20.., ...: public, test only. */
static const struct { const char *kid, *seed; } ed_keys[] = {
        { "h1", "EBESExQVFhcYGRobHB0eHyAhIiMkJSYnKCkqKywtLi8=" },
        { "h2", "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=" },
        { "h3", "MDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk8=" },
        { "alice-1", "gIGCg4SFhoeIiYqLjI2Oj5CRkpOUlZaXmJmam5ydnp8=" },
        { "bob-1", "kJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq8=" },
        { "carol-1", "oKGio6SlpqeoqaqrrK2ur7CxsrO0tba3uLm6u7y9vr8=" },
};

static void make_dir(const char *name, mode_t mode)
{
        char path[PATH_MAX];

        snprintf(path, sizeof(path), "%s/%s", root, name);
        if (mkdir(path, mode) < 0 || chmod(path, mode) < 0) {
                perror(path);
                abort();
        }
}

/* The secret line of ed_keys[i], or with pub its public line. */
static void ed_line(size_t i, bool pub, char *buf, size_t n)
{
        char line[HD_KEY_LINE_MAX], msg[256];
        hd_key *k = NULL;
        int l;

        l = snprintf(line, sizeof(line), "ed25519-secret %s %s\n", ed_keys[i].seed, ed_keys[i].kid);
        if (hd_key_parse(line, (size_t)l, &k, msg, sizeof(msg)) < 0 ||
            hd_key_format(k, !pub, buf, n) < 0) {
                fprintf(stderr, "fuzz_config: key %s: %s\n", ed_keys[i].kid, msg);
                abort();
        }
        hd_key_free(k);
}

static void write_ed(const char *dir, const char *name, size_t i, bool pub, mode_t mode)
{
        char line[HD_KEY_LINE_MAX];

        ed_line(i, pub, line, sizeof(line));
        fuzz_write_text(root, dir, name, line, mode);
}

static void at_exit(void)
{
        fuzz_remove_tree(root, "fuzz_config");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        char path[PATH_MAX], a[HD_KEY_LINE_MAX], b[HD_KEY_LINE_MAX], two[2 * HD_KEY_LINE_MAX];

        (void)argc;
        (void)argv;
        verbose = getenv("HD_FUZZ_VERBOSE") != NULL;
        if (sodium_init() < 0)
                abort();
        fuzz_temp_root(root, sizeof(root), "config");
        atexit(at_exit);
        make_dir("keys", 0755);
        make_dir("pub", 0755);
        make_dir("pub-open", 0777);
        make_dir("hosts", 0755);
        make_dir("hosts-open", 0777);
        make_dir("hosts-empty", 0755);
        fuzz_write_text(root, "keys", "default.key",
                        "TEST-ONLY handoffd vector key, not a secret, 0001\n", 0600);
        fuzz_write_text(root, "keys", "k1.key", "TEST-ONLY fuzz_config key k1, not a secret\n", 0600);
        fuzz_write_text(root, "keys", "loose.key", "TEST-ONLY fuzz_config key, mode 0644!\n", 0644);
        write_ed("keys", "h1.key", 0, false, 0600);
        write_ed("keys", "h1.pub", 0, true, 0644);
        write_ed("keys", "alice-1.key", 3, false, 0600);
        write_ed("keys", "alice.pub", 3, true, 0644);
        ed_line(4, true, a, sizeof(a));
        ed_line(5, true, b, sizeof(b));
        snprintf(two, sizeof(two), "# two keys\n%s\n%s", a, b);
        fuzz_write_text(root, "keys", "two.pub", two, 0644);
        write_ed("pub", "bob.pub", 4, true, 0644);
        write_ed("pub", "carol.pub", 5, true, 0644);
        write_ed("pub-open", "bob.pub", 4, true, 0644);
        write_ed("hosts", "h2.pub", 1, true, 0644);
        write_ed("hosts", "h3.pub", 2, true, 0644);
        write_ed("hosts-open", "h2.pub", 1, true, 0644);
        fuzz_write_text(root, ".", "token", "TEST-ONLY-a2a-token\n", 0600);
        fuzz_write_text(root, ".", "token-empty", "", 0600);
        fuzz_write_text(root, ".", "token-open", "TEST-ONLY-a2a-token\n", 0644);
        snprintf(path, sizeof(path), "%s/keys", root);
        setenv("CREDENTIALS_DIRECTORY", path, 1);
        return 0;
}

/* data with every "@F" replaced by root (malloc'd; *ret_n its length). */
static char *expand(const uint8_t *data, size_t size, size_t *ret_n)
{
        size_t rl = strlen(root), n = 0;
        char *out = malloc(size / 2 * rl + size + 1);

        if (!out)
                abort();
        for (size_t i = 0; i < size; i++) {
                if (data[i] == '@' && i + 1 < size && data[i + 1] == 'F') {
                        memcpy(out + n, root, rl);
                        n += rl;
                        i++;
                } else {
                        out[n++] = (char)data[i];
                }
        }
        *ret_n = n;
        return out;
}

static void ignore(void *userdata, const char *line)
{
        (void)userdata;
        (void)line;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct config *c = NULL;
        char *err = NULL, *text;
        size_t n;
        int r;

        text = expand(data, size, &n);
        r = config_load(fuzz_path_of((const uint8_t *)text, n), true, &c, &err);
        free(text);
        if (r < 0) {
                FUZZ_ASSERT(c == NULL, "config_load failed and returned a config");
                if (verbose)
                        fprintf(stderr, "fuzz_config: %s\n", err ? err : strerror(-r));
                free(err);
                return 0;
        }
        /* No [agent] section is allowed (the packaged config has none). */
        FUZZ_ASSERT(c && c->spool_dir && c->spool_dir[0] == '/' &&
                    c->control_socket && c->roles && c->roles[0],
                    "config_load accepted a config without spool dir, socket or roles");
        FUZZ_ASSERT(c->max_window >= c->max_clock_skew,
                    "config_load accepted max_window < max_clock_skew");
        for (size_t i = 0; i < c->n_agents; i++) {
                const struct config_agent *a = &c->agents[i];
                FUZZ_ASSERT(hd_agent_valid(a->name) && a->state_dir &&
                            a->delivery && a->act_format,
                            "config_load accepted an incomplete [agent] section");
                FUZZ_ASSERT(config_agent(c, a->name) == a, "agent '%s' found twice",
                            a->name);
        }
        for (size_t i = 0; i < c->n_remotes; i++)
                FUZZ_ASSERT((c->remotes[i].host != NULL) != (c->remotes[i].a2a != NULL),
                            "[remote %s] accepted with %s", c->remotes[i].name,
                            c->remotes[i].host ? "host and a2a" : "neither host nor a2a");
        free(err);
        err = NULL;
        /* What -n and the start check next (daemon_config_load()). */
        r = config_relay_keys(c, NULL, NULL, &err);
        FUZZ_ASSERT(r == 0 || err, "config_relay_keys failed (%d) without saying why", r);
        if (verbose)
                fprintf(stderr, "fuzz_config: %s\n", r < 0 ? err : "ok");
        free(err);
        (void)config_warnings(c, ignore, NULL);
        config_free(c);
        return 0;
}
