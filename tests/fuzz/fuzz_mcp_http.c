/* libFuzzer target: what handoff-hubd's /mcp reads of a request before any
 * tool runs (src/hubd/hub_mcp.c, src/lib/mcp/mcp_rpc.c): the headers
 * Origin (against [hub] mcp_origins), Accept, Mcp-Session-Id and
 * Last-Event-ID, and the body as one JSON-RPC message (mcp_parse()).  The
 * input is five lines and a body:
 *
 *     ALLOWED\n ORIGIN\n ACCEPT\n SESSION\n LAST_EVENT_ID\n BODY
 *
 * (a line "-" stands for a header that is absent).
 *
 * Properties: an Origin is allowed only when the list holds it whole
 * (case aside), never by an empty list; an absent Origin always is.  An
 * absent Accept takes anything; one that names neither the type, its
 * family/ * nor * / * takes nothing.  A session id is valid exactly when it
 * is 32 lowercase hex digits.  A Last-Event-ID is taken exactly when it
 * is empty or decimal digits (no sign, no blanks) that fit, and read as
 * their value.  The body: a message (an object with jsonrpc "2.0";
 * a request with a string or integer id and a string method, a
 * notification without an id, a response with an id and a result or an
 * error) or an error answer (JSON-RPC 2.0, id null or the request's, a
 * known code: -32700 for no JSON, -32600 for a batch, which is never
 * taken) or, for a
 * notification that is not JSON-RPC 2.0, nothing; never two. */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "util.h"
#include "hub_mcp.h"
#include "mcp.h"

#define LINES 5

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        return 0;
}

/* Does the comma or blank separated list hold o whole? */
static bool listed(const char *list, const char *o)
{
        size_t n = strlen(o);

        for (const char *p = list; (p = strcasestr(p, o)); p++)
                if ((p == list || strchr(" \t,", p[-1])) && (p[n] == '\0' || strchr(" \t,", p[n])))
                        return true;
        return false;
}

