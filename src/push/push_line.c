/* The line handoff-push answers each POST with, and the hub's reading of
 * it: "N\tdelivered|retry\tHTTP\tTEXT".  The hub trusts no byte of it
 * beyond this form: the sender has read a stranger's answer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "push_wire.h"

static void clean(char *buf, size_t size, const char *s)
{
        size_t o = 0;

        for (; s && *s && o + 1 < size; s++)
                buf[o++] = (*s >= 0x20 && *s < 0x7f) ? *s : ' ';
        buf[o] = '\0';
}

void push_reply_make(uint64_t n, long http, const char *why, struct push_reply *out)
{
        char t[PUSH_TEXT_MAX + 1];

        memset(out, 0, sizeof(*out));
        out->n = n;
        out->http = http > 0 && http < 1000 ? (unsigned)http : 0;
        out->verdict = out->http >= 200 && out->http < 300 ? PUSH_DELIVERED : PUSH_RETRY;
        if (out->http >= 300 && out->http < 400)
                snprintf(t, sizeof(t), "HTTP %u: a redirect, not followed", out->http);
        else if (out->http)
                snprintf(t, sizeof(t), "HTTP %u", out->http);
        else
                snprintf(t, sizeof(t), "%s", why && *why ? why : "no answer");
        clean(out->text, sizeof(out->text), t);
}

int push_line_format(const struct push_reply *r, char *buf, size_t size)
{
        int n = snprintf(buf, size, "%llu\t%s\t%u\t%s\n", (unsigned long long)r->n,
                         r->verdict == PUSH_DELIVERED ? "delivered" : "retry", r->http, r->text);

        return n < 0 || (size_t)n >= size ? -ENOBUFS : n;
}

/* A decimal of at most digits digits at *p, up to sep: 0 or -EBADMSG. */
static int number(const char **p, const char *end, unsigned digits, unsigned long long *ret)
{
        unsigned long long v = 0;
        unsigned k = 0;

        while (*p < end && **p >= '0' && **p <= '9' && k < digits) {
                v = v * 10 + (unsigned)(**p - '0');
                (*p)++;
                k++;
        }
        if (!k || *p >= end || **p != '\t')
                return -EBADMSG;
        (*p)++;
        *ret = v;
        return 0;
}

int push_line_parse(const char *line, size_t len, struct push_reply *out)
{
        const char *p = line, *end = line + len;
        unsigned long long n, http;
        size_t tl;

        memset(out, 0, sizeof(*out));
        if (number(&p, end, 19, &n) < 0)
                return -EBADMSG;
        if ((size_t)(end - p) > 10 && !memcmp(p, "delivered\t", 10))
                out->verdict = PUSH_DELIVERED, p += 10;
        else if ((size_t)(end - p) > 6 && !memcmp(p, "retry\t", 6))
                out->verdict = PUSH_RETRY, p += 6;
        else
                return -EBADMSG;
        if (number(&p, end, 3, &http) < 0)
                return -EBADMSG;
        if (out->verdict == PUSH_DELIVERED && (http < 200 || http > 299))
                return -EBADMSG;
        tl = (size_t)(end - p);
        if (tl > PUSH_TEXT_MAX)
                return -EBADMSG;
        for (size_t i = 0; i < tl; i++)
                if (p[i] < 0x20 || p[i] >= 0x7f)
                        return -EBADMSG;
        memcpy(out->text, p, tl);
        out->text[tl] = '\0';
        out->n = n;
        out->http = (unsigned)http;
        return 0;
}
