/* Logging to the journal or stderr; see log.h.
 *
 * libsystemd is loaded only when the journal is where stderr goes
 * (dlopen, as systemd itself loads its optional libraries): a daemon
 * logging to a terminal or a file does not map it, nor the compression
 * and crypto libraries it pulls in.  The header gives the pointer its
 * type, so a changed prototype breaks the build. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-journal.h>

#include "log.h"

#define LIBSYSTEMD "libsystemd.so.0"

static int max_prio = LOG_INFO;
static int to_journal;
static typeof(sd_journal_send) *sym_sd_journal_send;

/* The journal's sender, or, said once on stderr, plain lines (journald
 * still records them from the stream, without the fields). */
static void journal_load(void)
{
        static bool tried;
        const char *err;
        void *dl;

        if (tried)
                return;
        tried = true;
        dl = dlopen(LIBSYSTEMD, RTLD_NOW | RTLD_NODELETE);
        if (dl) {
                sym_sd_journal_send = (typeof(sym_sd_journal_send))dlsym(dl, "sd_journal_send");
                if (sym_sd_journal_send) {
                        to_journal = 1;
                        return;
                }
        }
        err = dlerror();
        fprintf(stderr, "handoffd[warning]: Cannot load %s (%s): plain lines without "
                "journal fields\n", LIBSYSTEMD, err ? err : "unknown error");
        if (dl)
                dlclose(dl);
}

void log_set_max_priority(int p) { max_prio = p; }

/* Tests that provoke an error on purpose label its line, so that a
 * passing run's log has nothing that reads as a failure. */
static const char *expected;
void log_set_expected(const char *why) { expected = why; }

/* Plain lines are buffered: a burst's "Claimed" lines leave in one write
 * every LOG_FLUSH_MS (daemon.c), not one write each (issue 25: a write
 * per item was a tenth of the daemon's system calls), nor one a batch (a
 * fifth of a call per item in a burst); a warning or an error goes out
 * at once, with what is before it.  A kill loses at most the info lines
 * of the last LOG_FLUSH_MS. */
static char line_buf[16384];

void log_flush(void)
{
        if (!to_journal)
                (void)fflush(stderr);
}

bool log_pending(void)
{
        return !to_journal && __fpending(stderr) > 0;
}

void log_setup(int p)
{
        const char *js = getenv("JOURNAL_STREAM");
        struct stat st;
        unsigned long long dev, ino;

        max_prio = p;
        /* JOURNAL_STREAM is "DEV:INO" of the stream systemd gave us; only
         * when stderr still is that stream do we talk to journald. */
        if (js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
            fstat(STDERR_FILENO, &st) == 0 && st.st_dev == dev &&
            st.st_ino == ino)
                journal_load();
        if (!to_journal)
                (void)setvbuf(stderr, line_buf, _IOFBF, sizeof(line_buf));
}

const char *log_quote(const char *s, char *buf, size_t n)
{
        size_t o = 0;

        if (!s)
                return "(null)";
        if (n < 8)
                return "";
        buf[o++] = '\'';
        for (; *s && o + 6 < n; s++) {
                unsigned char c = (unsigned char)*s;
                if (c == '\'' || c == '\\') {
                        buf[o++] = '\\';
                        buf[o++] = (char)c;
                } else if (c < 0x20 || c == 0x7f) {
                        o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
                } else {
                        buf[o++] = (char)c;
                }
        }
        if (*s && o + 4 < n) {
                memcpy(buf + o, "...", 3);
                o += 3;
        }
        buf[o++] = '\'';
        buf[o] = '\0';
        return buf;
}

static void emit(int prio, const char *msg, const char *id, const char *agent,
                 const char *outcome, const char *reason)
{
        static const char *const names[] = { "emerg", "alert", "crit",
                "error", "warning", "notice", "info", "debug" };

        if (prio > max_prio)
                return;
        if (to_journal) {
                sym_sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%d", prio,
                                    "SYSLOG_IDENTIFIER=handoffd",
                                    "HANDOFF_ID=%s", id ? id : "",
                                    "AGENT=%s", agent ? agent : "",
                                    "OUTCOME=%s", outcome ? outcome : "",
                                    "REASON=%s", reason ? reason : "", NULL);
                return;
        }
        if (expected)
                fprintf(stderr, "handoffd[%s] (expected: %s): %s\n", names[prio & 7], expected, msg);
        else
                fprintf(stderr, "handoffd[%s]: %s\n", names[prio & 7], msg);
        if (prio <= LOG_WARNING)
                (void)fflush(stderr);
}

int log_full(int prio, int err, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        int n;

        if (err < 0)
                err = -err;
        if (prio <= max_prio) {
                va_start(ap, fmt);
                n = vsnprintf(msg, sizeof(msg), fmt, ap);
                va_end(ap);
                if (err && n >= 0 && (size_t)n < sizeof(msg))
                        snprintf(msg + n, sizeof(msg) - (size_t)n, ": %s",
                                 strerror(err));
                emit(prio, msg, NULL, NULL, NULL, NULL);
        }
        return -err;
}

void log_decision(int prio, const char *id, const char *agent,
                  const char *outcome, const char *reason, const char *fmt,
                  ...)
{
        char msg[1024];
        va_list ap;

        if (prio > max_prio)
                return;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        emit(prio, msg, id, agent, outcome, reason);
}

bool log_quiet_due(struct log_quiet *q, int64_t now_usec, unsigned *ret_n)
{
        q->n++;
        if (q->last_usec && now_usec - q->last_usec < LOG_QUIET_USEC)
                return false;
        /* never 0 again, so never taken for "none yet" */
        q->last_usec = now_usec ? now_usec : 1;
        *ret_n = q->n;
        q->n = 0;
        return true;
}
