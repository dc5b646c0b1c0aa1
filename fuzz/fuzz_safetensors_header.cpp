// libFuzzer target: the safetensors header parser on arbitrary bytes (the
// input is a whole file). Any input must end in success or wd::FormatError:
// a crash, a sanitizer report, another exception type, a hang (-timeout) or a
// large allocation (-rss_limit_mb / -malloc_limit_mb) is a finding.
//
// Build and smoke run: tests/model/CMakeLists.txt (ctest -R fuzz), or by hand:
//   cmake -S fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ && cmake --build build-fuzz
//   ./build-fuzz/fuzz_safetensors_header -max_total_time=60 /tmp/new fuzz/corpus/safetensors_header
#include <cstddef>
#include <cstdint>

#include "warpdecode/error.h"
#include "warpdecode/model/safetensors.h"
#include "warpdecode/model/tensor_data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto h = wd::model::parse_safetensors_header(data, size, "fuzz");
    // Touch every accepted tensor's bytes: validated ranges must lie inside
    // the input (ASan catches a read past it).
    for (const auto& t : h.tensors) {
      if (t.bytes() > 0) {
        volatile uint8_t sink = t.data[0];
        sink = t.data[t.bytes() - 1];
        (void)sink;
      }
      if (wd::model::dtype_decodable(t.dtype) && t.numel() > 0) {
        float v;
        wd::model::decode(t, t.numel() - 1, 1, &v);
      }
    }
  } catch (const wd::FormatError&) {
    // The expected outcome for malformed input.
  }
  return 0;
}
