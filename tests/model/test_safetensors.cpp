// safetensors: valid files read back exactly; corrupted, truncated and
// hostile files get exactly one clear FormatError.
#include <gtest/gtest.h>
#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "model_files.h"
#include "warpdecode/error.h"
#include "warpdecode/formats.h"
#include "warpdecode/model/checkpoint.h"
#include "warpdecode/model/safetensors.h"
#include "warpdecode/model/tensor_data.h"

namespace wd::model {
namespace {

using testing::RawTensor;

std::string f32_bytes(std::initializer_list<float> v) {
  std::string s;
  for (float x : v) s.append(reinterpret_cast<const char*>(&x), 4);
  return s;
}

std::string header_error(const std::string& bytes) {
  try {
    parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "f.safetensors");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Safetensors, ReadsEveryDecodableDtype) {
  std::string bf16, f16, f8;
  for (float x : {1.5f, -2.0f, 0.03125f}) {
    const uint16_t b = float_to_bf16(x);
    bf16.append(reinterpret_cast<const char*>(&b), 2);
  }
  for (uint16_t h : {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x7C00}) f16.append(reinterpret_cast<const char*>(&h), 2);
  for (float x : {448.0f, -0.5f, 0.001953125f}) f8 += char(float_to_e4m3(x));
  const std::vector<RawTensor> t = {{"a", "BF16", {3}, bf16},
                                    {"b", "F16", {5}, f16},
                                    {"c", "F32", {2, 1}, f32_bytes({3.25f, -7.0f})},
                                    {"d", "F8_E4M3", {3}, f8},
                                    {"e", "I64", {0}, ""}};
  for (const bool pad : {true, false}) {  // unpadded: data section not 2- or 4-aligned
    const std::string bytes = testing::safetensors_bytes(t, pad, R"({"format": "pt"})");
    const auto h = parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "x");
    ASSERT_EQ(h.tensors.size(), 5u);
    EXPECT_EQ(h.metadata.at("format"), "pt");
    float out[5];
    decode(h.tensors[0], 0, 3, out);
    EXPECT_EQ(out[0], 1.5f);
    EXPECT_EQ(out[1], -2.0f);
    EXPECT_EQ(out[2], 0.03125f);
    decode(h.tensors[1], 0, 5, out);
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], -2.0f);
    EXPECT_EQ(out[2], 65504.0f);
    EXPECT_EQ(out[3], std::ldexp(1.0f, -24));
    EXPECT_TRUE(std::isinf(out[4]));
    double d[2];
    decode(h.tensors[2], 0, 2, d);
    EXPECT_EQ(d[0], 3.25);
    EXPECT_EQ(d[1], -7.0);
    decode(h.tensors[3], 1, 2, out);
    EXPECT_EQ(out[0], -0.5f);
    EXPECT_EQ(out[1], 0.001953125f);
    EXPECT_EQ(h.tensors[4].dtype, DType::kI64);
    EXPECT_EQ(h.tensors[0].shape_string(), "[3]");
    EXPECT_EQ(h.tensors[2].shape_string(), "[2, 1]");
  }
}

TEST(Safetensors, F16DecodesEveryNonNaNValueExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint32_t exp = (h >> 10) & 31, man = h & 1023;
    const float f = f16_to_float(uint16_t(h));
    if (exp == 31) {
      EXPECT_TRUE(man ? std::isnan(f) : std::isinf(f)) << h;
      continue;
    }
    const double want = (h & 0x8000 ? -1.0 : 1.0) *
                        (exp == 0 ? std::ldexp(double(man), -24) : std::ldexp(1024.0 + man, int(exp) - 25));
    ASSERT_EQ(double(f), want) << "f16 bits " << h;
  }
}

TEST(Safetensors, UndecodableDtypeIsRefusedWhenRead) {
  const std::string bytes = testing::safetensors_bytes({{"ids", "I64", {1}, std::string(8, '\1')}});
  const auto h = parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "m.st");
  float out;
  try {
    decode(h.tensors[0], 0, 1, &out);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "m.st: tensor 'ids' has dtype I64, which cannot be read as weights "
                           "(supported: BF16, F16, F32, F8_E4M3)");
  }
  const std::string f = testing::safetensors_bytes({{"w", "F32", {2}, f32_bytes({1, 2})}});
  const auto g = parse_safetensors_header(reinterpret_cast<const uint8_t*>(f.data()), f.size(), "m.st");
  EXPECT_THROW(decode(g.tensors[0], 1, 2, &out), InvalidArgument);  // past the end
}

