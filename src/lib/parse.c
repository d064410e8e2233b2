/* Reading and parsing untrusted handoff files: hd_read_at() opens one name
 * under a held directory fd without following links or blocking on FIFOs
 * and reads it with a size cap; hd_parse() turns bytes into a jansson
 * object with the protocol's limits (NUL bytes, nesting depth, duplicate
 * keys, numbers outside what jansson represents exactly, more values
 * than a cap: what one parse may allocate is bounded). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "handoff.h"
#include "util.h"

static size_t limits_max_size(const hd_limits *lim)
{
        return lim && lim->max_size ? lim->max_size : HD_DEFAULT_MAX_SIZE;
}

static unsigned limits_max_depth(const hd_limits *lim)
{
        return lim && lim->max_depth ? lim->max_depth : HD_DEFAULT_MAX_DEPTH;
}

static size_t limits_max_values(const hd_limits *lim)
{
        return lim && lim->max_values ? lim->max_values : HD_DEFAULT_MAX_VALUES;
}

int hd_read_at(int dirfd, const char *name, size_t max_size,
               char **ret_buf, size_t *ret_len, hd_verdict *v)
{
        _cleanup_close_ int fd = -1;
        int r;

        if (!name || !ret_buf)
                return -EINVAL;
        r = hd_open_at(dirfd, name, &fd, v);
        if (r < 0)
                return r;
        return hd_read_fd(fd, name, max_size, ret_buf, ret_len, v);
}

/* Raw NUL bytes, nesting depth and the number of values, checked before
 * jansson sees the bytes: jansson recurses once per level up to its own
 * limit of 2048, its error for a NUL would not say where it was, and
 * each value it builds costs far more memory than its bytes (an empty
 * object, 3 bytes of "{},", takes about 250), so a 1 MiB file of them
 * would take 80 MB.  Brackets inside strings do not count, so strings
 * and their escapes are tracked.  A value is an object, an array, a
 * string (object keys included) or one scalar token. */
static int parse_prescan(const unsigned char *p, size_t len, unsigned max_depth,
                         size_t max_values, hd_verdict *v)
{
        bool in_string = false, escaped = false, in_token = false;
        size_t depth = 0, values = 0;

        for (size_t i = 0; i < len; i++) {
                unsigned char c = p[i];

                if (c == '\0')
                        return verdict(v, HD_R_PARSE_ERROR,
                                       "NUL byte at offset %zu", i);
                if (in_string) {
                        if (escaped)
                                escaped = false;
                        else if (c == '\\')
                                escaped = true;
                        else if (c == '"')
                                in_string = false;
                        continue;
                }
                switch (c) {
                case '"':
                        in_string = true;
                        in_token = false;
                        values++;
                        break;
                case '[':
                case '{':
                        if (++depth > max_depth)
                                return verdict(v, HD_R_TOO_DEEP,
                                               "nesting deeper than %u at offset %zu",
                                               max_depth, i);
                        in_token = false;
                        values++;
                        break;
                case ']':
                case '}':
                        /* Unbalanced input is jansson's to report. */
                        if (depth > 0)
                                depth--;
                        in_token = false;
                        break;
                case ',': case ':': case ' ': case '\t': case '\r': case '\n':
                        in_token = false;
                        break;
                default:
                        /* numbers, true, false, null (and junk jansson refuses) */
                        if (!in_token)
                                values++;
                        in_token = true;
                        break;
                }
                if (values > max_values)
                        return verdict(v, HD_R_TOO_MANY_VALUES,
                                       "more than %zu values (keys included) at offset %zu",
                                       max_values, i);
        }
        return 0;
}

int hd_parse(const void *buf, size_t len, const hd_limits *lim,
             json_t **ret, hd_verdict *v)
{
        size_t max_size = limits_max_size(lim);
        json_t *doc;
        json_error_t err;
        int r;

        if ((!buf && len > 0) || !ret)
                return -EINVAL;
        verdict_clear(v);

        if (len > max_size)
                return verdict(v, HD_R_TOO_LARGE, "%zu bytes, limit %zu",
                               len, max_size);
        r = parse_prescan(buf, len, limits_max_depth(lim), limits_max_values(lim), v);
        if (r < 0)
                return r;

        /* JSON_DECODE_ANY so that a top-level scalar is a bad_type like a
         * top-level array, not a syntax error. */
        doc = json_loadb(len > 0 ? buf : "", len,
                         JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
        if (!doc) {
                switch (json_error_code(&err)) {
                case json_error_out_of_memory:
                        return -ENOMEM;
                case json_error_duplicate_key:
                        return verdict(v, HD_R_DUPLICATE_KEY, "%s", err.text);
                case json_error_numeric_overflow:
                        /* "too big integer", "too big negative integer",
                         * "real number overflow" */
                        return verdict(v, HD_R_NUMBER_OUT_OF_RANGE,
                                       "%s at line %d column %d",
                                       err.text, err.line, err.column);
                case json_error_stack_overflow:
                        return verdict(v, HD_R_TOO_DEEP, "%s", err.text);
                default:
                        return verdict(v, HD_R_PARSE_ERROR,
                                       "%s at line %d column %d",
                                       err.text, err.line, err.column);
                }
        }
        if (!json_is_object(doc)) {
                json_decref(doc);
                return verdict(v, HD_R_BAD_TYPE,
                               "top level is not a JSON object");
        }
        *ret = doc;
        return 0;
}

int hd_load_at(int dirfd, const char *name, const hd_limits *lim,
               json_t **ret, hd_verdict *v)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r;

        r = hd_read_at(dirfd, name, limits_max_size(lim), &buf, &len, v);
        if (r < 0)
                return r;
        return hd_parse(buf, len, lim, ret, v);
}

int load_at_linked(int dirfd, const char *name, const hd_limits *lim,
                   json_t **ret, hd_verdict *v)
{
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t len;
        int r;

        if (!name || !ret)
                return -EINVAL;
        r = hd_open_at(dirfd, name, &fd, v);
        if (r < 0)
                return r;
        if (fstat(fd, &st) < 0)
                return -errno;
        /* The daemon's record of a claimed item is a second link of the
         * agent's bootstrap (issue 25).  A second link matters when
         * someone else may write through it: not when only the owner
         * may write the file at all. */
        if (st.st_nlink > 1 && !(st.st_mode & (S_IWGRP | S_IWOTH)))
                st.st_nlink = 1;
        r = read_fd_stat(fd, &st, name, limits_max_size(lim), &buf, &len, v);
        if (r < 0)
                return r;
        return hd_parse(buf, len, lim, ret, v);
}
