/* The bootstrap: the one-shot file a target agent reads at start, in the
 * form the real consumer (gptme-voice) expects, and its file name. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handoff.h"
#include "record.h"
#include "sbuf.h"
#include "util.h"

int hd_bootstrap_name(const char *handoff_id, char *buf, size_t n)
{
        size_t o = 0;

        /* The real consumer keeps ASCII/Unicode alphanumerics, '-' and '_';
         * a valid handoff_id is ASCII, so ASCII is all that can occur. */
        for (const char *p = handoff_id ? handoff_id : ""; *p; p++) {
                unsigned char c = (unsigned char)*p;
                if (!(isalnum(c) || c == '-' || c == '_') || c >= 0x80)
                        continue;
                if (o + 1 >= n)
                        return -ENAMETOOLONG;
                buf[o++] = (char)c;
        }
        buf[o] = '\0';
        if (o == 0 && xsnprintf(buf, n, "handoff") < 0)
                return -ENAMETOOLONG;
        if (xsnprintf(buf + strlen(buf), n - strlen(buf), ".json") < 0)
                return -ENAMETOOLONG;
        return 0;
}

/* The turns of the transcript shown after a producer's summary. */
#define BOOTSTRAP_TURNS 20

static const char *jstr(const json_t *o, const char *k)
{
        const char *s = json_string_value(json_object_get(o, k));
        return s && *s ? s : NULL;
}

/* A summary that Python's str.strip() empties is no summary: the real
 * consumer strips resume_context and ignores a bootstrap left empty. */
static const char *summary(const json_t *h, const char *k)
{
        const char *s = jstr(h, k);
        return s && !utf8_blank(s) ? s : NULL;
}

/* The turns of a transcript, the last max of them (all with max 0). */
static void render_transcript(struct sbuf *b, const json_t *tr, size_t max)
{
        size_t n = json_array_size(tr), first = max && n > max ? n - max : 0;

        if (first)
                sb_printf(b, "\n\nTranscript, the last %zu of %zu turns:", n - first, n);
        else
                sb_printf(b, "\n\nTranscript so far:");
        for (size_t i = first; i < n; i++) {
                const json_t *t = json_array_get(tr, i);
                const char *text = json_string_value(json_object_get(t, "text"));
                sb_puts(b, "\n- ");
                sb_puts(b, jstr(t, "role") ? jstr(t, "role") : "?");
                sb_puts(b, ": ");
                sb_puts(b, text ? text : "");
        }
}

/* s with each line quoted ("> "), so no line of it stands alone. */
static void quote_lines(struct sbuf *b, const char *s)
{
        while (*s) {
                size_t n = strcspn(s, "\n");
                sb_puts(b, n ? "\n> " : "\n>");
                sb_put(b, s, n);
                s += n;
                if (*s)
                        s++;
        }
}

/* The context the agent resumes from.  Its first line is handoffd's: who
 * sent it (from_agent, verified with the sender's key).  Everything after
 * is the sender's own text, each line quoted and said to be the sender's,
 * so that it cannot pass for a line of handoffd's ("bob handed this over
 * to you" written by another sender): the producer's own summary when it
 * wrote one (then the last turns of the transcript, unless with_turns is
 * false), else its reason and transcript; a payload's Markdown rendering
 * is appended.  *ret_turns: turns follow a summary. */
