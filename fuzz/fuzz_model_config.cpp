// libFuzzer target: a checkpoint's config.json (wd::model::parse_config) on
// arbitrary bytes. Any input must end in a ModelConfig or wd::FormatError;
// an accepted config must give the MoE layer shape warp decode validated,
// and a layer count that agrees with is_moe_layer. A crash, a sanitizer
// report, another exception type or a failed check (abort) is a finding.
//
// Build and smoke run: tests/model/CMakeLists.txt (ctest -R fuzz).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "warpdecode/error.h"
#include "warpdecode/model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wd::model::ModelConfig c;
  try {
    c = wd::model::parse_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const wd::FormatError&) {
    return 0;  // the expected outcome for malformed input
  }
  int moe = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) moe += c.is_moe_layer(l) ? 1 : 0;
  if (moe != c.num_moe_layers()) std::abort();
  try {
    c.moe_shape().validate();  // parse_config promised it
  } catch (const wd::InvalidArgument&) {
    std::abort();
  }
  return 0;
}
