/* Private: a2a/1, an A2A (Agent2Agent 1.0) message carried as a handoff's
 * payload (payload_a2a.c): handoff-hubd turns a SendMessage into it, the
 * daemon validates it like any payload, the agent reads it in its
 * bootstrap.  The payload is the message in A2A 1.0's JSON names, limited
 * to what a handoff carries:
 *
 *   {"messageId": S, "contextId": S, "taskId"?: S,
 *    "role"?: "ROLE_USER"|"ROLE_AGENT",
 *    "parts": [PART, ...], "metadata"?: {...}, "referenceTaskIds"?: [S]}
 *   PART = {"text": S | "data": ANY | "url": URI,
 *           "mediaType"?: S, "filename"?: S, "metadata"?: {...}}
 *
 * taskId: the task this message continues (an answer to the agent's
 * question, handoff-hubd(8) MULTI-TURN TASKS).  Inline file bytes
 * ("raw") do not travel: a file goes by URI. */
#ifndef HD_PAYLOAD_A2A_H
#define HD_PAYLOAD_A2A_H

#include <jansson.h>

#include "handoff.h"

#define A2A_MAX_PARTS 256
#define A2A_MAX_ID 256          /* messageId, contextId, a reference */
#define A2A_MAX_URL 8192

int payload_a2a_validate(const json_t *p, const json_t *envelope,
                         const char *const *roles, hd_verdict *v);
int render_a2a(const json_t *p, char **ret);

/* What an A2A client's message (SendMessageRequest.message) makes.
 * A2A_MSG_OK with *ret (the payload, contextId set to context_id when the
 * message has none), or the kind of refusal with v's detail. */
enum a2a_msg_verdict {
        A2A_MSG_OK,
        A2A_MSG_INVALID,                /* InvalidParams */
        A2A_MSG_CONTENT_UNSUPPORTED,    /* ContentTypeNotSupportedError */
};
/* Returns 0 (with *ret_kind) or -ENOMEM. */
int a2a_message_payload(const json_t *msg, const char *context_id, json_t **ret,
                        enum a2a_msg_verdict *ret_kind, hd_verdict *v);

/* The A2A task id (= handoff_id) of message_id from from to to:
 * A2A_TASK_ID_PREFIX and the hex of a BLAKE2b hash keyed with a subkey
 * of k, the HMAC key the hub signs the sender's handoffs with and the
 * daemon checks them with.  Who lacks that key cannot compute a task's
 * id before it is sent.  0, -EINVAL (k no HMAC key), -ENAMETOOLONG. */
#define A2A_TASK_ID_PREFIX "a2a-"
#define A2A_TASK_ID_BYTES 20
int payload_a2a_task_id(const hd_key *k, const char *from, const char *to,
                        const char *message_id, char *id, size_t n);
/* A handoff_id that begins A2A_TASK_ID_PREFIX is the hub's: 0 when it
 * is the task id of the document's own from_agent, to_agent and
 * payload messageId under k (the key that verified it), else
 * HD_R_BAD_A2A_ID in v (-EBADMSG).  Any other id: 0. */
int payload_a2a_id_check(const json_t *doc, const hd_key *k, hd_verdict *v);

#endif
