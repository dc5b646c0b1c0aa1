// core/read_file.h: the one whole-file read of the small-file readers
// (config.json, the index, crossover tables, tokenizer files, bench JSON).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "core/read_file.h"
#include "warpdecode/error.h"

namespace wd {
namespace {

std::string temp_dir() {
  std::string t = ::testing::TempDir() + "wd_read_file_XXXXXX";
  if (!::mkdtemp(&t[0])) throw std::runtime_error("mkdtemp failed");
  return t;
}

std::string error_of(const std::string& path, uint64_t limit = kReadFileLimit) {
  try {
    read_file(path, limit);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "(read)";
}

TEST(ReadFile, ReturnsEveryByte) {
  const std::string dir = temp_dir();
  std::string bytes(200000, '\0');  // more than one read, NULs and all byte values
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 2654435761u >> 13);
  std::ofstream(dir + "/f", std::ios::binary) << bytes;
  EXPECT_EQ(read_file(dir + "/f"), bytes);
  EXPECT_EQ(read_file(dir + "/f", bytes.size()), bytes);  // the limit is inclusive
  std::ofstream(dir + "/empty", std::ios::binary).flush();
  EXPECT_EQ(read_file(dir + "/empty"), "");
  EXPECT_EQ(read_file("/dev/null"), "");  // not a regular file, not a directory: read to its end
  EXPECT_TRUE(is_regular_file(dir + "/f"));
  EXPECT_FALSE(is_regular_file(dir));
  EXPECT_FALSE(is_regular_file(dir + "/missing"));
  EXPECT_FALSE(is_regular_file("/dev/null"));
}

// Each failure names the path and says why, in one line.
TEST(ReadFile, EachFailureSaysWhy) {
  const std::string dir = temp_dir();
  EXPECT_EQ(error_of(dir + "/missing"), "cannot read '" + dir + "/missing': " + std::strerror(ENOENT));
  EXPECT_EQ(error_of(dir), "cannot read '" + dir + "': it is a directory");
  std::ofstream(dir + "/f", std::ios::binary) << std::string(11, 'x');
  EXPECT_EQ(error_of(dir + "/f", 10), "cannot read '" + dir + "/f': 11 bytes, past the 10-byte limit for this file");
  if (::geteuid() != 0) {  // root reads a mode-000 file anyway
    ::chmod((dir + "/f").c_str(), 0);
    EXPECT_EQ(error_of(dir + "/f"), "cannot read '" + dir + "/f': " + std::strerror(EACCES));
  }
}

// A pipe has no size up front: the limit stops the read itself.
TEST(ReadFile, APipeIsReadToItsEndAndStoppedAtTheLimit) {
  const std::string dir = temp_dir();
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  // The reader stops early in the second case: the writer's next write then
  // fails with EPIPE instead of killing the process.
  const auto old = std::signal(SIGPIPE, SIG_IGN);
  for (const uint64_t limit : {uint64_t(100000), uint64_t(1000)}) {
    const std::string bytes(70000, 'p');
    std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << bytes; });
    if (limit >= bytes.size()) {
      EXPECT_EQ(read_file(fifo, limit), bytes);
    } else {
      EXPECT_EQ(error_of(fifo, limit),
                "cannot read '" + fifo + "': more than the 1000-byte limit for this file");
    }
    writer.join();
  }
  std::signal(SIGPIPE, old);
}

}  // namespace
}  // namespace wd
