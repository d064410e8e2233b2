/* The reason table: one name per hd_reason, used alike by logs, reason
 * files, status counters and tests. */
#include <errno.h>
#include <string.h>

#include "handoff.h"
#include "util.h"

static const char *const reason_names[_HD_R_MAX] = {
        [HD_OK] = "ok",
        [HD_R_TOO_LARGE] = "too_large",
        [HD_R_NOT_REGULAR] = "not_regular",
        [HD_R_HARDLINK] = "hardlink",
        [HD_R_BAD_NAME] = "bad_name",
        [HD_R_PARSE_ERROR] = "parse_error",
        [HD_R_DUPLICATE_KEY] = "duplicate_key",
        [HD_R_TOO_DEEP] = "too_deep",
        [HD_R_BAD_VERSION] = "bad_version",
        [HD_R_MISSING_FIELD] = "missing_field",
        [HD_R_BAD_TYPE] = "bad_type",
        [HD_R_BAD_ID] = "bad_id",
        [HD_R_BAD_AGENT] = "bad_agent",
        [HD_R_SELF_HANDOFF] = "self_handoff",
        [HD_R_BAD_MAC_FORMAT] = "bad_mac_format",
        [HD_R_BAD_MAC] = "bad_mac",
        [HD_R_UNKNOWN_KEY] = "unknown_key",
        [HD_R_BAD_TIMESTAMP] = "bad_timestamp",
        [HD_R_EXPIRED] = "expired",
        [HD_R_FUTURE_TIMESTAMP] = "future_timestamp",
        [HD_R_NUMBER_OUT_OF_RANGE] = "number_out_of_range",
        [HD_R_DUPLICATE_ID] = "duplicate_id",
        [HD_R_PAYLOAD_INVALID] = "payload_invalid",
        [HD_R_DECISION_LOG_REWRITE] = "decision_log_rewrite",
        [HD_R_EXPIRED_UNCLAIMED] = "expired_unclaimed",
        [HD_R_BAD_SIGNATURE] = "bad_signature",
        [HD_R_KEY_AGENT_MISMATCH] = "key_agent_mismatch",
        [HD_R_SIGNATURE_REQUIRED] = "signature_required",
        [HD_R_EXPIRED_UNRELAYED] = "expired_unrelayed",
        [HD_R_TOO_MANY_VALUES] = "too_many_values",
        [HD_R_INBOX_FULL] = "inbox_full",
        [HD_R_UNREADABLE] = "unreadable",
        [HD_R_NOT_SERVED] = "not_served",
        [HD_R_EXPIRED_UNSENT] = "expired_unsent",
        [HD_R_REMOTE_REJECTED] = "remote_rejected",
        [HD_R_BAD_A2A_ID] = "bad_a2a_id",
};

const char *hd_reason_name(hd_reason r)
{
        if ((unsigned)r >= ELEMENTSOF(reason_names))
                return NULL;
        return reason_names[r];
}

int hd_reason_from_name(const char *s)
{
        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(reason_names); i++)
                if (reason_names[i] && strcmp(reason_names[i], s) == 0)
                        return (int)i;
        return -EINVAL;
}
