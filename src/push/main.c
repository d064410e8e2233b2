/* handoff-push: handoff-hubd's webhook sender, a process of its own
 * (handoff-hubd(8), "Push notifications").  The hub starts it with
 * [hub] push_allow as its one argument and keeps state_dir and the
 * spool: this program holds no descriptor of either.  It reads one JSON
 * request a line on stdin,
 *
 *   {"n": N, "url": URL, "headers": ["Name: value", ...], "body": TEXT}
 *
 * POSTs body to url (no redirect followed, no proxy, 10 s to connect,
 * 20 s in all; each address it connects to judged by push_addr_allowed()
 * then, whatever the name resolved to when the config was made) and
 * writes one line on stdout, in order: push_line_format()'s. */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <signal.h>
#include <unistd.h>

#include "push_wire.h"

#define LINE_MAX_BYTES (64 * 1024 * 1024)
#define CONNECT_TIMEOUT_S 10L
#define TIMEOUT_S 20L
#define ANSWER_MAX (64 * 1024)  /* of a webhook's body: read, not kept */

static struct push_allow allow;

struct sock_check {
        bool refused;
};

static curl_socket_t open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
        struct sock_check *sc = ud;

        if (purpose != CURLSOCKTYPE_IPCXN || !push_addr_allowed(&allow, &a->addr)) {
                sc->refused = true;
                return CURL_SOCKET_BAD;
        }
        return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
        size_t *got = ud;

        (void)p;
        *got += size * n;
        return *got > ANSWER_MAX ? 0 : size * n;
}

static void post(uint64_t n, const json_t *req, struct push_reply *out)
{
        const char *url = json_string_value(json_object_get(req, "url"));
        const json_t *hs = json_object_get(req, "headers"), *h;
        const json_t *body = json_object_get(req, "body");
        struct curl_slist *list = NULL;
        struct sock_check sc = { false };
        char errbuf[CURL_ERROR_SIZE] = "", host[PUSH_HOST_MAX + 1];
        unsigned port;
        bool tls;
        size_t i, got = 0;
        long http = 0;
        CURL *c;
        CURLcode cr;

        if (!url || push_url_split(url, &tls, host, &port) < 0 || !json_is_string(body)) {
                push_reply_make(n, 0, "not a request: url, body", out);
                return;
        }
        c = curl_easy_init();
        if (!c) {
                push_reply_make(n, 0, "curl_easy_init failed", out);
                return;
        }
        json_array_foreach(hs, i, h)
                if (json_is_string(h) && !strpbrk(json_string_value(h), "\r\n"))
                        list = curl_slist_append(list, json_string_value(h));
        list = curl_slist_append(list, "Expect:");
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_PROXY, "");
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, TIMEOUT_S);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, json_string_value(body));
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)json_string_length(body));
        curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
        curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &sc);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
        cr = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
        if (cr != CURLE_OK && cr != CURLE_WRITE_ERROR)
                http = 0;
        if (sc.refused)
                snprintf(errbuf, sizeof(errbuf), "%.64s resolves to an address refused (private, "
                         "loopback or link-local, and not in [hub] push_allow)", host);
        push_reply_make(n, http, errbuf[0] ? errbuf : curl_easy_strerror(cr), out);
        curl_slist_free_all(list);
        curl_easy_cleanup(c);
}

int main(int argc, char **argv)
{
        char bad[160] = "", *line = NULL, out[PUSH_TEXT_MAX + 64];
        size_t cap = 0;
        ssize_t len;

        /* gone with the hub */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (argc > 2 || (argc == 2 && push_allow_parse(argv[1], &allow, bad, sizeof(bad)) < 0)) {
                fprintf(stderr, "handoff-push: usage: handoff-push [CIDR,...] (%s)\n", bad);
                return 2;
        }
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
                return 1;
        while ((len = getline(&line, &cap, stdin)) > 0) {
                struct push_reply r;
                json_t *req;
                json_int_t n;

                if (len > LINE_MAX_BYTES)
                        break;
                req = json_loadb(line, (size_t)len, 0, NULL);
                n = json_integer_value(json_object_get(req, "n"));
                if (!req || n < 0)
                        push_reply_make(0, 0, "not a request", &r);
                else
                        post((uint64_t)n, req, &r);
                json_decref(req);
                if (push_line_format(&r, out, sizeof(out)) < 0 ||
                    fputs(out, stdout) == EOF || fflush(stdout) == EOF)
                        break;
        }
        free(line);
        curl_global_cleanup();
        return 0;
}
