/* libFuzzer target: act/1.0 payloads (XML through expat, or
 * Markdown), carried as a JSON string; see fuzz_payload.h. */
#include "fuzz_payload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        return fuzz_payload("act/1.0", data, size);
}