struct Corrupt {
  const char* what;
  std::string bytes;
  const char* message;
};

TEST(Safetensors, CorruptedAndTruncatedFilesGetOneClearError) {
  const std::string good = testing::safetensors_bytes(
      {{"w", "F32", {2, 2}, f32_bytes({1, 2, 3, 4})}, {"b", "F32", {2}, f32_bytes({5, 6})}});
  std::string huge(8, '\0');
  const uint64_t big = 1ull << 40;
  std::memcpy(&huge[0], &big, 8);
  std::string deep = "{\"a\":{\"b\":[[1]]}}";
  std::string long_array = "[1";
  for (int i = 0; i < 64; ++i) long_array += ",1";
  long_array += "]";  // 65 values
  const std::string long_shape = R"({"w":{"dtype":"U8","shape":)" + long_array + R"(,"data_offsets":[0,1]}})";
  uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);
  const std::string truncated_header =
      "f.safetensors: header length " + std::to_string(n) + " runs past the end of the file (20 bytes)";
  const Corrupt cases[] = {
      {"empty", "", "f.safetensors: file is 0 bytes, too short for the 8-byte header length"},
      {"short", "abc", "f.safetensors: file is 3 bytes, too short for the 8-byte header length"},
      {"header too large", huge, "f.safetensors: header length 1099511627776 exceeds the limit of 100000000 bytes"},
      {"git-lfs pointer",
       "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 16008928\n",
       "f.safetensors: a Git LFS pointer file, not the tensors (fetch them: git lfs pull)"},
      {"truncated header", good.substr(0, 20), truncated_header.c_str()},
      {"truncated data", good.substr(0, good.size() - 4),
       "f.safetensors: tensor 'b': data_offsets end 24 is past the end of the data section (20 bytes)"},
      {"not JSON", testing::raw_safetensors("{\"w\": nope}", 0), nullptr},
      {"not an object", testing::raw_safetensors("[1, 2]", 0), "f.safetensors: header must be a JSON object, got [1,2]"},
      {"deep", testing::raw_safetensors(deep, 0), "f.safetensors: header JSON nests deeper than 3 levels"},
      {"duplicate", testing::raw_safetensors(
           R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2),
       "f.safetensors: header has the key 'w' twice in one object"},
      {"unknown dtype", testing::raw_safetensors(R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", 1),
       "f.safetensors: tensor 'w': unknown dtype 'Q4'"},
      {"missing shape", testing::raw_safetensors(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", 1),
       "f.safetensors: tensor 'w': missing 'shape'"},
      {"extra key", testing::raw_safetensors(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})", 1),
       "f.safetensors: tensor 'w': unknown key 'x' (allowed: dtype, shape, data_offsets)"},
      {"negative dim", testing::raw_safetensors(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", 1),
       "f.safetensors: tensor 'w': shape dimension must be a non-negative integer, got -1"},
      {"float dim", testing::raw_safetensors(R"({"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", 1),
       "f.safetensors: tensor 'w': shape dimension must be a non-negative integer, got 1.5"},
      {"rank 9", testing::raw_safetensors(R"({"w":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})", 1),
       "f.safetensors: tensor 'w': shape has 9 dimensions (at most 8)"},
      // Arrays past 64 values are refused as the header streams, before
      // they are stored (a DOM of such a header took ~20× its bytes).
      {"shape of 65", testing::raw_safetensors(long_shape, 1),
       "f.safetensors: tensor 'w': an array of more than 64 values (a header's longest is a shape of at most 8)"},
      {"long top-level array", testing::raw_safetensors(long_array, 0),
       "f.safetensors: header must be a JSON object, got an array of more than 64 values"},
      {"long metadata array", testing::raw_safetensors(R"({"__metadata__":{"a":)" + long_array + "}}", 0),
       "f.safetensors: __metadata__: an array of more than 64 values (a header's longest is a shape of at most 8)"},
      {"top-level scalar", testing::raw_safetensors("7", 0), "f.safetensors: header must be a JSON object, got 7"},
      {"a key twice in an entry", testing::raw_safetensors(
           R"({"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1),
       "f.safetensors: header has the key 'dtype' twice in one object"},
      {"metadata twice", testing::raw_safetensors(R"({"__metadata__":{},"__metadata__":{}})", 0),
       "f.safetensors: header has the key '__metadata__' twice in one object"},
      {"a name twice, apart", testing::raw_safetensors(
           R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"v":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},)"
           R"("w":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})", 3),
       "f.safetensors: header has the key 'w' twice in one object"},
      {"entry scalar", testing::raw_safetensors(R"({"w":7})", 0), "f.safetensors: tensor 'w': entry must be an object, got 7"},
      {"size mismatch", testing::raw_safetensors(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       "f.safetensors: tensor 'w': shape [3] of F32 needs 12 bytes but data_offsets hold 8"},
      {"overflow", testing::raw_safetensors(
           R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
       "f.safetensors: tensor 'w': shape [4294967296, 4294967296] of F64 needs more than 2^64 bytes but data_offsets hold 8"},
      {"reversed", testing::raw_safetensors(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}})", 4),
       "f.safetensors: tensor 'w': data_offsets [4, 2) end before they begin"},
      {"offsets not a pair", testing::raw_safetensors(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1),
       "f.safetensors: tensor 'w': data_offsets must be [begin, end], got [0]"},
      {"overlap", testing::raw_safetensors(
           R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}})", 5),
       "f.safetensors: tensors 'a' [0, 4) and 'b' [3, 5) overlap"},
      {"metadata", testing::raw_safetensors(R"({"__metadata__":{"format":1}})", 0),
       "f.safetensors: __metadata__ value of 'format' must be a string, got 1"},
      {"entry not an object", testing::raw_safetensors(R"({"w":[1]})", 0),
       "f.safetensors: tensor 'w': entry must be an object, got [1]"},
      {"control bytes in a name", testing::raw_safetensors("{\"a\\u0001\":{\"dtype\":\"X\",\"shape\":[],\"data_offsets\":[0,0]}}", 0),
       "f.safetensors: tensor 'a\\x01': unknown dtype 'X'"},
  };
  for (const auto& c : cases) {
    const std::string msg = header_error(c.bytes);
    if (c.message)
      EXPECT_EQ(msg, c.message) << c.what;
    else
      EXPECT_EQ(msg.rfind("f.safetensors: header is not valid JSON: ", 0), 0u) << c.what << ": " << msg;
  }
  // Empty tensors take no bytes and overlap nothing; gaps are allowed.
  EXPECT_EQ(header_error(testing::raw_safetensors(
                R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[2,2]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 6)),
            "(accepted)");
}

