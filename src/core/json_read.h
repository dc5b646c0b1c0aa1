// Typed reads of JSON values for the config, index and crossover-table
// readers: each throws wd::FormatError naming the file, the key and the type
// it needed, so a bad file gets one clear line instead of nlohmann's
// type_error (or a silent conversion: a float read as an int).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>

#include "warpdecode/error.h"

namespace wd::json_read {

using Json = nlohmann::json;

// Parses `text`; syntax errors become FormatError("<source>: invalid JSON: ...").
inline Json parse(const std::string& text, const std::string& source) {
  try {
    return Json::parse(text);
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

}  // namespace wd::json_read
