// A hand-built Qwen-shaped tokenizer.json for tests that must run without the
// fixture: the 256 byte-level symbols (id = byte value), nine merges whose
// order matters, Qwen's split regex and pipeline, and five added tokens.
//
// Merges, by rank:  0 "Ġ t"  1 "h e"  2 "Ġt he"  3 "l l"  4 "e ll"  5 "h ell"
//                   6 "hell o"  7 "Ã ©" (é)  8 "a a"
// New ids 256..264 in that order; added: 265 <|endoftext|> 266 <|im_start|>
// 267 <|im_end|> (special), 268 <think> 269 </think> (not special).
#pragma once

#include <cstdio>
#include <string>

namespace wd::tok::test {

inline const char* kQwenSplitRegexJson =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+)";

// The byte-level symbol of byte b as UTF-8, escaped for a JSON string.
inline std::string json_symbol(int b) {
  const bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  int cp = b;
  if (!self) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      const bool s = (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
      if (!s) ++n;
    }
    cp = 0x100 + n;
  }
  if (cp == '"') return "\\\"";
  if (cp == '\\') return "\\\\";
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\u%04X", unsigned(cp) & 0xFFFFu);
  return cp < 0x80 ? std::string(1, char(cp)) : std::string(buf);
}

// `extra_added` is spliced into the added_tokens list (leading comma included
// by the caller); `pre_tokenizer` / `normalizer` override the pipeline.
inline std::string small_tokenizer_json(const std::string& extra_added = "",
                                        const std::string& normalizer = R"({"type":"NFC"})",
                                        const std::string& split_regex = kQwenSplitRegexJson,
                                        const std::string& model_extra = "") {
  std::string vocab;
  for (int b = 0; b < 256; ++b) vocab += (b ? "," : "") + std::string("\"") + json_symbol(b) + "\":" + std::to_string(b);
  vocab += R"(,"\u0120t":256,"he":257,"\u0120the":258,"ll":259,"ell":260,"hell":261,"hello":262,"\u00C3\u00A9":263,"aa":264)";
  const std::string merges =
      R"(["\u0120 t","h e","\u0120t he","l l","e ll","h ell","hell o","\u00C3 \u00A9","a a"])";
  return std::string(R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":[)") +
         R"({"id":265,"content":"<|endoftext|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},)" +
         R"({"id":266,"content":"<|im_start|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},)" +
         R"({"id":267,"content":"<|im_end|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},)" +
         R"({"id":268,"content":"<think>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":false},)" +
         R"({"id":269,"content":"</think>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":false})" +
         extra_added + R"(],"normalizer":)" + normalizer +
         R"(,"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":")" + split_regex +
         R"("},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]},)" +
         R"("post_processor":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false},)" +
         R"("decoder":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false},)" +
         R"("model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":"","end_of_word_suffix":"","fuse_unk":false,"byte_fallback":false,"ignore_merges":false)" +
         model_extra + R"(,"vocab":{)" + vocab + R"(},"merges":)" + merges + "}}";
}

}  // namespace wd::tok::test
