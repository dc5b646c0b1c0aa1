// safetensors header validation. See warpdecode/model/safetensors.h for the
// format and the rules; this file must never crash, hang or allocate more
// than a small multiple of the header bytes on any input (it is fuzzed:
// fuzz/fuzz_safetensors_header.cpp).
#include "warpdecode/model/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/json_read.h"
#include "warpdecode/error.h"

namespace wd::model {
namespace {

using Json = nlohmann::json;

struct DTypeName {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeName kDTypes[] = {
    {DType::kBool, "BOOL", 1},       {DType::kU8, "U8", 1},           {DType::kI8, "I8", 1},
    {DType::kF8E4M3, "F8_E4M3", 1},  {DType::kF8E5M2, "F8_E5M2", 1},  {DType::kF8E8M0, "F8_E8M0", 1},
    {DType::kI16, "I16", 2},         {DType::kU16, "U16", 2},         {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},       {DType::kI32, "I32", 4},         {DType::kU32, "U32", 4},
    {DType::kF32, "F32", 4},         {DType::kI64, "I64", 8},         {DType::kU64, "U64", 8},
    {DType::kF64, "F64", 8},
};

std::string shown(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

// Names from the file are printed with non-printable bytes escaped and a
// bounded length: error lines stay one line.
std::string printable(const std::string& s, size_t limit = 80) {
  std::string out;
  for (const unsigned char c : s.substr(0, limit)) {
    if (c >= 0x20 && c < 0x7F) {
      out += char(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return s.size() > limit ? out + "..." : out;
}

// The longest array a header holds is a shape (kMaxRank values); past this
// many values an array is refused as it streams, before it is stored.
constexpr size_t kMaxArrayValues = 64;

// The header's JSON, streamed (nlohmann's SAX interface): each entry of the
// top-level object is built as a small DOM of its own, handed to on_value
// and dropped, so that a header costs its tensors' list and one entry, not
// a DOM of the whole header (that took 1.6 GB beyond the file's bytes for
// an 80 MB header of one long shape, 0.77 GB for 62 MB of 900 k tensors:
// PERF_LOG session 82). Also: nesting past
// kMaxHeaderDepth, a key twice in one of an entry's objects and an array of
// more than kMaxArrayValues values are refused where they appear. The
// top-level keys' duplicates are the caller's (it holds the names), and so
// is a header that is not an object (on_value without a key).
class HeaderSax : public json_read::SaxTypes {
 public:
  // key: the entry's name, or null where the value is the whole header.
  using OnValue = std::function<void(const std::string* key, const Json& value)>;

  HeaderSax(const std::string& source, OnValue on_value) : source_(source), on_value_(std::move(on_value)) {}

  // Scalars: into the value being built, else a whole value of their own.
  bool null() { return dom_ ? (count(), dom_->null()) : whole(Json(nullptr)); }
  bool boolean(bool v) { return dom_ ? (count(), dom_->boolean(v)) : whole(Json(v)); }
  bool number_integer(number_integer_t v) { return dom_ ? (count(), dom_->number_integer(v)) : whole(Json(v)); }
  bool number_unsigned(number_unsigned_t v) { return dom_ ? (count(), dom_->number_unsigned(v)) : whole(Json(v)); }
  bool number_float(number_float_t v, const string_t& s) {
    return dom_ ? (count(), dom_->number_float(v, s)) : whole(Json(v));
  }
  bool string(string_t& v) { return dom_ ? (count(), dom_->string(v)) : whole(Json(std::move(v))); }
  bool binary(binary_t& v) { return dom_ ? (count(), dom_->binary(v)) : whole(Json::binary(std::move(v))); }

  bool start_object(std::size_t n) {
    if (!dom_ && depth_ == 0) {  // the header itself
      depth_ = 1;
      return true;
    }
    open(false);
    return dom_->start_object(n);
  }
  bool key(string_t& k) {
    if (!dom_) {  // a top-level key: the next entry's name
      key_ = k;
      return true;
    }
    if (!frames_.back().keys.insert(k).second)
      throw FormatError(source_ + ": header has the key '" + printable(k) + "' twice in one object");
    return dom_->key(k);
  }
  bool end_object() { return close(&Dom::end_object); }
  bool start_array(std::size_t n) {
    open(true);
    return dom_->start_array(n);
  }
  bool end_array() { return close(&Dom::end_array); }
  template <typename Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    throw e;
  }

 private:
  using Dom = nlohmann::detail::json_sax_dom_parser<Json>;
  struct Frame {
    bool array;
    size_t values = 0;
    std::set<std::string> keys;
  };

  // Where a value being built belongs, for errors.
  std::string where() const {
    if (!entry_) return source_ + ": header";
    return key_ == "__metadata__" ? source_ + ": __metadata__" : source_ + ": tensor '" + printable(key_) + "'";
  }
  // A value inside the array being built counts against its length.
  void count() {
    if (frames_.empty() || !frames_.back().array || ++frames_.back().values <= kMaxArrayValues) return;
    throw FormatError(entry_ ? where() + ": an array of more than " + std::to_string(kMaxArrayValues) +
                                   " values (a header's longest is a shape of at most " + std::to_string(kMaxRank) + ")"
                             : where() + " must be a JSON object, got an array of more than " +
                                   std::to_string(kMaxArrayValues) + " values");
  }
  // A value starts at the top (a header that is not an object) or as an
  // entry of the top-level object: a DOM of its own.
  void begin_value() {
    value_ = Json();
    dom_.emplace(value_, true);
    entry_ = depth_ == 1;
  }
  void open(bool array) {
    if (!dom_) begin_value();
    else count();
    if (++depth_ > kMaxHeaderDepth)
      throw FormatError(source_ + ": header JSON nests deeper than " + std::to_string(kMaxHeaderDepth) + " levels");
    frames_.push_back(Frame{array, 0, {}});
  }
  bool close(bool (Dom::*end)()) {
    --depth_;
    if (!dom_) return true;  // the header's object ends
    frames_.pop_back();
    (*dom_.*end)();
    if (frames_.empty()) done();
    return true;
  }
  bool whole(Json v) {
    value_ = std::move(v);
    entry_ = depth_ == 1;
    done();
    return true;
  }
  void done() {
    dom_.reset();
    on_value_(entry_ ? &key_ : nullptr, value_);
    value_ = Json();
  }

  const std::string& source_;
  OnValue on_value_;
  std::optional<Dom> dom_;  // set while a value is built
  Json value_;              // the value it builds
  bool entry_ = false;      // the value is an entry of the header's object
  std::string key_;         // that entry's name
  int depth_ = 0;           // open arrays and objects, the header's own included
  std::vector<Frame> frames_;  // those of the value being built
};

uint64_t to_u64(const Json& v, const std::string& what) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    throw FormatError(what + " must be a non-negative integer, got " + shown(v));
  return v.get<uint64_t>();
}

TensorInfo parse_entry(const std::string& name, const Json& e, uint64_t data_size,
                       const std::string& source) {
  const std::string where = source + ": tensor '" + printable(name) + "'";
  if (!e.is_object()) throw FormatError(where + ": entry must be an object, got " + shown(e));
  for (auto it = e.begin(); it != e.end(); ++it)
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets")
      throw FormatError(where + ": unknown key '" + printable(it.key()) +
                        "' (allowed: dtype, shape, data_offsets)");
  for (const char* k : {"dtype", "shape", "data_offsets"})
    if (!e.contains(k)) throw FormatError(where + ": missing '" + k + "'");

  TensorInfo t;
  t.name = name;
  const Json& dt = e.at("dtype");
  if (!dt.is_string()) throw FormatError(where + ": dtype must be a string, got " + shown(dt));
  const std::string dname = dt.get<std::string>();
  const DTypeName* found = nullptr;
  for (const auto& d : kDTypes)
    if (dname == d.name) found = &d;
  if (!found) throw FormatError(where + ": unknown dtype '" + printable(dname) + "'");
  t.dtype = found->dtype;

  const Json& sh = e.at("shape");
  if (!sh.is_array()) throw FormatError(where + ": shape must be an array, got " + shown(sh));
  if (sh.size() > size_t(kMaxRank))
    throw FormatError(where + ": shape has " + std::to_string(sh.size()) + " dimensions (at most " +
                      std::to_string(kMaxRank) + ")");
  uint64_t bytes = found->size;
  bool overflow = false;
  for (const auto& d : sh) {
    const uint64_t n = to_u64(d, where + ": shape dimension");
    t.shape.push_back(n);
    overflow |= __builtin_mul_overflow(bytes, n, &bytes);
  }

  const Json& off = e.at("data_offsets");
  if (!off.is_array() || off.size() != 2)
    throw FormatError(where + ": data_offsets must be [begin, end], got " + shown(off));
  t.begin = to_u64(off[0], where + ": data_offsets[0]");
  t.end = to_u64(off[1], where + ": data_offsets[1]");
  if (t.begin > t.end)
    throw FormatError(where + ": data_offsets [" + std::to_string(t.begin) + ", " +
                      std::to_string(t.end) + ") end before they begin");
  if (t.end > data_size)
    throw FormatError(where + ": data_offsets end " + std::to_string(t.end) +
                      " is past the end of the data section (" + std::to_string(data_size) + " bytes)");
  if (overflow || bytes != t.end - t.begin)
    throw FormatError(where + ": shape " + t.shape_string() + " of " + dname + " needs " +
                      (overflow ? std::string("more than 2^64") : std::to_string(bytes)) +
                      " bytes but data_offsets hold " + std::to_string(t.end - t.begin));
  return t;
}

}  // namespace

const char* to_string(DType d) {
  for (const auto& x : kDTypes)
    if (x.dtype == d) return x.name;
  return "?";
}

size_t dtype_size(DType d) {
  for (const auto& x : kDTypes)
    if (x.dtype == d) return x.size;
  return 0;
}

bool dtype_decodable(DType d) {
  return d == DType::kBF16 || d == DType::kF16 || d == DType::kF32 || d == DType::kF8E4M3;
}

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (const uint64_t d : shape) n *= d;  // cannot overflow: validated against the byte range
  return n;
}

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, size_t size,
                                           const std::string& source) {
  if (size < 8)
    throw FormatError(source + ": file is " + std::to_string(size) +
                      " bytes, too short for the 8-byte header length");
  // A checkout made without git-lfs holds small text pointers where the
  // shards should be: say so, rather than report their text as a length.
  static constexpr char kLfs[] = "version https://git-lfs";
  if (size >= sizeof kLfs - 1 && std::equal(kLfs, kLfs + sizeof kLfs - 1, bytes))
    throw FormatError(source + ": a Git LFS pointer file, not the tensors (fetch them: git lfs pull)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > kMaxHeaderBytes)
    throw FormatError(source + ": header length " + std::to_string(n) + " exceeds the limit of " +
                      std::to_string(kMaxHeaderBytes) + " bytes");
  if (n > size - 8)
    throw FormatError(source + ": header length " + std::to_string(n) +
                      " runs past the end of the file (" + std::to_string(size) + " bytes)");
  SafetensorsHeader h;
  h.header_bytes = n;
  h.data_offset = 8 + n;
  const uint64_t data_size = size - h.data_offset;
  const char* text = reinterpret_cast<const char*>(bytes + 8);
  // An entry's error waits for the end of the JSON: a header that is not
  // well-formed says so first (a truncated or corrupted file), as when the
  // whole header was parsed before its entries were read.
  std::string entry_error;
  bool metadata = false;
  HeaderSax sax(source, [&](const std::string* key, const Json& value) {
    if (!entry_error.empty()) return;
    try {
      if (!key) throw FormatError(source + ": header must be a JSON object, got " + shown(value));
      if (*key == "__metadata__") {
        if (metadata) throw FormatError(source + ": header has the key '__metadata__' twice in one object");
        metadata = true;
        if (!value.is_object()) throw FormatError(source + ": __metadata__ must be an object of strings");
        for (auto m = value.begin(); m != value.end(); ++m) {
          if (!m->is_string())
            throw FormatError(source + ": __metadata__ value of '" + printable(m.key()) + "' must be a string, got " +
                              shown(*m));
          h.metadata[m.key()] = m->get<std::string>();
        }
        return;
      }
      if (key->empty()) throw FormatError(source + ": a tensor has an empty name");
      h.tensors.push_back(parse_entry(*key, value, data_size, source));
    } catch (const FormatError& e) {
      entry_error = e.what();
    }
  });
  try {
    Json::sax_parse(text, text + n, &sax);
  } catch (const Json::exception& e) {
    throw FormatError(source + ": header is not valid JSON: " + printable(e.what(), 240));
  }
  if (!entry_error.empty()) throw FormatError(entry_error);

  // A tensor's name twice (the header streams: the names are checked here).
  {
    std::vector<const TensorInfo*> by_name(h.tensors.size());
    for (size_t i = 0; i < h.tensors.size(); ++i) by_name[i] = &h.tensors[i];
    std::sort(by_name.begin(), by_name.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->name < b->name; });
    for (size_t i = 1; i < by_name.size(); ++i)
      if (by_name[i]->name == by_name[i - 1]->name)
        throw FormatError(source + ": header has the key '" + printable(by_name[i]->name) + "' twice in one object");
  }

  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const TensorInfo* prev = nullptr;  // the non-empty tensor that ends last so far
  for (auto& t : h.tensors) {
    if (t.begin == t.end) continue;  // an empty tensor occupies no bytes
    if (prev && t.begin < prev->end)
      throw FormatError(source + ": tensors '" + printable(prev->name) + "' [" +
                        std::to_string(prev->begin) + ", " + std::to_string(prev->end) + ") and '" +
                        printable(t.name) + "' [" + std::to_string(t.begin) + ", " +
                        std::to_string(t.end) + ") overlap");
    prev = &t;
  }
  for (auto& t : h.tensors) {
    t.data = bytes + h.data_offset + t.begin;
    t.file = source;
  }
  return h;
}

}  // namespace wd::model