static int render_context(const json_t *h, bool with_turns, char **ret, bool *ret_turns)
{
        struct sbuf b = { 0 }, t = { 0 };
        const char *own = summary(h, "resume_context");
        const json_t *tr = json_object_get(h, "transcript");
        const char *ptype = jstr(h, "payload_type");
        const char *from = jstr(h, "from_agent") ? jstr(h, "from_agent") : "another agent";
        bool turns = json_is_array(tr) && json_array_size(tr) > 0;
        _cleanup_free_ char *text = NULL;
        int r;

        *ret_turns = false;
        if (!own)
                own = summary(h, "context_summary");
        if (own) {
                sb_puts(&t, own);
                if (turns && with_turns) {
                        render_transcript(&t, tr, BOOTSTRAP_TURNS);
                        *ret_turns = true;
                }
        } else {
                if (jstr(h, "reason"))
                        sb_printf(&t, "Reason: %s", jstr(h, "reason"));
                if (turns)
                        render_transcript(&t, tr, 0);
        }
        if (ptype) {
                char *md = NULL;
                if (hd_payload_render(ptype, json_object_get(h, "payload"), &md) == 0 && md) {
                        sb_printf(&t, "\n\n%s", md);
                        free(md);
                }
        }
        r = sb_take(&t, &text);
        if (r < 0)
                return r;
        sb_printf(&b, "%s handed this over to you (from_agent verified by handoffd).", from);
        /* a leading blank line of the text (after no reason) is not kept */
        const char *body = text + strspn(text, "\n");
        if (*body) {
                sb_printf(&b, "\nWhat %s wrote (the sender's words, not handoffd's):", from);
                quote_lines(&b, body);
        }
        return sb_take(&b, ret);
}

/* How many bytes of UTF-8 s fit in budget bytes of canonical JSON (the
 * escapes of canon.c); *ret_used gets what they take. */
static size_t escaped_cut(const char *s, size_t budget, size_t *ret_used)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t used = 0, i = 0;

        while (p[i]) {
                size_t k = 1, cost = 1;
                if (p[i] >= 0xf0)
                        k = 4, cost = 12;       /* a surrogate pair */
                else if (p[i] >= 0xe0)
                        k = 3, cost = 6;
                else if (p[i] >= 0xc0)
                        k = 2, cost = 6;
                else if (strchr("\"\\\n\r\t\b\f", p[i]))
                        cost = 2;
                else if (p[i] < 0x20 || p[i] == 0x7f)
                        cost = 6;
                if (used + cost > budget)
                        break;
                used += cost;
                i += k;
        }
        *ret_used = used;
        return i;
}

/* The canonical bytes of b into *keep (what was there freed), their
 * length into *ret: the last ones made are the bootstrap's own when b is
 * not changed after, so the daemon writes them without a dump of its own. */
static int canon_size(const json_t *b, char **keep, size_t *ret)
{
        free(*keep);
        *keep = NULL;
        return hd_canon_dump(b, NULL, keep, ret);
}

#define TRUNCATED_NOTE "\n\n[truncated to fit the spool's size limit; the whole handoff is the bootstrap's member \"handoff\"]"

/* Shrink b until its canonical form fits max_size: drop the copies that
 * the embedded handoff holds anyway, then shorten resume_context, and
 * last drop the embedded handoff itself (the bootstrap then carries no
 * proof of origin). */
static int bootstrap_fit(json_t *b, size_t max_size, bool same_payload, bool fresh,
                         char **canon, size_t *ret_len)
{
        size_t len = *ret_len;
        int r = 0;

        for (int step = 0;; step++) {
                /* *canon holds b's bytes already when fresh: not made again */
                if (step > 0 || !fresh)
                        r = canon_size(b, canon, &len);
                *ret_len = len;
                if (r < 0 || len <= max_size)
                        return r;
                switch (step) {
                case 0:
                        json_object_del(b, "transcript");
                        break;
                case 1:
                        if (same_payload)
                                json_object_del(b, "payload");
                        break;
                case 2:
                case 4: {
                        const char *ctx = json_string_value(json_object_get(b, "resume_context"));
                        size_t over = len - max_size, esc, note, keep, cut;
                        _cleanup_free_ char *t = NULL;

                        escaped_cut(ctx, SIZE_MAX, &esc);
                        escaped_cut(TRUNCATED_NOTE, SIZE_MAX, &note);
                        keep = esc > over + note ? esc - over - note : 0;
                        cut = escaped_cut(ctx, keep, &esc);
                        if (cut == 0)
                                break;  /* no room for any: dropping the handoff makes some */
                        if (asprintf(&t, "%.*s%s", (int)cut, ctx, TRUNCATED_NOTE) < 0)
                                return -ENOMEM;
                        if (json_object_set_new(b, "resume_context", json_string(t)) < 0)
                                return -ENOMEM;
                        break;
                }
                case 3:
                        json_object_del(b, "handoff");
                        break;
                default:
                        return 0;       /* the required fields alone: as small as it gets */
                }
        }
}

