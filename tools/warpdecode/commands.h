// The warpdecode CLI's subcommands. Each add_* registers one subcommand on
// the app; its callback runs the command and throws wd::Error on failure.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace wd::cli {

void add_info(CLI::App& app);
void add_check(CLI::App& app);
void add_bench_moe(CLI::App& app);  // CUDA builds only
void add_dispatch(CLI::App& app);   // host logic only: every build
void add_crossover_merge(CLI::App& app);  // host logic only: every build
void add_inspect(CLI::App& app);
void add_tokenize(CLI::App& app);  // builds with the tokenizer (PCRE2 + utf8proc) only
void add_accuracy(CLI::App& app);  // every build: GPU kernels where a device is, CPU models otherwise
void add_report(CLI::App& app);
void add_compare(CLI::App& app);

// Every subcommand this build has (only those that work). Their integer
// options take plain decimal only (no octal, hex or wrapped negatives).
void add_all(CLI::App& app);

// The command line as typed (recorded in every JSON we write).
void set_command_line(int argc, char** argv);
const std::string& command_line();
const std::vector<std::string>& command_args();  // argv, one string each

// Build identity, recorded in every JSON we write.
std::string build_commit();
std::string build_description();  // version, commit, CUDA archs or "CPU only"

struct GpuInfo {
  std::string name;
  int sms = 0;
  size_t memory_bytes = 0;
  size_t l2_bytes = 0;
  int cc_major = 0, cc_minor = 0;
  std::string cuda_runtime;
  std::string cuda_driver;         // the CUDA version the driver supports (cudaDriverGetVersion)
  std::string driver = "unknown";  // the driver's own version (NVML, e.g. 580.159.04)
  int max_sm_clock_mhz = 0;                 // cudaDevAttrClockRate
  int sm_clock_mhz = -1, mem_clock_mhz = -1; // current clocks through NVML; -1 if unreadable
};
// The current CUDA device, or nullopt when this build or machine has none.
std::optional<GpuInfo> query_gpu();
// "CUDA <runtime>, driver <version> (CUDA <driver's>)": how every command
// that prints a device names its software.
inline std::string cuda_versions(const GpuInfo& g) {
  return "CUDA " + g.cuda_runtime + ", driver " + g.driver + " (CUDA " + g.cuda_driver + ")";
}

}  // namespace wd::cli
