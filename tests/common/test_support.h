// Helpers shared by the test suites: running the warpdecode binary as a user
// does, temporary files, and drawing random explicit routings.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "warpdecode/layout.h"

namespace wd::test {

// A fresh seed per call, from a generator seeded once per process by the
// system: GPU tests draw new random inputs on every run.
inline uint64_t fresh_seed() {
  static std::mt19937_64 g(std::random_device{}());
  return g();
}

// A custom MoE shape (norm_topk_prob on, one layer).
inline MoeShape make_shape(int H, int I, int E, int K) {
  MoeShape s;
  s.hidden = H;
  s.intermediate = I;
  s.experts = E;
  s.top_k = K;
  return s;
}

// Writes `text` to a fresh file under /tmp and returns its path (the caller
// removes it); an empty string if the file could not be made.
inline std::string write_temp_file(const std::string& text) {
  char name[] = "/tmp/wd_test_XXXXXX";
  const int fd = mkstemp(name);
  if (fd < 0) return "";
  const bool ok = write(fd, text.data(), text.size()) == ssize_t(text.size());
  close(fd);
  return ok ? name : "";
}

struct CliResult {
  int status;          // exit status; -1 if the process did not exit normally
  std::string output;  // stdout and stderr together
};

// Runs `cli args` through the shell, capturing both streams.
inline CliResult run_cli(const std::string& cli, const std::string& args) {
  const std::string cmd = cli + " " + args + " 2>&1";
  CliResult r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// Explicit routing of B tokens: K distinct experts of E per token, uniformly
// at random, positive weights summing to 1. Deterministic in seed.
struct HostRouting {
  std::vector<int32_t> ids;  // (B, K)
  std::vector<double> w;     // (B, K)
};

inline HostRouting random_routing(int B, int E, int K, uint64_t seed) {
  std::mt19937_64 g(seed);
  HostRouting r;
  std::vector<int32_t> perm(E);
  for (int b = 0; b < B; ++b) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), g);
    double sum = 0;
    std::vector<double> ws(K);
    for (int k = 0; k < K; ++k) sum += ws[k] = 0.1 + std::uniform_real_distribution<double>(0, 1)(g);
    for (int k = 0; k < K; ++k) {
      r.ids.push_back(perm[k]);
      r.w.push_back(ws[k] / sum);
    }
  }
  return r;
}

}  // namespace wd::test
