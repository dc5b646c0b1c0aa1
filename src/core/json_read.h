// Typed reads of JSON values for the config, index and crossover-table
// readers: each throws wd::FormatError naming the file, the key and the type
// it needed, so a bad file gets one clear line instead of nlohmann's
// type_error (or a silent conversion: a float read as an int).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "warpdecode/error.h"

namespace wd::json_read {

using Json = nlohmann::json;

// Nesting deeper than this is refused. nlohmann's parser walks any depth,
// but printing, comparing and copying a value recurse once a level: a file
// nested ~100 k deep (200 KB) would overflow the stack where a reader
// names a bad value. The files read here nest a few levels.
inline constexpr int kMaxDepth = 256;

// Parses `text`; syntax errors become FormatError("<source>: invalid JSON:
// ..."), nesting past kMaxDepth FormatError("<source>: JSON nests deeper
// than 256 levels").
inline Json parse(std::string_view text, const std::string& source) {
  auto bound = [&](int depth, Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth + 1 > kMaxDepth)
      throw FormatError(source + ": JSON nests deeper than " + std::to_string(kMaxDepth) + " levels");
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), bound);
  } catch (const Json::exception& e) {
    throw FormatError(source + ": invalid JSON: " + e.what());
  }
}

inline std::string shown(const Json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// An integer in [lo, hi] (JSON floats with an integral value are refused:
// configs write integers as integers).
inline int64_t integer(const Json& v, const std::string& source, const std::string& key,
                       int64_t lo, int64_t hi) {
  if (!v.is_number_integer())
    throw FormatError(source + ": '" + key + "' must be an integer, got " + shown(v));
  const bool neg = v.is_number_unsigned() ? false : v.get<int64_t>() < 0;
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw FormatError(source + ": '" + key + "' = " + shown(v) + " is out of range [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
  const int64_t x = neg ? v.get<int64_t>() : int64_t(v.get<uint64_t>());
  if (x < lo || x > hi)
    throw FormatError(source + ": '" + key + "' = " + std::to_string(x) + " is out of range [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

inline double number(const Json& v, const std::string& source, const std::string& key) {
  if (!v.is_number()) throw FormatError(source + ": '" + key + "' must be a number, got " + shown(v));
  return v.get<double>();
}

inline bool boolean(const Json& v, const std::string& source, const std::string& key) {
  if (!v.is_boolean()) throw FormatError(source + ": '" + key + "' must be true or false, got " + shown(v));
  return v.get<bool>();
}

inline std::string string(const Json& v, const std::string& source, const std::string& key) {
  if (!v.is_string()) throw FormatError(source + ": '" + key + "' must be a string, got " + shown(v));
  return v.get<std::string>();
}

// A JSON object read field by field, every error naming `source` (the file,
// or the file and the entry). A field that is absent or null is missing:
// config.json writes null for an unset optional field.
class Object {
 public:
  Object(const Json& root, std::string source) : root_(root), source_(std::move(source)) {}

  bool has(const char* key) const { return root_.contains(key) && !root_.at(key).is_null(); }
  const Json& at(const char* key) const { return root_.at(key); }
  // The field, or FormatError("<source>: required field '<key>' is missing").
  const Json& required(const char* key) const {
    if (!has(key)) throw FormatError(source_ + ": required field '" + key + "' is missing");
    return at(key);
  }

  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    return json_read::integer(required(key), source_, key, lo, hi);
  }
  int64_t integer_or(const char* key, int64_t fallback, int64_t lo, int64_t hi) const {
    return has(key) ? json_read::integer(at(key), source_, key, lo, hi) : fallback;
  }
  bool boolean_or(const char* key, bool fallback) const {
    return has(key) ? json_read::boolean(at(key), source_, key) : fallback;
  }
  std::string string(const char* key) const { return json_read::string(required(key), source_, key); }
  std::string string_or(const char* key, const std::string& fallback) const {
    return has(key) ? json_read::string(at(key), source_, key) : fallback;
  }
  double positive_number(const Json& v, const std::string& key) const {
    const double x = json_read::number(v, source_, key);
    if (!(x > 0)) throw FormatError(source_ + ": '" + key + "' = " + shown(v) + " must be > 0");
    return x;
  }
  [[noreturn]] void refuse(const std::string& what) const { throw FormatError(source_ + ": " + what); }
  const std::string& source() const { return source_; }

 private:
  const Json& root_;
  std::string source_;
};

}  // namespace wd::json_read
