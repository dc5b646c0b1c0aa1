#include "tools/warpdecode/commands.h"

#ifndef WD_GIT_COMMIT
#define WD_GIT_COMMIT "unknown"
#endif

namespace wd::cli {
namespace {

// "" when s is a plain decimal integer: digits, with a leading '-' only where
// the option is signed, and no leading zero.
std::string decimal_error(const std::string& s, bool is_signed) {
  const size_t first = !s.empty() && s[0] == '-' ? 1 : 0;
  const bool digits = first < s.size() && s.find_first_not_of("0123456789", first) == std::string::npos;
  if (!digits || (s[first] == '0' && s.size() > first + 1))
    return "'" + s + "' is not a decimal integer: digits with an optional '-', no leading zero";
  if (first == 1 && !is_signed) return "'" + s + "' is negative";
  return "";
}

// CLI11 reads integers with strtoll(s, 0): "010" is 8 (octal), "0x10" is 16,
// and "-1" wraps to 2^64 - 1 in an unsigned option. Every integer option of
// the tool, in every subcommand, takes plain decimal instead (CLI11 names the
// option and the value in its error).
void require_decimal_integers(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    if (o->get_type_size_max() == 0) continue;  // a flag
    const std::string type = o->get_type_name();
    const bool is_unsigned = type.rfind("UINT", 0) == 0, is_signed = type.rfind("INT", 0) == 0;
    if (!is_unsigned && !is_signed) continue;
    o->check(CLI::Validator([is_signed](std::string& s) { return decimal_error(s, is_signed); }, ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) require_decimal_integers(*sub);
}

}  // namespace

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
  require_decimal_integers(app);
}

namespace {
std::string g_command_line;
std::vector<std::string> g_command_args;
}

void set_command_line(int argc, char** argv) {
  g_command_line.clear();
  g_command_args.assign(argv, argv + argc);
  for (int i = 0; i < argc; ++i) g_command_line += (i ? " " : "") + std::string(argv[i]);
}

const std::string& command_line() { return g_command_line; }
const std::vector<std::string>& command_args() { return g_command_args; }

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