// A path that is not a readable regular file gets one clear FormatError
// naming it, and only the reason that applies: a directory (which opens
// read-only) must not carry a stale errno's text from an earlier call.
// An empty file maps to nothing, and release() ignores ranges outside the
// mapping.
TEST(MappedFile, PathsThatAreNotRegularFilesGetOneClearError) {
  const std::string dir = testing::make_temp_dir("mapped_file");
  auto error_of = [](const std::string& path) -> std::string {
    try {
      MappedFile m(path);
    } catch (const FormatError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  errno = ENOENT;  // what an earlier failed call would leave behind
  EXPECT_EQ(error_of(dir), "cannot read '" + dir + "': it is a directory");
  EXPECT_EQ(error_of(dir + "/missing"), "cannot read '" + dir + "/missing': " + std::strerror(ENOENT));
  EXPECT_EQ(error_of("/dev/null"), "cannot read '/dev/null': not a regular file");
  // A FIFO (a shard left as a named pipe) is refused without opening it,
  // which would block until a writer came.
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0) << std::strerror(errno);
  EXPECT_EQ(error_of(dir + "/fifo"), "cannot read '" + dir + "/fifo': not a regular file");
  testing::write_file(dir + "/empty", "");
  const MappedFile empty(dir + "/empty");
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.data(), nullptr);
  empty.release(nullptr, 0);
  testing::write_file(dir + "/bytes", "abcdefgh");
  const MappedFile bytes(dir + "/bytes");
  ASSERT_EQ(bytes.size(), 8u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), 8), "abcdefgh");
  bytes.release(bytes.data() + 4, 8);  // past the end: ignored
  bytes.release(bytes.data(), 8);      // less than a page: nothing to drop, the bytes stay readable
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), 8), "abcdefgh");
}

TEST(Safetensors, TheCommittedFuzzCorpusNeverCrashes) {
  const std::string dir = std::string(WD_SOURCE_DIR) + "/fuzz/corpus/safetensors_header";
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  int files = 0, accepted = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string bytes = testing::read_file(dir + "/" + e->d_name);
    ++files;
    accepted += header_error(bytes) == "(accepted)";
  }
  closedir(d);
  EXPECT_GE(files, 10);
  EXPECT_GE(accepted, 2);  // the seeds include valid files
}

