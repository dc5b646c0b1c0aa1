#include "tools/warpdecode/commands.h"

namespace wd::cli {
std::optional<GpuInfo> query_gpu() { return std::nullopt; }
}  // namespace wd::cli
