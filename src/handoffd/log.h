/* Logging: one line per decision.  Under journald (JOURNAL_STREAM names our
 * stderr) lines go to the journal with structured fields HANDOFF_ID=,
 * AGENT=, OUTCOME=, REASON= (libsystemd, loaded by log_setup() then);
 * otherwise plain lines on stderr. */
#ifndef HD_LOG_H
#define HD_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>

#include "util.h"

void log_setup(int max_priority);
void log_set_max_priority(int p);
/* Label the lines that follow (NULL: no more) as expected by a test. */
void log_set_expected(const char *why);
/* Out with the plain lines buffered so far (no-op under the journal);
 * whether there are any. */
void log_flush(void);
bool log_pending(void);

/* Returns -abs(err) (or 0 when err is 0) so callers can `return log_...`. */
int log_full(int prio, int err, const char *fmt, ...) _printf_(3, 4);

/* A decision about one item; fields may be NULL. */
void log_decision(int prio, const char *handoff_id, const char *agent,
                  const char *outcome, const char *reason, const char *fmt,
                  ...) _printf_(6, 7);

/* Quote an untrusted string for a log line into buf (C-style escapes,
 * capped); returns buf. */
const char *log_quote(const char *s, char *buf, size_t n);

/* A flood of one kind of event (refusals of whoever can write a
 * directory or connect) logs a line at most once per LOG_QUIET_USEC,
 * saying how many it stands for: nobody fills the journal.  Zeroed to
 * start. */
#define LOG_QUIET_USEC (10 * 1000000LL)
struct log_quiet {
        int64_t last_usec;      /* of the last line; 0: none yet */
        unsigned n;             /* events since it, not logged */
};
/* One more event at now_usec (mono_usec()): true when its line is due,
 * *ret_n then the events it stands for (this one and those not logged
 * since the last line). */
bool log_quiet_due(struct log_quiet *q, int64_t now_usec, unsigned *ret_n);

#define log_debug(...)   log_full(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...)    log_full(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...)  log_full(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...)   log_full(LOG_ERR, 0, __VA_ARGS__)
#define log_error_errno(e, ...)   log_full(LOG_ERR, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_full(LOG_WARNING, (e), __VA_ARGS__)

#endif
