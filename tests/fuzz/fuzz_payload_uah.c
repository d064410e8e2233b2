/* libFuzzer target: U.AgentHandoff/0.1.0 payloads (YAML
 * through libyaml, or JSON); see fuzz_payload.h. */
#include "fuzz_payload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        return fuzz_payload("U.AgentHandoff/0.1.0", data, size);
}
