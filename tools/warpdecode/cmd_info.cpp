// warpdecode info: the build, the CUDA device if any, the crossover table
// MoeDispatch takes on it, its memory and its measured streaming-read
// bandwidth.
#include <cstdio>

#include "tools/warpdecode/commands.h"
#include "warpdecode/dispatch_rules.h"
#ifdef WD_HAVE_CUDA
#include "kernels/bandwidth.cuh"
#endif

namespace wd::cli {

void add_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show the build and the CUDA device, with its measured read bandwidth");
  cmd->callback([] {
    std::printf("build   %s\n", build_description().c_str());
    const auto gpu = query_gpu();
    if (!gpu) {
      std::printf("device  none (no CUDA device%s): CPU paths only\n",
#ifdef WD_HAVE_CUDA
                  " found"
#else
                  " support in this build"
#endif
      );
      return;
    }
    std::printf("device  %s, sm_%d%d, %d SMs, %.1f GiB, L2 %.0f MiB, %s\n", gpu->name.c_str(), gpu->cc_major,
                gpu->cc_minor, gpu->sms, double(gpu->memory_bytes) / (1 << 30), double(gpu->l2_bytes) / (1 << 20),
                cuda_versions(*gpu).c_str());
    std::printf("dispatch crossover table: %s\n", CrossoverTable::from_environment(table_card(gpu->name)).source().c_str());
    if (const std::string n = unmeasured_card_note(gpu->name); !n.empty()) std::printf("note    %s\n", n.c_str());
#ifdef WD_HAVE_CUDA
    const auto bw = kernels::measure_bandwidth(size_t(2) << 30, 20, nullptr);
    std::printf("memory  streaming read %.2f TB/s, streaming write %.2f TB/s, device copy %.2f TB/s (measured now, %.0f MiB buffer, median of 20)\n",
                bw.read_tbps, bw.write_tbps, bw.copy_tbps, double(bw.bytes) / (1 << 20));
#endif
  });
}

}  // namespace wd::cli
