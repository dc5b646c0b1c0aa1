// libFuzzer target that fails on purpose: the self-test of fuzz/smoke.sh,
// which must fail on a finding that reproduces and pass, with a warning, on
// one that does not. An input that begins with
//   "crash" aborts every time it runs;
//   "once"  aborts the first time only: the first run creates the file named
//           by WD_FUZZ_SELFTEST_MARKER, and a run that finds it passes (a
//           finding of the machine, not of the code).
// Any other input passes. Built and run by tests/model/CMakeLists.txt.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

bool starts_with(const uint8_t* data, size_t size, const char* prefix) {
  const size_t n = std::strlen(prefix);
  return size >= n && std::memcmp(data, prefix, n) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (starts_with(data, size, "crash")) std::abort();
  if (starts_with(data, size, "once")) {
    const char* marker = std::getenv("WD_FUZZ_SELFTEST_MARKER");
    if (!marker) std::abort();  // the test must name its marker
    if (std::FILE* f = std::fopen(marker, "r")) {
      std::fclose(f);
      return 0;
    }
    std::FILE* f = std::fopen(marker, "w");
    if (!f) std::abort();
    std::fclose(f);
    std::abort();
  }
  return 0;
}