static void check_parse(const char *body, size_t len)
{
        static const int codes[] = { RPC_PARSE_ERROR, RPC_INVALID_REQUEST, RPC_INVALID_PARAMS };
        _cleanup_json_ json_t *msg = NULL, *err = NULL, *plain = NULL;
        enum mcp_kind kind;
        const char *p = body;
        int r;

        r = mcp_parse(body, len, &msg, &kind, &err);
        FUZZ_ASSERT(!(msg && err), "mcp_parse gave a message and an error");
        FUZZ_ASSERT((r == 0) == (msg != NULL), "mcp_parse %d with%s a message", r, msg ? "" : "out");
        plain = json_loadb(body, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
        while (p < body + len && strchr(" \t\r\n", *p))
                p++;
        if (msg) {
                const json_t *id = json_object_get(msg, "id");
                FUZZ_ASSERT(json_is_object(msg), "a message is not an object");
                switch (kind) {
                case MCP_REQUEST:
                        FUZZ_ASSERT((json_is_string(id) || json_is_integer(id)) &&
                                    json_is_string(json_object_get(msg, "method")) &&
                                    !strcmp(json_string_value(json_object_get(msg, "jsonrpc")) ?: "",
                                            "2.0"), "a request without id, method or 2.0");
                        break;
                case MCP_NOTIFICATION:
                        FUZZ_ASSERT(!id && json_is_string(json_object_get(msg, "method")),
                                    "a notification with an id or no method");
                        break;
                case MCP_RESPONSE:
                        FUZZ_ASSERT(id && (json_object_get(msg, "result") ||
                                           json_object_get(msg, "error")) &&
                                    !json_object_get(msg, "method"), "a response without id, result or error");
                        break;
                }
                return;
        }
        if (!err) {
                /* dropped: only a notification that is not JSON-RPC 2.0 */
                FUZZ_ASSERT(json_is_object(plain) && !json_object_get(plain, "id") &&
                            json_is_string(json_object_get(plain, "method")),
                            "nothing answered to what is not such a notification");
                return;
        }
        FUZZ_ASSERT(!strcmp(json_string_value(json_object_get(err, "jsonrpc")) ?: "", "2.0"),
                    "an error without jsonrpc 2.0");
        const json_t *e = json_object_get(err, "error"), *id = json_object_get(err, "id");
        int code = (int)json_integer_value(json_object_get(e, "code"));
        bool known = false;
        for (size_t i = 0; i < ELEMENTSOF(codes); i++)
                known |= code == codes[i];
        FUZZ_ASSERT(known && json_is_string(json_object_get(e, "message")),
                    "an error with code %d or no message", code);
        FUZZ_ASSERT(json_is_null(id) || json_is_string(id) || json_is_integer(id),
                    "an error's id is not null, a string or an integer");
        if (!plain)
                FUZZ_ASSERT(code == RPC_PARSE_ERROR || code == RPC_INVALID_REQUEST,
                            "no JSON answered %d", code);
        /* a batch is never taken: refused as one, or as no JSON where
         * the library's reader is stricter than jansson's */
        if (json_is_array(plain))
                FUZZ_ASSERT((code == RPC_INVALID_REQUEST || code == RPC_PARSE_ERROR) &&
                            json_is_null(id), "a batch answered %d", code);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *line[LINES] = { 0 };
        const char *p = (const char *)data, *end = p + size;
        uint64_t ev;

        for (size_t i = 0; i < LINES; i++) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *e = nl ? nl : end;
                line[i] = strndup(p, (size_t)(e - p));
                if (!line[i])
                        abort();
                p = nl ? nl + 1 : end;
        }
#define HDR(i) (strcmp(line[i], "-") ? line[i] : NULL)
        const char *allowed = HDR(0), *origin = HDR(1), *accept = HDR(2), *sid = HDR(3),
                   *last = HDR(4);

        /* Origin */
        bool ok = hub_mcp_origin_ok(allowed, origin);
        if (!origin)
                FUZZ_ASSERT(ok, "no Origin refused");
        else if (!*origin || !allowed)
                FUZZ_ASSERT(!ok, "Origin '%s' taken by list '%s'", origin, allowed ?: "(none)");
        else
                FUZZ_ASSERT(ok == (!strpbrk(origin, " \t,") && listed(allowed, origin)),
                            "Origin '%s' %s by list '%s'", origin, ok ? "taken" : "refused",
                            allowed);

        /* Accept */
        if (!accept) {
                FUZZ_ASSERT(hub_mcp_accepts(accept, "application/json"), "no Accept refused");
        } else if (!strchr(accept, '*')) {
                FUZZ_ASSERT(!hub_mcp_accepts(accept, "text/event-stream") ||
                            strcasestr(accept, "text/event-stream"),
                            "Accept '%s' takes text/event-stream", accept);
                FUZZ_ASSERT(!hub_mcp_accepts(accept, "application/json") ||
                            strcasestr(accept, "application/json"),
                            "Accept '%s' takes application/json", accept);
        }

        /* Mcp-Session-Id */
        if (sid) {
                bool hex = strlen(sid) == 32;
                for (size_t i = 0; hex && sid[i]; i++)
                        hex = isdigit((unsigned char)sid[i]) || (sid[i] >= 'a' && sid[i] <= 'f');
                FUZZ_ASSERT(hub_mcp_session_id_valid(sid) == hex, "session id '%s' judged %s",
                            sid, hex ? "invalid" : "valid");
        }

        /* Last-Event-ID */
        if (hub_mcp_event_id(last, &ev) == 0) {
                char back[32];
                if (last && *last) {
                        snprintf(back, sizeof(back), "%llu", (unsigned long long)ev);
                        for (const char *d = last; *d; d++)
                                FUZZ_ASSERT(isdigit((unsigned char)*d), "Last-Event-ID '%s' taken",
                                            last);
                        /* leading zeros aside, it reads as its digits */
                        const char *z = last;
                        while (z[0] == '0' && z[1])
                                z++;
                        FUZZ_ASSERT(!strcmp(back, z), "Last-Event-ID '%s' read as %s", last, back);
                } else {
                        FUZZ_ASSERT(ev == 0, "no Last-Event-ID read as %llu", (unsigned long long)ev);
                }
        }

        check_parse(p, (size_t)(end - p));
        for (size_t i = 0; i < LINES; i++)
                free(line[i]);
        return 0;
}
