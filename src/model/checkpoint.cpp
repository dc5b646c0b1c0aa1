// Checkpoint directories: single-file and sharded. See warpdecode/model/checkpoint.h.
#include "warpdecode/model/checkpoint.h"

#include <sys/stat.h>

#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/json_read.h"
#include "core/read_file.h"
#include "warpdecode/error.h"

namespace wd::model {
namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";
constexpr uint64_t kMaxIndexBytes = 256u << 20;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// A shard name from the index must be a plain file in the directory.
void check_shard_name(const std::string& name, const std::string& source) {
  const bool plain = !name.empty() && name != "." && name != ".." &&
                     name.find('/') == std::string::npos && name.find('\\') == std::string::npos &&
                     name.find('\0') == std::string::npos;
  if (!plain)
    throw FormatError(source + ": shard name '" + name + "' is not a plain file name in the directory");
}

}  // namespace

Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Checkpoint Checkpoint::open(const std::string& dir) {
  Checkpoint c;
  c.dir_ = dir;
  const std::string index_path = dir + "/" + kIndexName;
  if (exists(index_path)) {
    const auto index = json_read::parse(read_file(index_path, kMaxIndexBytes), index_path);
    if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object())
      throw FormatError(index_path + ": must be an object with a 'weight_map' object");
    const auto& map = index.at("weight_map");
    if (map.empty()) throw FormatError(index_path + ": weight_map is empty");
    std::map<std::string, size_t> shard_of_file;  // shard file name -> files_ index
    for (auto it = map.begin(); it != map.end(); ++it) {
      const std::string file = json_read::string(*it, index_path, "weight_map['" + it.key() + "']");
      check_shard_name(file, index_path);
      if (!shard_of_file.count(file)) {
        const std::string path = dir + "/" + file;
        if (!exists(path))
          throw FormatError(index_path + ": shard '" + file + "' (holding '" + it.key() + "') does not exist");
        shard_of_file[file] = c.files_.size();
        c.files_.push_back(std::make_unique<SafetensorsFile>(path));
      }
    }
    // Each shard's tensors by name: a large checkpoint lists tens of
    // thousands, one scan of its shard per entry would be quadratic.
    std::vector<std::unordered_map<std::string_view, const TensorInfo*>> in_shard(c.files_.size());
    for (size_t i = 0; i < c.files_.size(); ++i)
      for (const auto& x : c.files_[i]->tensors()) in_shard[i].emplace(x.name, &x);
    for (auto it = map.begin(); it != map.end(); ++it) {
      const auto& names = in_shard[shard_of_file.at(it->get<std::string>())];
      const auto found = names.find(it.key());
      const TensorInfo* t = found == names.end() ? nullptr : found->second;
      if (!t)
        throw FormatError(index_path + ": tensor '" + it.key() + "' is not in its shard '" +
                          it->get<std::string>() + "'");
      c.by_name_[it.key()] = t;
    }
    for (const auto& f : c.files_)
      for (const auto& t : f->tensors()) {
        const auto it = c.by_name_.find(t.name);
        if (it == c.by_name_.end())
          throw FormatError(index_path + ": shard '" + f->mapping().path() + "' holds tensor '" +
                            t.name + "', which the index does not list");
        if (it->second != &t)
          throw FormatError(index_path + ": tensor '" + t.name + "' is in shard '" +
                            f->mapping().path() + "' as well as in '" + it->second->file + "'");
      }
  } else if (exists(dir + "/" + kSingleName)) {
    c.files_.push_back(std::make_unique<SafetensorsFile>(dir + "/" + kSingleName));
    for (const auto& t : c.files_[0]->tensors()) c.by_name_[t.name] = &t;
  } else {
    throw FormatError("no checkpoint in '" + dir + "': neither " + kIndexName + " nor " + kSingleName +
                      " exists");
  }
  for (const auto& f : c.files_) c.mapping_of_[f->mapping().path()] = &f->mapping();
  return c;
}

const TensorInfo* Checkpoint::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const TensorInfo& Checkpoint::at(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (!t) throw FormatError(dir_ + ": tensor '" + name + "' is missing from the checkpoint");
  return *t;
}

std::vector<const TensorInfo*> Checkpoint::tensors() const {
  std::vector<const TensorInfo*> v;
  v.reserve(by_name_.size());
  for (const auto& kv : by_name_) v.push_back(kv.second);
  return v;
}

uint64_t Checkpoint::file_bytes() const {
  uint64_t n = 0;
  for (const auto& f : files_) n += f->mapping().size();
  return n;
}

void Checkpoint::release(const TensorInfo& t) const {
  const auto it = mapping_of_.find(t.file);
  if (it != mapping_of_.end()) it->second->release(t.data, t.bytes());
}

}  // namespace wd::model
