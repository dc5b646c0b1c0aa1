#include "tokenizer/word_cache.h"

#include <cstring>

namespace wd::tok {

WordCache::WordCache(size_t max_entries) : max_entries_(max_entries) {
  size_t n = 16;
  while (n < 2 * max_entries_) n <<= 1;  // load factor <= 1/2
  slots_.assign(n, Slot{0, 0, 0, 0, 0});
}

uint64_t WordCache::hash(std::string_view key) {
  // 8 bytes at a time, multiply-xorshift mixing (in the style of wyhash / murmur's finaliser).
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (key.size() * 0xC2B2AE3D27D4EB4Full);
  size_t i = 0;
  for (; i + 8 <= key.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, key.data() + i, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, key.data() + i, key.size() - i);
  h = (h ^ tail) * 0x94D049BB133111EBull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return h | 1;  // never 0, the empty marker
}

bool WordCache::find(std::string_view key, uint64_t h, const TokenId** ids, size_t* count) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.hash == 0) return false;
    if (s.hash == h && s.key_length == key.size() &&
        std::memcmp(keys_.data() + s.key_offset, key.data(), key.size()) == 0) {
      *ids = ids_.data() + s.ids_offset;
      *count = s.ids_length;
      return true;
    }
  }
}

void WordCache::insert(std::string_view key, uint64_t h, const TokenId* ids, size_t count) {
  if (used_ >= max_entries_ || keys_.size() + key.size() > UINT32_MAX || ids_.size() + count > UINT32_MAX) clear();
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  while (slots_[i].hash != 0) i = (i + 1) & mask;
  slots_[i] = Slot{h, uint32_t(keys_.size()), uint32_t(key.size()), uint32_t(ids_.size()), uint32_t(count)};
  keys_.append(key.data(), key.size());
  ids_.insert(ids_.end(), ids, ids + count);
  ++used_;
}

void WordCache::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{0, 0, 0, 0, 0});
  keys_.clear();
  ids_.clear();
  used_ = 0;
}

}  // namespace wd::tok
