// Progress of a long load: a bar redrawn in place on a terminal, a line per
// 10% otherwise (logs and CI keep a readable record), nothing when quiet.
//
//   terminal   "\r<label> [##########----------]  50%  1.2 / 2.4 GB"
//   lines      "<label>: 50% (1.2 / 2.4 GB)"
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace wd::model {

class Progress {
 public:
  enum class Mode { kAuto, kBar, kLines, kQuiet };  // kAuto: kBar if `out` is a terminal

  Progress(std::string label, uint64_t total_bytes, FILE* out = stderr, Mode mode = Mode::kAuto);
  ~Progress();  // finishes the line if the bar was drawn
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(uint64_t bytes);
  void finish();  // to 100% and end the line (idempotent)
  Mode mode() const { return mode_; }

 private:
  void draw(int percent);

  std::string label_;
  uint64_t total_, done_ = 0;
  FILE* out_;
  Mode mode_;
  int shown_ = -1;  // last percent drawn (bar) or last multiple of 10 printed (lines)
  bool finished_ = false;
};

}  // namespace wd::model