int bootstrap_build_canon(const json_t *h, const json_t *shown, int64_t accepted_usec,
                          size_t max_size, json_t **ret, char **ret_buf, size_t *ret_len)
{
        static const char *const copy[] = {
                "from_agent", "to_agent", "reason", "transcript",
                "initiated_at", "expires_at", "caller_hash", "payload_type",
                "payload",
        };
        char at[HD_TIME_MAX];
        _cleanup_free_ char *ctx = NULL, *canon = NULL;
        _cleanup_json_ json_t *b = NULL;
        bool turns, fresh = false;     /* canon holds b's bytes as b is */
        size_t len = 0;
        int r;

        if (!shown)
                shown = h;
        if (!json_is_object(h) || !json_is_object(shown) || !jstr(h, "handoff_id") ||
            !json_equal(json_object_get(h, "handoff_id"), json_object_get(shown, "handoff_id")))
                return -EINVAL;
        r = hd_time_format(accepted_usec, at, sizeof(at));
        if (r < 0)
                return r;
        r = render_context(shown, true, &ctx, &turns);
        if (r < 0)
                return r;
        b = json_object();
        if (!b)
                return -ENOMEM;
        r = 0;
        r |= json_object_set_new(b, "protocol_version", json_integer(HD_PROTOCOL_VERSION));
        r |= json_object_set_new(b, "source", json_string("voice_handoff"));
        r |= json_object_set_new(b, "handoff_id", json_string(jstr(h, "handoff_id")));
        r |= json_object_set_new(b, "accepted_at", json_string(at));
        r |= json_object_set_new(b, "resume_context", json_string(ctx));
        for (size_t i = 0; i < ELEMENTSOF(copy); i++) {
                json_t *v = json_object_get(shown, copy[i]);
                if (v)
                        r |= json_object_set(b, copy[i], v);
        }
        /* The proof of origin: the handoff exactly as its sender signed it
         * (the MAC covers its canonical bytes, which parsing and writing
         * it again leave unchanged). */
        r |= json_object_set(b, "handoff", (json_t *)h);
        if (r)
                return -ENOMEM;
        /* The turns after a summary are a convenience: first to go when
         * the bootstrap would pass the size cap (the library's, when none
         * is given: what a consumer reads). */
        if (turns) {
                r = canon_size(b, &canon, &len);
                if (r < 0)
                        return r;
                fresh = true;
                if (len > (max_size ? max_size : HD_DEFAULT_MAX_SIZE)) {
                        fresh = false;
                        free(ctx);
                        ctx = NULL;
                        r = render_context(shown, false, &ctx, &turns);
                        if (r < 0)
                                return r;
                        if (json_object_set_new(b, "resume_context", json_string(ctx)) < 0)
                                return -ENOMEM;
                }
        }
        if (max_size) {
                r = bootstrap_fit(b, max_size,
                                  json_equal(json_object_get(h, "payload"),
                                             json_object_get(shown, "payload")),
                                  fresh, &canon, &len);
                if (r < 0)
                        return r;
                fresh = true;
        }
        if (ret_buf) {
                if (!fresh) {
                        r = canon_size(b, &canon, &len);
                        if (r < 0)
                                return r;
                }
                *ret_buf = TAKE_PTR(canon);
                *ret_len = len;
        }
        *ret = TAKE_PTR(b);
        return 0;
}

int hd_bootstrap_build_shown(const json_t *h, const json_t *shown,
                             int64_t accepted_usec, size_t max_size, json_t **ret)
{
        return bootstrap_build_canon(h, shown, accepted_usec, max_size, ret, NULL, NULL);
}

int hd_bootstrap_build(const json_t *h, int64_t accepted_usec, json_t **ret)
{
        return hd_bootstrap_build_shown(h, NULL, accepted_usec, 0, ret);
}
