// Byte-level BPE: the model step of the tokenizer, on raw bytes.
//
// The vocabulary's byte-level strings are mapped back to bytes once at load,
// so a piece is BPE'd on its UTF-8 bytes directly (no per-call byte-level
// mapping). Merge order is HF's: repeatedly apply the adjacent pair with the
// lowest merge rank, the leftmost one among equal ranks (a heap of
// (rank, position), stale entries skipped), which for a trained merge list is
// the classic GPT-2 loop. If a pair appears twice in the merge list the later
// rank wins, as in HF's map construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/word_cache.h"
#include "warpdecode/tokenizer/tokenizer.h"

namespace wd::tok {

class BpeModel {
 public:
  struct VocabEntry {
    std::string bytes;  // what the token stands for
    TokenId id;
  };
  struct Merge {
    TokenId left, right, result;
  };
  // `byte_ids[b]` is the id of the single-byte token of byte b (all 256 must
  // exist). `vocab` lists every token that has a byte meaning (for
  // ignore_merges). Merges are in rank order.
  BpeModel(const TokenId (&byte_ids)[256], std::vector<VocabEntry> vocab, const std::vector<Merge>& merges,
           bool ignore_merges);

  // Appends the ids of one pre-tokenized piece. Not thread-safe (the cache);
  // the Tokenizer serialises calls.
  void encode_piece(std::string_view bytes, std::vector<TokenId>& out);

  // Without the cache; for tests and the cache-miss path.
  void merge_word(std::string_view bytes, std::vector<TokenId>& out) const;

 private:
  struct PairSlot {
    uint64_t key;  // (left << 32) | right; kEmpty if unused
    uint32_t rank;
    TokenId result;
  };
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  bool find_merge(TokenId left, TokenId right, uint32_t* rank, TokenId* result) const;

  TokenId byte_ids_[256];
  std::vector<PairSlot> pairs_;  // open addressing, power-of-two size
  uint64_t pair_mask_ = 0;
  bool ignore_merges_;
  WordCache whole_words_;  // bytes -> id, for ignore_merges
  WordCache cache_;

  // Scratch for merge_word, reused across calls.
  struct Symbol {
    TokenId id;
    int32_t prev, next;
    uint32_t len;
  };
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    TokenId result;
  };
  mutable std::vector<Symbol> symbols_;
  mutable std::vector<Candidate> heap_;
};

}  // namespace wd::tok
