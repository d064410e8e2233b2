/* libFuzzer target: vox/1.0 payloads (JSON);
 * see fuzz_payload.h. */
#include "fuzz_payload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        return fuzz_payload("vox/1.0", data, size);
}
