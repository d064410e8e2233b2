/* libFuzzer target: one control-socket request into control_handle(),
 * against a spool that was never opened (status reads only sp->cfg,
 * sp->st and the parts' empty tables), and again as from a peer that may
 * act for agents (control_agent.c: bob's state_dir does not exist, so
 * nothing is taken).  Every request gets one answer, and it is JSON. */
#include <string.h>

#include "config.h"
#include "control.h"
#include "fuzz.h"
#include "parts.h"
#include "spool.h"

static const char fixed_config[] =
        "[spool]\n"
        "dir = /nonexistent/handoffd-fuzz/spool\n"
        "[keys]\n"
        "default = /nonexistent/handoffd-fuzz/default.key\n"
        "[agent bob]\n"
        "state_dir = /nonexistent/handoffd-fuzz/bob\n";

static struct spool sp;
static struct parts parts = { .sp = &sp };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        char *err = NULL;

        (void)argc;
        (void)argv;
        if (config_load(fuzz_path_of((const uint8_t *)fixed_config,
                                     strlen(fixed_config)),
                        false, &sp.cfg, &err) < 0) {
                fprintf(stderr, "fuzz_control: fixed config: %s\n", err ? err : "?");
                abort();
        }
        sp.st.started_usec = hd_now_usec();
        sp.st.claimed = 3;
        sp.st.rejected[HD_R_BAD_MAC] = 2;
        sp.st.watch_ok = true;
        snprintf(sp.st.last_error, sizeof(sp.st.last_error),
                 "Failed to claim 'x': No space left on device");
        sp.st.last_error_usec = sp.st.started_usec;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        _cleanup_free_ char *resp = NULL;
        _cleanup_json_ json_t *doc = NULL;
        hd_verdict v;
        int r;

        /* The socket reads at most CONTROL_REQUEST_MAX bytes. */
        if (size > CONTROL_REQUEST_MAX)
                size = CONTROL_REQUEST_MAX;
        static const unsigned char digest[32];
        static const struct control_config cc = { .path = "/etc/handoffd/handoffd.conf",
                                                  .digest = digest };
        for (int peer = 0; peer < 2; peer++) {
                r = control_handle_peer(&parts, &cc, (const char *)data, size, peer, &resp);
                FUZZ_ASSERT(r == 0, "control_handle gave no answer: %s", strerror(-r));
                r = hd_parse(resp, strlen(resp), NULL, &doc, &v);
                FUZZ_ASSERT(r == 0, "control answer is not JSON: %s: %s\n%s",
                            hd_reason_name(v.reason), v.detail, resp);
                FUZZ_ASSERT(json_is_boolean(json_object_get(doc, "ok")),
                            "control answer without \"ok\": %s", resp);
                json_decref(TAKE_PTR(doc));
                free(TAKE_PTR(resp));
        }
        return 0;
}
