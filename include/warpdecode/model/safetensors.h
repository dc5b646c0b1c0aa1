// safetensors files: header validation and memory mapping.
//
// File layout (https://github.com/huggingface/safetensors):
//   [0, 8)        N, little-endian uint64: the header length
//   [8, 8+N)      UTF-8 JSON object:
//                   "__metadata__": {string: string}          (optional)
//                   "<name>": {"dtype": "BF16", "shape": [d0, ...],
//                              "data_offsets": [begin, end]}  (one per tensor)
//                 padded with spaces
//   [8+N, size)   the data section; offsets are relative to its start,
//                 tensors are row-major, little-endian
//
// Validation (every failure is one wd::FormatError naming the file, the
// tensor and the rule): the file holds the 8-byte length; N <= 100,000,000
// (the limit of the reference Rust implementation) and fits in the file; the
// header is well-formed JSON, an object, nested at most kMaxHeaderDepth deep,
// without duplicate keys; every entry has exactly dtype / shape /
// data_offsets; the dtype is a safetensors dtype; the shape has at most 8
// dimensions and shape × dtype size equals end − begin without overflow;
// begin <= end <= data section size; no two tensors' byte ranges overlap;
// no array of more than 64 values (the longest a header needs is a shape).
// Nothing is allocated in proportion to a number read from the file; only in
// proportion to the header bytes actually present. The header streams: each
// entry is checked as it is read and dropped, so that parsing holds the
// tensors' list and one entry, not the whole header's JSON (a 62 MB header
// of 900 k tensors: 150 MB; its DOM took 770 MB). A tensor named twice is
// found once all are read, so an earlier entry's own error comes first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace wd::model {

// Every dtype of the safetensors format; only kBF16, kF16, kF32 and kF8E4M3
// can be decoded (tensor_data.h), the others are read as bytes and refused
// where a value is needed.
enum class DType : uint8_t {
  kBool, kU8, kI8, kF8E4M3, kF8E5M2, kF8E8M0, kI16, kU16, kF16, kBF16,
  kI32, kU32, kF32, kI64, kU64, kF64,
};
const char* to_string(DType d);       // the safetensors spelling, e.g. "F8_E4M3"
size_t dtype_size(DType d);           // bytes per element
bool dtype_decodable(DType d);        // BF16, F16, F32, F8_E4M3

constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr int kMaxHeaderDepth = 3;    // root { tensor { shape [ ] } }: all a header needs
constexpr int kMaxRank = 8;

struct TensorInfo {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;        // byte range in the data section
  const uint8_t* data = nullptr;      // mapped bytes [begin, end), null if not mapped
  std::string file;                   // path of the file that holds it

  uint64_t numel() const;
  uint64_t bytes() const { return end - begin; }
  std::string shape_string() const;   // "[128, 2048]"
};

struct SafetensorsHeader {
  uint64_t header_bytes = 0;          // N
  uint64_t data_offset = 0;           // 8 + N: start of the data section in the file
  std::vector<TensorInfo> tensors;    // sorted by begin
  std::map<std::string, std::string> metadata;
};

// Validates the header of a safetensors file held entirely in [bytes, bytes +
// size) (a mapped file, or a fuzzer's input). `source` names it in errors.
// TensorInfo::data points into `bytes`.
SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, size_t size,
                                           const std::string& source);

// A read-only memory mapping of a whole file. Pages are brought in on first
// touch and can be dropped again with release(): the loader keeps resident
// memory near one layer however large the checkpoint is.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws FormatError
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the resident pages that lie entirely inside [p, p + n) (madvise
  // DONTNEED: a private read-only file mapping re-reads them if touched).
  void release(const uint8_t* p, size_t n) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// One mapped and validated .safetensors file.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  const SafetensorsHeader& header() const { return header_; }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const MappedFile& mapping() const { return *map_; }

 private:
  std::unique_ptr<MappedFile> map_;
  SafetensorsHeader header_;
};

}  // namespace wd::model
