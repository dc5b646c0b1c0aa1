// Whole-file reads for the readers of small files: config.json, the
// checkpoint's index, crossover tables, tokenizer.json and the tokenizer's
// side files, bench-moe and accuracy JSON. One path, so that every such
// error says why (the system's reason, a directory, a size past the limit),
// a directory is never parsed as an empty file, and a wrong path to a
// multi-GB weight shard is refused from its size instead of read into memory.
// Header-only: the tokenizer and the fuzz targets build without the core
// library.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "warpdecode/error.h"

namespace wd {

// Far above any file these readers take (Qwen3's tokenizer.json is 11 MB),
// far below a weight shard.
constexpr uint64_t kReadFileLimit = uint64_t(256) << 20;

// Whether `path` names a regular file (links followed).
inline bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// `path` opened read-only, with its stat: the one open of the file readers
// (read_file below, and model::MappedFile), so that each failure gets one
// phrasing, "cannot read '<path>': <why>" (the system's reason, or "it is a
// directory": a directory opens read-only on Linux, and errno then says
// nothing). Closes the descriptor when it goes.
class OpenedFile {
 public:
  explicit OpenedFile(const std::string& path)
      : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw error(std::strerror(errno));
    if (::fstat(fd_, &st_) != 0) {
      const int err = errno;
      ::close(fd_);
      throw error(std::strerror(err));
    }
    if (S_ISDIR(st_.st_mode)) {
      ::close(fd_);
      throw error("it is a directory");
    }
  }
  ~OpenedFile() { ::close(fd_); }
  OpenedFile(const OpenedFile&) = delete;
  OpenedFile& operator=(const OpenedFile&) = delete;

  int fd() const { return fd_; }
  const struct stat& stat() const { return st_; }
  FormatError error(const std::string& why) const { return FormatError("cannot read '" + path_ + "': " + why); }

 private:
  std::string path_;
  int fd_;
  struct stat st_ {};
};

// The bytes of the file at `path`, at most `limit` of them. Throws
// FormatError "cannot read '<path>': <why>". Pipes and other non-directory
// files are read to their end (`--table <(…)` works).
inline std::string read_file(const std::string& path, uint64_t limit = kReadFileLimit) {
  const OpenedFile f(path);
  const std::string limit_text = "the " + std::to_string(limit) + "-byte limit for this file";
  std::string out;
  if (S_ISREG(f.stat().st_mode)) {
    if (uint64_t(f.stat().st_size) > limit)
      throw f.error(std::to_string(f.stat().st_size) + " bytes, past " + limit_text);
    out.reserve(size_t(f.stat().st_size));
  }
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(f.fd(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw f.error(std::strerror(errno));
    if (n == 0) return out;
    if (out.size() + size_t(n) > limit) throw f.error("more than " + limit_text);
    out.append(buf, size_t(n));
  }
}

}  // namespace wd
