// A Hugging Face checkpoint directory: its safetensors files, mapped.
//
//   sharded   model.safetensors.index.json  {"metadata": {...},
//                                            "weight_map": {tensor: shard file}}
//             + the shard files it names (plain file names in the directory)
//   single    model.safetensors
//
// The index is checked against the shards: every shard it names exists and
// validates, every tensor it lists is in the shard it names, and no shard
// holds a tensor the index does not list (or that another shard holds too).
// Nothing is read until a tensor's bytes are touched: opening a 60 GB
// checkpoint costs its headers.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "warpdecode/model/safetensors.h"

namespace wd::model {

class Checkpoint {
 public:
  // Throws wd::FormatError naming the file and what is wrong.
  static Checkpoint open(const std::string& dir);

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  const std::string& dir() const { return dir_; }
  // nullptr when absent.
  const TensorInfo* find(const std::string& name) const;
  // Throws FormatError("... tensor '<name>' is missing ...") when absent.
  const TensorInfo& at(const std::string& name) const;
  // Every tensor, sorted by name.
  std::vector<const TensorInfo*> tensors() const;
  size_t num_files() const { return files_.size(); }
  uint64_t file_bytes() const;  // total size of the mapped files

  // Drops the tensor's resident pages (see MappedFile::release).
  void release(const TensorInfo& t) const;

 private:
  Checkpoint() = default;
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> by_name_;
  std::map<std::string, const MappedFile*> mapping_of_;  // file path -> mapping
};

}  // namespace wd::model
