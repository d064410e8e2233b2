/* bench/verify_cost: what hd_verify costs per document, HMAC against
 * Ed25519, on a parsed document (no file I/O, no parse): the key lookup,
 * the canonical bytes, the MAC or signature check, fields and freshness.
 *
 *     make bench-verify                 (BENCH_VERIFY_N=20000 per case)
 *     build/bench/verify_cost [N]
 *
 * Two document sizes: a typical handoff (two transcript lines) and one with
 * a 64 KiB transcript, where the canonical bytes dominate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handoff.h"

static const hd_key *the_key;

static const hd_key *lookup(void *ud, const char *kid, const char *from)
{
        (void)ud;
        (void)kid;
        (void)from;
        return the_key;
}

static json_t *mkdoc(size_t transcript_bytes)
{
        json_t *d = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:[{s:s, s:s}, {s:s, s:s}]}",
                              "protocol_version", 1,
                              "handoff_id", "1776766500-alice-bob-0123456789abcdef",
                              "caller_hash", "602cd7fbbe41688e",
                              "from_agent", "alice",
                              "to_agent", "bob",
                              "reason", "transfer",
                              "initiated_at", "2026-04-21T10:15:00Z",
                              "expires_at", "2026-04-21T10:20:00Z",
                              "transcript",
                              "role", "user", "text", "hello",
                              "role", "assistant", "text", "let me transfer you");
        if (transcript_bytes) {
                char *big = malloc(transcript_bytes + 1);
                for (size_t i = 0; i < transcript_bytes; i++)
                        big[i] = (char)('a' + i % 26);
                big[transcript_bytes] = '\0';
                json_array_append_new(json_object_get(d, "transcript"),
                                      json_pack("{s:s, s:s}", "role", "user", "text", big));
                free(big);
        }
        return d;
}

static double now_s(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Microseconds per hd_verify of a document of extra transcript bytes,
 * signed with sign, verified with check. */
static double run(const hd_key *sign, const hd_key *check, size_t extra, long n,
                  size_t *ret_len)
{
        json_t *d = mkdoc(extra);
        char *canon = NULL;
        hd_verdict v;
        int64_t now;
        double t0, dt;

        hd_time_parse("2026-04-21T10:16:00Z", &now);
        the_key = check;
        if (hd_sign(d, sign) < 0 || hd_verify(d, lookup, NULL, NULL, NULL, now, &v) < 0) {
                fprintf(stderr, "does not verify: %s\n", v.detail);
                exit(1);
        }
        if (hd_canon_dump(d, NULL, &canon, ret_len) < 0)
                exit(1);
        free(canon);
        t0 = now_s();
        for (long i = 0; i < n; i++)
                if (hd_verify(d, lookup, NULL, NULL, NULL, now, &v) < 0)
                        exit(1);
        dt = (now_s() - t0) / (double)n * 1e6;
        json_decref(d);
        return dt;
}

int main(int argc, char **argv)
{
        static const char hmac[] = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        static const size_t sizes[] = { 0, 64 * 1024 };
        long n = argc > 1 ? atol(argv[1]) : 20000;
        hd_key *h = NULL, *sk = NULL, *pk = NULL;
        char line[HD_KEY_LINE_MAX];

        if (n <= 0 || hd_key_from_bytes(hmac, strlen(hmac), &h) < 0 ||
            hd_key_generate(NULL, &sk) < 0 || hd_key_format(sk, false, line, sizeof(line)) < 0 ||
            hd_key_parse(line, strlen(line), &pk, NULL, 0) < 0)
                return 1;
        printf("hd_verify per document (parse and file I/O not included)\n");
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
                long m = sizes[i] ? n / 20 : n;
                size_t len = 0;
                double th = run(h, h, sizes[i], m, &len);
                double te = run(sk, pk, sizes[i], m, &len);

                printf("  %6zu-byte document, %6ld runs: hmac %7.1f us  ed25519 %7.1f us  (x%.1f)\n",
                       len, m, th, te, te / th);
        }
        hd_key_free(pk);
        hd_key_free(sk);
        hd_key_free(h);
        return 0;
}
