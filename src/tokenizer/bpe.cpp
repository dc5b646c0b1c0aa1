#include "tokenizer/bpe.h"

#include <algorithm>

#include "warpdecode/error.h"

namespace wd::tok {
namespace {

uint64_t pair_key(TokenId left, TokenId right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }

uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xFF51AFD7ED558CCDull;
  k ^= k >> 33;
  return k;
}

// Only pieces up to this many bytes are cached: longer ones are rare and would
// crowd the arena.
constexpr size_t kMaxCachedBytes = 128;

}  // namespace

BpeModel::BpeModel(const TokenId (&byte_ids)[256], std::vector<VocabEntry> vocab, const std::vector<Merge>& merges,
                   bool ignore_merges)
    : ignore_merges_(ignore_merges), whole_words_(ignore_merges ? vocab.size() + 1 : 1) {
  std::copy(std::begin(byte_ids), std::end(byte_ids), byte_ids_);
  size_t n = 16;
  while (n < 2 * merges.size()) n <<= 1;
  pairs_.assign(n, PairSlot{kEmpty, 0, 0});
  pair_mask_ = n - 1;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Merge& m = merges[rank];
    const uint64_t key = pair_key(m.left, m.right);
    size_t i = mix(key) & pair_mask_;
    while (pairs_[i].key != kEmpty && pairs_[i].key != key) i = (i + 1) & pair_mask_;
    pairs_[i] = PairSlot{key, uint32_t(rank), m.result};  // a repeated pair keeps its later rank
  }
  if (ignore_merges_) {
    for (const VocabEntry& v : vocab) {
      const uint64_t h = WordCache::hash(v.bytes);
      const TokenId* ids;
      size_t count;
      if (!whole_words_.find(v.bytes, h, &ids, &count)) whole_words_.insert(v.bytes, h, &v.id, 1);
    }
  }
}

bool BpeModel::find_merge(TokenId left, TokenId right, uint32_t* rank, TokenId* result) const {
  const uint64_t key = pair_key(left, right);
  for (size_t i = mix(key) & pair_mask_;; i = (i + 1) & pair_mask_) {
    const PairSlot& s = pairs_[i];
    if (s.key == key) {
      *rank = s.rank;
      *result = s.result;
      return true;
    }
    if (s.key == kEmpty) return false;
  }
}

void BpeModel::merge_word(std::string_view bytes, std::vector<TokenId>& out) const {
  const size_t n = bytes.size();
  if (n == 0) return;
  if (n == 1) {
    out.push_back(byte_ids_[uint8_t(bytes[0])]);
    return;
  }
  symbols_.resize(n);
  for (size_t i = 0; i < n; ++i)
    symbols_[i] = Symbol{byte_ids_[uint8_t(bytes[i])], int32_t(i) - 1, i + 1 < n ? int32_t(i + 1) : -1, 1};

  // Min-heap on (rank, position).
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  heap_.clear();
  for (size_t i = 0; i + 1 < n; ++i) {
    uint32_t rank;
    TokenId result;
    if (find_merge(symbols_[i].id, symbols_[i + 1].id, &rank, &result))
      heap_.push_back(Candidate{rank, int32_t(i), result});
  }
  std::make_heap(heap_.begin(), heap_.end(), later);

  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const Candidate top = heap_.back();
    heap_.pop_back();
    Symbol& left = symbols_[size_t(top.pos)];
    if (left.len == 0 || left.next < 0) continue;  // merged away, or now last
    Symbol& right = symbols_[size_t(left.next)];
    // Stale entry: the pair at this position changed since it was queued.
    uint32_t rank;
    TokenId result;
    if (!find_merge(left.id, right.id, &rank, &result) || result != top.result) continue;

    left.id = top.result;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (left.next >= 0) symbols_[size_t(left.next)].prev = top.pos;

    if (left.prev >= 0) {
      const Symbol& prev = symbols_[size_t(left.prev)];
      if (find_merge(prev.id, left.id, &rank, &result)) {
        heap_.push_back(Candidate{rank, left.prev, result});
        std::push_heap(heap_.begin(), heap_.end(), later);
      }
    }
    if (left.next >= 0) {
      const Symbol& next = symbols_[size_t(left.next)];
      if (find_merge(left.id, next.id, &rank, &result)) {
        heap_.push_back(Candidate{rank, top.pos, result});
        std::push_heap(heap_.begin(), heap_.end(), later);
      }
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols_[size_t(i)].next) out.push_back(symbols_[size_t(i)].id);
}

void BpeModel::encode_piece(std::string_view bytes, std::vector<TokenId>& out) {
  if (bytes.empty()) return;
  const uint64_t h = WordCache::hash(bytes);
  const TokenId* ids;
  size_t count;
  if (ignore_merges_ && whole_words_.find(bytes, h, &ids, &count)) {
    out.insert(out.end(), ids, ids + count);
    return;
  }
  if (bytes.size() > kMaxCachedBytes) {
    merge_word(bytes, out);
    return;
  }
  if (cache_.find(bytes, h, &ids, &count)) {
    out.insert(out.end(), ids, ids + count);
    return;
  }
  const size_t start = out.size();
  merge_word(bytes, out);
  cache_.insert(bytes, h, out.data() + start, out.size() - start);
}

}  // namespace wd::tok
