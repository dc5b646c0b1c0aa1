// safetensors header validation. See warpdecode/model/safetensors.h for the
// format and the rules; this file must never crash, hang or allocate more
// than a small multiple of the header bytes on any input (it is fuzzed:
// fuzz/fuzz_safetensors_header.cpp).
#include "warpdecode/model/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>

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

// Parses the header JSON, bounding the nesting and refusing duplicate keys
// (nlohmann would keep the last one silently).
Json parse_json(const char* begin, const char* end, const std::string& source) {
  try {
    return json_read::parse_bounded(
        begin, end, kMaxHeaderDepth,
        [&] {
          throw FormatError(source + ": header JSON nests deeper than " + std::to_string(kMaxHeaderDepth) +
                            " levels");
        },
        [&](const std::string& key) {
          throw FormatError(source + ": header has the key '" + printable(key) + "' twice in one object");
        });
  } catch (const Json::exception& e) {
    throw FormatError(source + ": header is not valid JSON: " + printable(e.what(), 240));
  }
}

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
  const Json root = parse_json(text, text + n, source);
  if (!root.is_object()) throw FormatError(source + ": header must be a JSON object, got " + shown(root));

  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) throw FormatError(source + ": __metadata__ must be an object of strings");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          throw FormatError(source + ": __metadata__ value of '" + printable(m.key()) +
                            "' must be a string, got " + shown(*m));
        h.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    if (it.key().empty()) throw FormatError(source + ": a tensor has an empty name");
    h.tensors.push_back(parse_entry(it.key(), *it, data_size, source));
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
