#include "data/gpt2_pretokenizer.h"

#include <memory>
#include <string>
#include <vector>

#include "data/regex_splitter.h"
#include "data/utf8.h"

namespace megaton::data {

namespace {

constexpr uint32_t kCodePoints = 0x110000;

// Every code point's class, from PCRE2's \p{L} / \p{N} (scanning one string that holds all code points in order)
// and the Unicode White_Space list used by the regex path.
std::vector<uint8_t> build_table() {
  std::vector<uint8_t> t(kCodePoints, Gpt2PreTokenizer::kOther);
  std::string all;
  all.reserve(4 * kCodePoints);
  for (uint32_t cp = 1; cp < kCodePoints; ++cp)
    if (cp < 0xD800 || cp > 0xDFFF) append_utf8(all, cp);
  const std::pair<const char*, uint8_t> classes[] = {{R"(\p{L}+)", Gpt2PreTokenizer::kLetter},
                                                     {R"(\p{N}+)", Gpt2PreTokenizer::kNumber},
                                                     {R"(\s+)", Gpt2PreTokenizer::kSpace}};
  for (const auto& [pattern, cls] : classes) {
    RegexSplitter re(pattern, "code point classes");
    RegexSplitter::Matcher m(re);
    size_t pos = 0, b = 0, e = 0;
    while (pos < all.size() && m.find(all, pos, b, e)) {
      for (size_t i = b; i < e;) t[next_code_point(all, i)] = cls;
      pos = e;
    }
  }
  return t;
}

const uint8_t* shared_table() {
  static const std::vector<uint8_t> table = build_table();  // immutable after the thread-safe initialisation
  return table.data();
}

}  // namespace

Gpt2PreTokenizer::Gpt2PreTokenizer() : table_(shared_table()) {}

size_t Gpt2PreTokenizer::next(std::string_view s, size_t i) const {
  const size_t n = s.size();
  auto decode = [&](size_t& at) -> uint32_t {
    const auto b = static_cast<unsigned char>(s[at]);
    if (b < 0x80) {
      ++at;
      return b;
    }
    return next_code_point(s, at);
  };
  // End of the run of `cls` code points starting at `at`.
  auto run = [&](size_t at, Class cls) {
    while (at < n) {
      size_t k = at;
      if (table_[decode(k)] != cls) break;
      at = k;
    }
    return at;
  };
  if (s[i] == '\'' && i + 1 < n) {
    const char c1 = s[i + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
    if (i + 2 < n) {
      const char c2 = s[i + 2];
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return i + 3;
    }
  }
  size_t j = i;
  const auto cls = static_cast<Class>(table_[decode(j)]);
  if (s[i] == ' ' && j < n) {
    size_t k = j;
    const auto next_cls = static_cast<Class>(table_[decode(k)]);
    if (next_cls != kSpace) return run(k, next_cls);  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+"
  }
  if (cls != kSpace) return run(j, cls);
  // Whitespace: \s+(?!\S) takes the run but its last character when a non-space follows; \s+ a lone one.
  size_t last = i;
  while (j < n) {
    size_t k = j;
    if (table_[decode(k)] != kSpace) break;
    last = j;
    j = k;
  }
  if (j == n) return j;
  return last > i ? last : j;
}

}  // namespace megaton::data
