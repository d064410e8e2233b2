/* libFuzzer target: a2a/1 payloads (JSON, the A2A message as the hub
 * writes it); see fuzz_payload.h. */
#include "fuzz_payload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        return fuzz_payload("a2a/1", data, size);
}
