// Load progress on a terminal or in a log. See warpdecode/model/progress.h.
#include "warpdecode/model/progress.h"

#include <unistd.h>

#include <algorithm>

namespace wd::model {
namespace {

constexpr int kBarWidth = 30;

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GB", double(b) / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%.1f MB", double(b) / 1e6);
  return buf;
}

}  // namespace

Progress::Progress(std::string label, uint64_t total_bytes, FILE* out, Mode mode)
    : label_(std::move(label)), total_(total_bytes), out_(out), mode_(mode) {
  if (mode_ == Mode::kAuto) mode_ = (out_ && ::isatty(::fileno(out_))) ? Mode::kBar : Mode::kLines;
  if (!out_) mode_ = Mode::kQuiet;
  draw(0);
}

Progress::~Progress() {
  if (mode_ == Mode::kBar && !finished_ && shown_ >= 0) std::fputc('\n', out_);
}

void Progress::advance(uint64_t bytes) {
  done_ = std::min(total_, done_ + bytes);
  draw(total_ == 0 ? 100 : int(done_ * 100 / total_));
}

void Progress::finish() {
  if (finished_) return;
  done_ = total_;
  draw(100);
  if (mode_ == Mode::kBar) std::fputc('\n', out_);
  finished_ = true;
  if (out_) std::fflush(out_);
}

void Progress::draw(int percent) {
  if (mode_ == Mode::kQuiet || finished_) return;
  if (mode_ == Mode::kBar) {
    if (percent == shown_) return;
    const int fill = percent * kBarWidth / 100;
    std::fprintf(out_, "\r%s [%s%s] %3d%%  %s / %s", label_.c_str(), std::string(fill, '#').c_str(),
                 std::string(kBarWidth - fill, '-').c_str(), percent, human_bytes(done_).c_str(),
                 human_bytes(total_).c_str());
  } else {
    const int step = percent / 10 * 10;
    if (step <= shown_) return;
    std::fprintf(out_, "%s: %d%% (%s / %s)\n", label_.c_str(), step, human_bytes(done_).c_str(),
                 human_bytes(total_).c_str());
  }
  shown_ = mode_ == Mode::kBar ? percent : percent / 10 * 10;
  std::fflush(out_);
}

}  // namespace wd::model
