#include "tools/warpdecode/commands.h"

#ifndef WD_GIT_COMMIT
#define WD_GIT_COMMIT "unknown"
#endif

namespace wd::cli {

void add_all(CLI::App& app) {
  add_info(app);
  add_check(app);
  add_inspect(app);
  add_accuracy(app);
  add_report(app);
  add_compare(app);
  add_dispatch(app);
  add_crossover_merge(app);
#ifdef WD_HAVE_TOKENIZER
  add_tokenize(app);
#endif
#ifdef WD_HAVE_CUDA
  add_bench_moe(app);
#endif
}

namespace {
std::string g_command_line;
}

void set_command_line(int argc, char** argv) {
  g_command_line.clear();
  for (int i = 0; i < argc; ++i) g_command_line += (i ? " " : "") + std::string(argv[i]);
}

const std::string& command_line() { return g_command_line; }

std::string build_commit() { return WD_GIT_COMMIT; }

std::string build_description() {
  std::string d = std::string("warpdecode ") + WD_VERSION + " (" + build_commit() + ")";
#ifdef WD_HAVE_CUDA
  d += ", CUDA kernels for " WD_CUDA_ARCHS_STR;
#else
  d += ", CPU only (built without CUDA)";
#endif
  return d;
}

}  // namespace wd::cli
