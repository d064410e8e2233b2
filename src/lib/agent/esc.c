/* What handoffctl shows a person: a producer's text (a reason, a summary,
 * an agent or file name) with its control characters made visible, so it
 * cannot clear the screen, retitle the terminal or forge a line of its
 * own.  The one helper every human-readable output goes through. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

/* Strings handed out and not yet freed: a printf may use several.  Each
 * thread has its own (the hub calls from its pool), freed when the
 * thread ends. */
#define ESC_RING 16

struct esc_ring {
        char *s[ESC_RING];
        size_t next;
};

static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;
static bool ring_keyed;

static void ring_free(void *p)
{
        struct esc_ring *r = p;

        for (size_t i = 0; i < ESC_RING; i++)
                free(r->s[i]);
        free(r);
}

static void ring_key_make(void)
{
        ring_keyed = pthread_key_create(&ring_key, ring_free) == 0;
}

/* This thread's ring, or NULL (out of memory). */
static struct esc_ring *ring_get(void)
{
        struct esc_ring *r;

        pthread_once(&ring_once, ring_key_make);
        if (!ring_keyed)
                return NULL;
        r = pthread_getspecific(ring_key);
        if (!r && (r = calloc(1, sizeof(*r))) && pthread_setspecific(ring_key, r) != 0) {
                free(r);
                r = NULL;
        }
        return r;
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *p)
{
        size_t n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;

        if (p[0] >= 0xf8)
                return 0;
        for (size_t i = 1; i < n; i++)
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
        return n;
}

static const char *escape(const char *s, bool keep_lines)
{
        struct esc_ring *r = ring_get();
        const unsigned char *p = (const unsigned char *)s;
        size_t len, o = 0;
        char *out;

        if (!s)
                return NULL;
        if (!r)
                return "(out of memory)";
        len = strlen(s);
        out = malloc(len * 6 + 1);      /* \u0085 is the longest: 6 for 2 */
        if (!out)
                return "(out of memory)";
        for (size_t i = 0; i < len;) {
                unsigned c = p[i];
                size_t k;

                if (keep_lines && (c == '\n' || c == '\t')) {
                        out[o++] = (char)c;
                        i++;
                } else if (c < 0x20 || c == 0x7f) {
                        o += (size_t)sprintf(out + o, c == '\n' ? "\\n" : c == '\t' ? "\\t" :
                                             c == '\r' ? "\\r" : c == 0x1b ? "\\e" : "\\x%02x", c);
                        i++;
                } else if (c < 0x80) {
                        out[o++] = (char)c;
                        i++;
                } else if ((k = utf8_len(p + i)) == 0) {
                        o += (size_t)sprintf(out + o, "\\x%02x", c);
                        i++;
                } else if (k == 2 && c == 0xc2 && p[i + 1] < 0xa0) {
                        /* C1 controls (U+0080-U+009F): CSI, OSC, NEL */
                        o += (size_t)sprintf(out + o, "\\u%04x", p[i + 1]);
                        i += 2;
                } else if (k == 3 && c == 0xe2 && p[i + 1] == 0x80 &&
                           (p[i + 2] == 0xa8 || p[i + 2] == 0xa9 ||
                            (p[i + 2] >= 0xaa && p[i + 2] <= 0xae))) {
                        /* line/paragraph separators, bidi embeddings and
                         * overrides (U+2028-U+202E): a line that reads
                         * other than it is */
                        o += (size_t)sprintf(out + o, "\\u%04x", 0x2000 + (p[i + 2] - 0x80));
                        i += 3;
                } else if (k == 3 && c == 0xe2 && p[i + 1] == 0x81 &&
                           p[i + 2] >= 0xa6 && p[i + 2] <= 0xa9) {
                        /* bidi isolates (U+2066-U+2069) */
                        o += (size_t)sprintf(out + o, "\\u%04x", 0x2040 + (p[i + 2] - 0x80));
                        i += 3;
                } else {
                        memcpy(out + o, p + i, k);
                        o += k;
                        i += k;
                }
        }
        out[o] = '\0';
        free(r->s[r->next]);
        r->s[r->next] = out;
        r->next = (r->next + 1) % ESC_RING;
        return out;
}

const char *esc_line(const char *s)
{
        return escape(s, false);
}

const char *esc_text(const char *s)
{
        return escape(s, true);
}
