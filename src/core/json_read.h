// Typed reads of JSON values for the config, index and crossover-table
// readers: each throws wd::FormatError naming the file, the key and the type
// it needed, so a bad file gets one clear line instead of nlohmann's
// type_error (or a silent conversion: a float read as an int).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "warpdecode/error.h"

namespace wd::json_read {

using Json = nlohmann::json;

// Nesting deeper than this is refused. nlohmann's parser walks any depth,
// but printing, comparing and copying a value recurse once a level: a file
// nested ~100 k deep (200 KB) would overflow the stack where a reader
// names a bad value. The files read here nest a few levels.
inline constexpr int kMaxDepth = 256;

// The value types nlohmann's SAX interface asks of a handler (Json::sax_parse).
struct SaxTypes {
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;
};

// nlohmann's DOM builder behind a filter that bounds the nesting and, where
// asked, refuses a key twice in one object (nlohmann keeps the last one
// silently). Not Json::parse with a callback: in nlohmann 3.11 a callback
// parse rescans the enclosing object each time an object ends, quadratic in
// a large object's entries (13 s for a 40 k-tensor safetensors header).
class BoundedSax : public SaxTypes {
 public:

  // deeper(): throws (nesting past max_depth); duplicate(key): throws, or
  // empty to keep nlohmann's last-one-wins.
  BoundedSax(Json& out, int max_depth, std::function<void()> deeper,
             std::function<void(const std::string&)> duplicate)
      : dom_(out, true), max_depth_(max_depth), deeper_(std::move(deeper)), duplicate_(std::move(duplicate)) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& s) { return dom_.number_float(v, s); }
  bool string(string_t& v) { return dom_.string(v); }
  bool binary(binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    open();
    if (duplicate_) keys_.emplace_back();
    return dom_.start_object(n);
  }
  bool key(string_t& k) {
    if (duplicate_ && !keys_.back().insert(k).second) duplicate_(k);
    return dom_.key(k);
  }
  bool end_object() {
    if (duplicate_) keys_.pop_back();
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    open();
    return dom_.start_array(n);
  }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  template <typename Exception>
  bool parse_error(std::size_t pos, const std::string& token, const Exception& e) {
    return dom_.parse_error(pos, token, e);  // throws it
  }

 private:
  void open() {
    if (++depth_ > max_depth_) deeper_();
  }
  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  int max_depth_, depth_ = 0;
  std::function<void()> deeper_;
  std::function<void(const std::string&)> duplicate_;
  std::vector<std::set<std::string>> keys_;  // one set per open object
};

// Parses [begin, end) through BoundedSax; nlohmann's syntax errors are
// thrown as they are (Json::exception).
inline Json parse_bounded(const char* begin, const char* end, int max_depth, std::function<void()> deeper,
                          std::function<void(const std::string&)> duplicate = {}) {
  Json out;
  BoundedSax sax(out, max_depth, std::move(deeper), std::move(duplicate));
  Json::sax_parse(begin, end, &sax);
  return out;
}

// Parses `text`; syntax errors become FormatError("<source>: invalid JSON:
// ..."), nesting past kMaxDepth FormatError("<source>: JSON nests deeper
// than 256 levels").
inline Json parse(std::string_view text, const std::string& source) {
  try {
    return parse_bounded(text.data(), text.data() + text.size(), kMaxDepth, [&] {
      throw FormatError(source + ": JSON nests deeper than " + std::to_string(kMaxDepth) + " levels");
    });
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
