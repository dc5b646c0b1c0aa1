// A byte-string -> id-list map for the BPE word cache: open addressing, keys
// and values in two arenas, lookups by string_view without allocating. When
// it holds kMaxEntries it is emptied and refilled (the text of a prompt or a
// corpus repeats its common words quickly, so a clear costs little).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "warpdecode/tokenizer/tokenizer.h"

namespace wd::tok {

class WordCache {
 public:
  explicit WordCache(size_t max_entries = size_t(1) << 17);

  static uint64_t hash(std::string_view key);
  // On a hit, points *ids / *count at the stored list.
  bool find(std::string_view key, uint64_t h, const TokenId** ids, size_t* count) const;
  void insert(std::string_view key, uint64_t h, const TokenId* ids, size_t count);
  void clear();
  size_t size() const { return used_; }

 private:
  struct Slot {
    uint64_t hash;  // 0 = empty (hash() never returns 0)
    uint32_t key_offset, key_length;
    uint32_t ids_offset, ids_length;
  };
  size_t max_entries_;
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<TokenId> ids_;
  size_t used_ = 0;
};

}  // namespace wd::tok
