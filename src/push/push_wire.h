/* What handoff-hubd and handoff-push (its webhook sender) share: the
 * rule of which addresses a webhook may be at (push_addr.c) and the line
 * the sender answers each POST with (push_line.c).  Plain functions, no
 * I/O: tests/fuzz/fuzz_push_line.c calls the line's parser. */
#ifndef HD_PUSH_WIRE_H
#define HD_PUSH_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sockaddr;

/* ---- push_addr.c ---- */
#define PUSH_ALLOW_MAX 32
struct push_cidr {
        int family;             /* AF_INET or AF_INET6 */
        unsigned char addr[16];
        unsigned bits;
};
struct push_allow {
        struct push_cidr cidr[PUSH_ALLOW_MAX];
        size_t n;
};
/* "CIDR[, CIDR]..." (a bare address: all its bits): 0, or -EINVAL with
 * the bad word in bad. */
int push_allow_parse(const char *spec, struct push_allow *ret, char *bad, size_t n);
/* Whether a webhook may be at sa: a public address, or one of allow's
 * (A2A 1.0 section 13.2: private, loopback, link-local and the like
 * refused otherwise).  An IPv4-mapped IPv6 address is judged as IPv4. */
bool push_addr_allowed(const struct push_allow *allow, const struct sockaddr *sa);
/* url's parts: http or https, the host (no user, brackets dropped), the
 * port (the scheme's when none): 0 or -EINVAL. */
#define PUSH_URL_MAX 2048
#define PUSH_HOST_MAX 255
int push_url_split(const char *url, bool *ret_tls, char host[PUSH_HOST_MAX + 1],
                   unsigned *ret_port);

/* ---- push_line.c ---- */
enum push_verdict {
        PUSH_DELIVERED,         /* a 2xx */
        PUSH_RETRY,             /* anything else: refused, unreachable, 3xx, 5xx */
};
#define PUSH_TEXT_MAX 200
struct push_reply {
        uint64_t n;                     /* the request's number */
        enum push_verdict verdict;
        unsigned http;                  /* 0: no answer */
        char text[PUSH_TEXT_MAX + 1];   /* printable ASCII, no tab */
};
/* The sender's verdict on a webhook's answer (http 0: none, why says
 * why), text cleaned. */
void push_reply_make(uint64_t n, long http, const char *why, struct push_reply *out);
/* Its line "N\tdelivered|retry\tHTTP\tTEXT\n" into buf: the length, or
 * -ENOBUFS. */
int push_line_format(const struct push_reply *r, char *buf, size_t size);
/* A line (without its newline) as the hub reads it: 0, or -EBADMSG when
 * it is not one push_line_format() writes. */
int push_line_parse(const char *line, size_t len, struct push_reply *out);

#endif
