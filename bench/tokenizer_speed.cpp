// tokenizer_speed: MB/s of English text encoded (and decoded) on one core.
//
//   tokenizer_speed [--tokenizer tokenizer.json] [--text FILE] [--min-mbps X]
//
// Text: FILE, else the English prose of /usr/share/common-licenses (Debian's
// base-files, ~0.26 MB of licence text), else a built-in paragraph repeated.
// Tokenizer: the given file, else the committed fixture
// (tests/fixtures/tokenizer/tokenizer.json), else the tests' hand-built one.
//
// Method: "cold" is one encode of the whole text by a freshly loaded tokenizer
// (empty word cache: every distinct word is BPE-merged once); "warm" is the
// median of 7 further encodes (cache filled, as in a long-running server).
// MB/s counts input bytes (10^6) per second of wall time, one thread.
// With --min-mbps the exit status is 1 when the cold figure is below it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/tokenizer/small_tokenizer.h"  // fallback tokenizer when no fixture exists
#include "warpdecode/error.h"
#include "warpdecode/tokenizer/stream_decoder.h"
#include "warpdecode/tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool exists(const std::string& path) { return std::ifstream(path).good(); }

std::string license_texts() {
  const std::string dir = "/usr/share/common-licenses";
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::string text;
  for (const auto& n : names) text += read_file(dir + "/" + n);
  return text;
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path, text_path;
  double min_mbps = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tokenizer" && i + 1 < argc) {
      tokenizer_path = argv[++i];
    } else if (a == "--text" && i + 1 < argc) {
      text_path = argv[++i];
    } else if (a == "--min-mbps" && i + 1 < argc) {
      min_mbps = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: tokenizer_speed [--tokenizer tokenizer.json] [--text FILE] [--min-mbps X]\n");
      return 2;
    }
  }
  try {
    const std::string fixture = std::string(WD_SOURCE_DIR) + "/tests/fixtures/tokenizer/tokenizer.json";
    if (tokenizer_path.empty() && exists(fixture)) tokenizer_path = fixture;
    const auto load0 = Clock::now();
    auto load = [&] {
      return tokenizer_path.empty() ? wd::tok::Tokenizer::from_json(wd::tok::test::small_tokenizer_json())
                                    : wd::tok::Tokenizer::from_file(tokenizer_path);
    };
    wd::tok::Tokenizer tok = load();
    const double load_s = seconds_since(load0);

    std::string source = text_path;
    std::string text = text_path.empty() ? license_texts() : read_file(text_path);
    if (text_path.empty()) source = "/usr/share/common-licenses/*";
    if (text.empty()) {
      source = "built-in paragraph x2000";
      const std::string para =
          "The quick brown fox jumps over the lazy dog. It's a sentence that's been used for years to test "
          "typewriters, fonts and keyboards, because it contains every letter of the English alphabet; "
          "we'll use it here, 2000 times, with numbers like 1984 and 3.14159.\n";
      for (int i = 0; i < 2000; ++i) text += para;
    }
    const double mb = double(text.size()) / 1e6;

    auto t0 = Clock::now();
    const auto ids = tok.encode(text);
    const double cold = mb / seconds_since(t0);

    std::vector<double> warm;
    for (int r = 0; r < 7; ++r) {
      t0 = Clock::now();
      const auto again = tok.encode(text);
      warm.push_back(mb / seconds_since(t0));
      if (again != ids) throw wd::Error("encode is not deterministic");
    }
    std::sort(warm.begin(), warm.end());

    t0 = Clock::now();
    const std::string back = tok.decode(ids);
    const double decode = mb / seconds_since(t0);
    t0 = Clock::now();
    wd::tok::StreamDecoder stream(tok);
    size_t streamed = 0;
    for (auto id : ids) streamed += stream.push(id).size();
    streamed += stream.finish().size();
    const double stream_mbps = mb / seconds_since(t0);
    if (back != wd::tok::Tokenizer::nfc(text) || streamed != back.size())
      throw wd::Error("decode(encode(text)) != NFC(text)");

    std::printf("tokenizer_speed: %s, 1 thread; tokenizer %s (%zu ids, loaded in %.2f s)\n", cpu_name().c_str(),
                tokenizer_path.empty() ? "built-in test tokenizer (9 merges)" : tokenizer_path.c_str(),
                tok.vocab_size(), load_s);
    std::printf("text    %s: %.3f MB, %zu tokens (%.2f bytes/token)\n", source.c_str(), mb, ids.size(),
                double(text.size()) / double(ids.size()));
    std::printf("encode  cold %.1f MB/s (fresh tokenizer, one pass)   warm %.1f MB/s (median of 7)\n", cold,
                warm[warm.size() / 2]);
    std::printf("decode  %.1f MB/s   stream decode %.1f MB/s (one push per token)\n", decode, stream_mbps);
    if (min_mbps > 0) {
      const bool ok = cold >= min_mbps;
      std::printf("%s: cold encode %.1f MB/s %s %.1f MB/s\n", ok ? "PASS" : "FAIL", cold, ok ? ">=" : "<", min_mbps);
      return ok ? 0 : 1;
    }
    return 0;
  } catch (const wd::Error& e) {
    std::fprintf(stderr, "tokenizer_speed: error: %s\n", e.what());
    return 1;
  }
}
