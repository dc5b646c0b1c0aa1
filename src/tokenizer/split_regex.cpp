#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/split_regex.h"

#include <pcre2.h>

#include <cctype>
#include <mutex>
#include <vector>

#include "warpdecode/error.h"

namespace wd::tok {
namespace {

// Oniguruma's Unicode \s, spelt for use inside a PCRE2 class.
constexpr const char* kSpaceSet = "\\t\\n\\x{0B}\\f\\r\\x{85}\\p{Z}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

std::string translate_oniguruma_pattern(const std::string& p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 == p.size()) throw FormatError("Split regex ends with a lone backslash");
      const char e = p[++i];
      switch (e) {
        case 's':
          out += in_class ? std::string(kSpaceSet) : std::string("[") + kSpaceSet + "]";
          break;
        case 'S':
          if (in_class)
            throw FormatError("Split regex: \\S inside a character class is not supported");
          out += std::string("[^") + kSpaceSet + "]";
          break;
        case 'w': case 'W': case 'd': case 'D': case 'b': case 'B':
        case 'h': case 'H': case 'v': case 'V': case 'R': case 'X': case 'K':
          throw FormatError(detail::concat("Split regex uses \\", e,
                                           ", whose meaning differs between Oniguruma (HF tokenizers) and PCRE2; "
                                           "not supported"));
        default:
          out += '\\';
          out += e;
          // Copy \p{...} / \x{...} / \P{...} bodies whole, so '[' or ':' in them are not syntax.
          if ((e == 'p' || e == 'P' || e == 'x') && i + 1 < p.size() && p[i + 1] == '{') {
            const size_t close = p.find('}', i + 1);
            if (close == std::string::npos) throw FormatError("Split regex: unterminated \\p{ or \\x{");
            out.append(p, i + 1, close - i);
            i = close;
          }
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal in both engines.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ':')
        throw FormatError("Split regex: POSIX classes like [:alpha:] are not supported");
      continue;
    }
    // Anchors and option letters differ: Oniguruma's (Ruby syntax) ^ and $
    // match at every line boundary and its (?m) is PCRE2's (?s); refused
    // rather than translated (no byte-level pattern we know uses them).
    if (!in_class && (c == '^' || c == '$'))
      throw FormatError(detail::concat("Split regex uses the anchor '", c,
                                       "', which matches at line boundaries in Oniguruma (HF tokenizers) and only at "
                                       "the ends in PCRE2; not supported"));
    if (!in_class && c == '(' && i + 1 < p.size() && p[i + 1] == '?') {
      // (?flags) or (?flags:...): only i (case-insensitive) means the same in both engines.
      size_t j = i + 2;
      while (j < p.size() && (std::isalpha(static_cast<unsigned char>(p[j])) || p[j] == '-')) ++j;
      const bool options = j > i + 2 && j < p.size() && (p[j] == ':' || p[j] == ')');
      for (size_t k = i + 2; options && k < j; ++k)
        if (p[k] != 'i' && p[k] != '-')
          throw FormatError(detail::concat("Split regex sets the option '", p[k],
                                           "', whose meaning differs between Oniguruma (HF tokenizers) and PCRE2; "
                                           "only (?i) is supported"));
    }
    if (in_class && c == '[') throw FormatError("Split regex: nested character classes are not supported");
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  if (in_class) throw FormatError("Split regex: unterminated character class");
  return out;
}

struct SplitRegex::State {
  pcre2_code* code = nullptr;
  bool jit = false;
  pcre2_jit_stack* jit_stack = nullptr;
  // One match-data block per concurrent caller; most calls take the first.
  mutable std::mutex mutex;
  mutable std::vector<pcre2_match_data*> free_match_data;
  pcre2_match_context* context = nullptr;

  ~State() {
    for (auto* m : free_match_data) pcre2_match_data_free(m);
    if (context) pcre2_match_context_free(context);
    if (jit_stack) pcre2_jit_stack_free(jit_stack);
    if (code) pcre2_code_free(code);
  }
};

SplitRegex::SplitRegex(const std::string& pattern) : state_(std::make_unique<State>()) {
  translated_ = translate_oniguruma_pattern(pattern);
  int err = 0;
  PCRE2_SIZE offset = 0;
  // UTF: patterns and subjects are UTF-8; UCP: \p and case folding by Unicode
  // properties. NO_UTF_CHECK is passed at match time: inputs are validated once.
  state_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated_.data()), translated_.size(),
                               PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (!state_->code)
    throw FormatError(detail::concat("Split regex does not compile with PCRE2 at offset ", offset, ": ",
                                     pcre2_message(err), " (pattern ", pattern, ")"));
  state_->jit = pcre2_jit_compile(state_->code, PCRE2_JIT_COMPLETE) == 0;
  state_->context = pcre2_match_context_create(nullptr);
  if (state_->jit) {
    // Long runs of one class backtrack in (?!\S); 1 MiB covers inputs far
    // beyond any prompt (tested with 100k-character runs).
    state_->jit_stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(state_->context, nullptr, state_->jit_stack);
  }
}

SplitRegex::SplitRegex(SplitRegex&&) noexcept = default;
SplitRegex& SplitRegex::operator=(SplitRegex&&) noexcept = default;
SplitRegex::~SplitRegex() = default;

bool SplitRegex::jit() const { return state_->jit; }

void* SplitRegex::acquire() const {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.free_match_data.empty()) {
      pcre2_match_data* md = s.free_match_data.back();
      s.free_match_data.pop_back();
      return md;
    }
  }
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(s.code, nullptr);
  if (!md) throw Error("out of memory for PCRE2 match data");
  return md;
}

void SplitRegex::release(void* md) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->free_match_data.push_back(static_cast<pcre2_match_data*>(md));
}

bool SplitRegex::next_match(void* match_data, std::string_view text, size_t from, size_t* begin,
                            size_t* end) const {
  const State& s = *state_;
  auto* md = static_cast<pcre2_match_data*>(match_data);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const int rc = s.jit ? pcre2_jit_match(s.code, subject, text.size(), from, PCRE2_NO_UTF_CHECK, md, s.context)
                       : pcre2_match(s.code, subject, text.size(), from, PCRE2_NO_UTF_CHECK, md, s.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) throw Error(detail::concat("Split regex match failed: ", pcre2_message(rc)));
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  *begin = ov[0];
  *end = ov[1];
  return true;
}

}  // namespace wd::tok
