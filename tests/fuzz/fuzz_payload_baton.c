/* libFuzzer target: baton/1 payloads (JSON: a baton, or a patch of one);
 * see fuzz_payload.h. */
#include "fuzz_payload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        return fuzz_payload("baton/1", data, size);
}
