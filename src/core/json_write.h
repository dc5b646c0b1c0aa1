// Writing a result's JSON document to a file: the one path every tool that
// records measurements (bench-moe, its tunes, accuracy, crossover-merge)
// takes.
#pragma once

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "warpdecode/error.h"

namespace wd::json_write {

// Writes `doc` (indented by 2, a final newline) to `path`, replacing the
// file. The text is made before the file is opened, so a failure leaves no
// empty file behind. Strings holding bytes that are not UTF-8 (a path or a
// command line typed in another encoding: the header records both) are
// written with U+FFFD in their place rather than failing after the run's
// measurements. Throws wd::Error when the file cannot be written.
inline void to_file(const nlohmann::json& doc, const std::string& path) {
  const std::string text = doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::ofstream out(path, std::ios::binary);
  WD_CHECK(out.good(), "cannot write '", path, "'");
  out << text;
  out.close();
  WD_CHECK(!out.fail(), "writing '", path, "' failed");
}

// Throws wd::Error unless `path` can be written: its directory exists and
// is writable, and so is the file where it exists already. For the tools
// to call before a long measurement whose JSON is written at its end; it
// creates nothing.
inline void check_writable(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path), dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::error_code ec;
  WD_CHECK(fs::is_directory(dir, ec), "cannot write '", path, "': no directory '", dir.string(), "'");
  WD_CHECK(!fs::is_directory(p, ec), "cannot write '", path, "': it is a directory");
  const bool exists = fs::exists(p, ec);
  WD_CHECK(::access((exists ? p : dir).c_str(), W_OK) == 0, "cannot write '", path, "': ",
           exists ? "the file is" : "its directory is", " not writable");
}

}  // namespace wd::json_write
