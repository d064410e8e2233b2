/* Receipts: the outcome of a relayed item goes back to its origin host,
 * signed by the host where it ended (handoffd(8), RELAY, receipts); see receipt.c. */
#ifndef HD_RECEIPT_H
#define HD_RECEIPT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

struct relay;
struct relay_in;

/* At relay start: SPOOL/receipts/ and its journal, the keys of [relay] host_key and
 * host_pubkey_dir, the receipts left to publish.  <0 only for a key that
 * cannot be used. */
int receipt_start(struct relay *r);
/* After receipt_start(): the spool's outcome, origin and flush hooks. */
void receipt_hook(struct relay *r);
/* Closes the receipts' loop handle; closed (relay.c's: it counts the
 * relay's handles) runs when the loop has let go of it. */
void receipt_stop(struct relay *r, uv_close_cb closed);
void receipt_free(struct relay *r);

/* Inbound (relay_inbound.c), before the message is renamed into handoff/:
 * id came from host origin, which is owed a receipt for each outcome. */
void receipt_owe(struct relay *r, const char *id, const char *origin);
/* Inbound: a message from host origin that owes receipts said whether
 * origin takes them in batches (its Handoff-Receipts header); the last
 * word stands, in memory (receipt.c). */
void receipt_caps(struct relay *r, const char *origin, bool batch);
/* Inbound: id from host origin, refused unwritten (relay_inbound.c) and
 * verified: its final receipt, rejected for reason. */
void receipt_refused(struct relay *r, const char *id, const char *origin, const char *reason,
                     const char *detail, int64_t now);
/* This host signs and sends receipts ([relay] host_key). */
bool receipt_sending(const struct relay *r);
/* Before the batch is acked: what receipt_owe() wrote is durable. */
int receipt_sync(struct relay *r);
enum receipt_verdict {
        RV_APPLIED,     /* recorded with the archived item */
        RV_DUPLICATE,   /* recorded there already */
        RV_DROPPED,     /* counted: not one this host takes */
        RV_LATER,       /* not now: to be redelivered */
};
/* A receipt from another host: verified, recorded with the archived
 * item.  0 with the verdict in *ret, or <0 (an I/O error: to be
 * redelivered). */
int receipt_in(struct relay *r, const struct relay_in *in, int64_t now, enum receipt_verdict *ret);

/* outbox.c archived id as name: where a receipt for it finds it. */
void receipt_sent(struct relay *r, const char *id, const char *name);

/* For status: {sending, accepting, owed (items whose final receipt this
 * host still owes), queued (receipts written, not yet PubAck'ed), awaited
 * (items relayed from here whose final receipt has not come), sent,
 * applied, duplicate, dropped}. */
json_t *receipt_status(struct relay *r);

/* A cancel message (relay_in.cancel) from an item's origin: into
 * cancel/.  0 (acked: written, or not one) or -errno (not acked). */
int receipt_cancel_in(struct relay *r, const struct relay_in *in);
/* msg_id ended its publish: true when it is a cancel's "ID:cancel"
 * (receipt_cancel.c). */
bool receipt_cancel_puback(struct relay *r, const char *msg_id, bool ok, const char *err);

/* The relay is (again) ready, or a new connection: publish what waits. */
void receipt_resend(struct relay *r);
/* msg_id "ID:OUTCOME" ended its publish. */
void receipt_puback(struct relay *r, const char *msg_id, bool ok, const char *err, int64_t now);

#endif
