// Pre-tokenization by regular expression (PCRE2, UTF + Unicode properties, JIT-compiled when available). The GPT-2
// pattern is `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`; `\s` is rewritten to the
// Unicode White_Space set (what Python's `regex`, Rust's `regex`/onig and tiktoken use) instead of PCRE2's own
// definition, so pre-tokens match the Python reference; nested classes are flattened as Oniguruma reads them
// (portable_pattern).
#pragma once
#include <memory>
#include <string>
#include <string_view>

namespace megaton::data {

/// GPT-2's pre-tokenization pattern (also used by HF ByteLevel with use_regex=true).
extern const char* const kGpt2Pattern;

/// A tokenizer.json regex (Oniguruma syntax) as PCRE2 reads it the same way: `\s` / `\S` (outside or inside [...])
/// become explicit Unicode White_Space classes, and a class nested in a class, which Oniguruma reads as a union
/// (BLOOM's ` ?[^(\s|[.,!?…])]+`), is flattened into its enclosing class. DataError for a negated nested class.
std::string portable_pattern(std::string_view pattern);

/// A compiled pattern. find() is thread-safe (match data is per call site: pass a Matcher).
class RegexSplitter {
 public:
  /// Throws DataError naming `origin` and the PCRE2 message when the pattern does not compile.
  RegexSplitter(std::string_view pattern, const std::string& origin, bool case_insensitive = false);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  /// Per-thread scratch for matching.
  class Matcher {
   public:
    explicit Matcher(const RegexSplitter& re);
    ~Matcher();
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;
    /// Finds the first match at or after `start` in valid UTF-8 `text`: sets [begin, end) and returns true.
    bool find(std::string_view text, size_t start, size_t& begin, size_t& end);

   private:
    const RegexSplitter& re_;
    void* match_data_;  // pcre2_match_data*
  };

  bool jit() const { return jit_; }

 private:
  void* code_;  // pcre2_code*
  bool jit_ = false;
};

}  // namespace megaton::data
