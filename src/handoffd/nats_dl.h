/* libnats, loaded when the relay starts (dlopen, the way systemd loads
 * its optional libraries): a daemon without [relay] never maps libnats
 * nor the TLS and protobuf libraries it pulls in.
 *
 * The relay calls every libnats function through sym_NAME, a pointer of
 * the type of NAME's prototype in <nats/nats.h> (so a changed prototype
 * breaks the build), filled by nats_dl_open().  A function the relay
 * starts to use goes into NATS_DL_SYMBOLS. */
#ifndef HD_NATS_DL_H
#define HD_NATS_DL_H

#include <nats/nats.h>

/* The SONAME of the libnats the build's headers are from (objdump -p
 * libnats.so | grep SONAME): its ABI is the one these prototypes give. */
#define NATS_DL_SONAME "libnats.so.3.4"

#define NATS_DL_SYMBOLS(X) \
        X(jsConsumerConfig_Init) \
        X(jsConsumerInfo_Destroy) \
        X(jsCtx_Destroy) \
        X(jsFetchRequest_Init) \
        X(jsOptions_Init) \
        X(jsPubOptions_Init) \
        X(jsStreamConfig_Init) \
        X(jsStreamInfo_Destroy) \
        X(jsSubOptions_Init) \
        X(js_AddConsumer) \
        X(js_AddStream) \
        X(js_GetConsumerInfo) \
        X(js_GetStreamInfo) \
        X(js_PublishMsgAsync) \
        X(js_PullSubscribe) \
        X(natsConnection_Close) \
        X(natsConnection_Connect) \
        X(natsConnection_Destroy) \
        X(natsConnection_GetConnectedUrl) \
        X(natsConnection_GetLastError) \
        X(natsConnection_JetStream) \
        X(natsMsgHeader_Get) \
        X(natsMsgHeader_Set) \
        X(natsMsgList_Destroy) \
        X(natsMsg_Ack) \
        X(natsMsg_Create) \
        X(natsMsg_Destroy) \
        X(natsMsg_GetData) \
        X(natsMsg_GetDataLength) \
        X(natsMsg_GetSubject) \
        X(natsMsg_NakWithDelay) \
        X(natsOptions_Create) \
        X(natsOptions_Destroy) \
        X(natsOptions_LoadCATrustedCertificates) \
        X(natsOptions_LoadCertificatesChain) \
        X(natsOptions_SetClosedCB) \
        X(natsOptions_SetDisconnectedCB) \
        X(natsOptions_SetErrorHandler) \
        X(natsOptions_SetMaxPingsOut) \
        X(natsOptions_SetMaxReconnect) \
        X(natsOptions_SetNKeyFromSeed) \
        X(natsOptions_SetName) \
        X(natsOptions_SetPingInterval) \
        X(natsOptions_SetReconnectWait) \
        X(natsOptions_SetReconnectedCB) \
        X(natsOptions_SetRetryOnFailedConnect) \
        X(natsOptions_SetSecure) \
        X(natsOptions_SetServers) \
        X(natsOptions_SetUserCredentialsFromFiles) \
        X(natsOptions_SetUserInfo) \
        X(natsStatus_GetText) \
        X(natsSubscription_Destroy) \
        X(natsSubscription_Fetch) \
        X(natsSubscription_FetchRequest) \
        X(nats_CloseAndWait) \
        X(nats_GetLastError)

#define NATS_DL_DECLARE(f) extern typeof(f) *sym_##f;
NATS_DL_SYMBOLS(NATS_DL_DECLARE)
#undef NATS_DL_DECLARE

/* Load the library and every symbol (once; later calls return at once).
 * A failure is logged here, naming the library: -ELIBACC when it cannot
 * be loaded, -ELIBBAD when a symbol is missing. */
int nats_dl_open(void);

#endif