// ---- mapped files and checkpoint directories ---------------------------------

TEST(Checkpoint, SingleFileAndShardsMapTheSameTensors) {
  const std::vector<RawTensor> a = {{"x", "F32", {2}, f32_bytes({1, 2})}};
  const std::vector<RawTensor> b = {{"y", "F32", {1}, f32_bytes({3})}};
  const std::string dir = testing::make_temp_dir("ckpt");
  testing::write_file(dir + "/a.safetensors", testing::safetensors_bytes(a));
  testing::write_file(dir + "/b.safetensors", testing::safetensors_bytes(b));
  testing::write_file(dir + "/model.safetensors.index.json",
                      R"({"metadata": {"total_size": 12}, "weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})");
  const Checkpoint c = Checkpoint::open(dir);
  EXPECT_EQ(c.num_files(), 2u);
  ASSERT_EQ(c.tensors().size(), 2u);
  float v[2];
  decode(c.at("x"), 0, 2, v);
  EXPECT_EQ(v[1], 2.0f);
  decode(c.at("y"), 0, 1, v);
  EXPECT_EQ(v[0], 3.0f);
  EXPECT_EQ(c.find("z"), nullptr);
  try {
    c.at("z");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()), dir + ": tensor 'z' is missing from the checkpoint");
  }
  c.release(c.at("x"));  // advisory; the data stays readable
  decode(c.at("x"), 0, 2, v);
  EXPECT_EQ(v[0], 1.0f);
}

std::string open_error(const std::string& dir) {
  try {
    Checkpoint::open(dir);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Checkpoint, InconsistentShardsAreRefused) {
  const std::string x = testing::safetensors_bytes({{"x", "F32", {1}, f32_bytes({1})}});
  const std::string xy = testing::safetensors_bytes({{"x", "F32", {1}, f32_bytes({1})}, {"y", "F32", {1}, f32_bytes({2})}});
  struct Case {
    const char* what;
    const char* index;
    const char* message;  // after "<dir>/model.safetensors.index.json: "
  };
  const Case cases[] = {
      {"missing shard", R"({"weight_map": {"x": "a.safetensors", "y": "c.safetensors"}})",
       "shard 'c.safetensors' (holding 'y') does not exist"},
      {"path traversal", R"({"weight_map": {"x": "../a.safetensors"}})",
       "shard name '../a.safetensors' is not a plain file name in the directory"},
      {"not in its shard", R"({"weight_map": {"x": "a.safetensors", "y": "a.safetensors"}})",
       "tensor 'y' is not in its shard 'a.safetensors'"},
      {"unlisted tensor", R"({"weight_map": {"x": "b.safetensors"}})", nullptr},
      {"in two shards", R"({"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})", nullptr},
      {"no weight_map", R"({"metadata": {}})", "must be an object with a 'weight_map' object"},
      {"empty", R"({"weight_map": {}})", "weight_map is empty"},
      {"not a string", R"({"weight_map": {"x": 3}})", "'weight_map['x']' must be a string, got 3"},
  };
  for (const auto& c : cases) {
    const std::string dir = testing::make_temp_dir("shards");
    testing::write_file(dir + "/a.safetensors", x);
    testing::write_file(dir + "/b.safetensors", xy);
    testing::write_file(dir + "/model.safetensors.index.json", c.index);
    const std::string msg = open_error(dir);
    const std::string prefix = dir + "/model.safetensors.index.json: ";
    if (c.message) {
      EXPECT_EQ(msg, prefix + c.message) << c.what;
    } else if (std::string(c.what) == "unlisted tensor") {
      EXPECT_EQ(msg, prefix + "shard '" + dir + "/b.safetensors' holds tensor 'y', which the index does not list");
    } else {
      EXPECT_EQ(msg, prefix + "tensor 'x' is in shard '" + dir + "/b.safetensors' as well as in '" + dir +
                         "/a.safetensors'");
    }
  }
  const std::string empty = testing::make_temp_dir("none");
  EXPECT_EQ(open_error(empty), "no checkpoint in '" + empty +
                                   "': neither model.safetensors.index.json nor model.safetensors exists");
  testing::write_file(empty + "/model.safetensors", x.substr(0, 12));
  EXPECT_EQ(open_error(empty), empty + "/model.safetensors: header length " + std::to_string(x.size() - 12) +
                                   " runs past the end of the file (12 bytes)");
}

}  // namespace
}  // namespace wd::model
