#include "data/regex_splitter.h"

#include <pcre2.h>

#include "core/error.h"

namespace megaton::data {

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {
// Unicode White_Space, as class members (without brackets).
constexpr const char* kWhiteSpace =
    R"(\x{09}-\x{0D}\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
}  // namespace

std::string portable_pattern(std::string_view p) {
  std::string out;
  bool in_class = false;
  int nested = 0;  // depth of Oniguruma's nested classes inside the current class
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      if (n == 's') {
        out += in_class ? std::string(kWhiteSpace) : str("[", kWhiteSpace, "]");
      } else if (n == 'S' && !in_class) {
        out += str("[^", kWhiteSpace, "]");
      } else {
        out.push_back(c);
        out.push_back(n);  // \S inside a class and every other escape are kept as written
      }
      ++i;
      continue;
    }
    if (c == '[' && in_class && i + 1 < p.size() && p[i + 1] == ':') {  // a POSIX class, [:alpha:]
      const size_t close = p.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(p.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
    }
    if (c == '[' && in_class) {  // a nested class: its members join the enclosing class (a union)
      if (i + 1 < p.size() && p[i + 1] == '^')
        throw DataError(str("regex '", std::string(p), "': a negated class nested in a class (offset ", i,
                            ") has no PCRE2 equivalent"));
      ++nested;
      if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);  // a literal ']' first
      continue;
    }
    if (c == '[') {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);
      continue;
    }
    if (c == ']' && nested > 0) {
      --nested;
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out.push_back(c);
  }
  return out;
}

RegexSplitter::RegexSplitter(std::string_view pattern, const std::string& origin, bool case_insensitive) {
  std::string p;
  try {
    p = portable_pattern(pattern);
  } catch (const DataError& e) {
    throw DataError(str(origin, ": ", e.what()));
  }
  int err = 0;
  PCRE2_SIZE off = 0;
  uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK;
  if (case_insensitive) opts |= PCRE2_CASELESS;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), opts, &err, &off, nullptr);
  if (!code_) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw DataError(str(origin, ": cannot compile pre-tokenizer regex '", std::string(pattern),
                        "': ", reinterpret_cast<const char*>(msg), " at offset ", off));
  }
  jit_ = pcre2_jit_compile(static_cast<pcre2_code*>(code_), PCRE2_JIT_COMPLETE) == 0;
}

RegexSplitter::~RegexSplitter() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

RegexSplitter::Matcher::Matcher(const RegexSplitter& re)
    : re_(re), match_data_(pcre2_match_data_create_from_pattern(static_cast<pcre2_code*>(re.code_), nullptr)) {
  MEGATON_ASSERT(match_data_ != nullptr, "pcre2_match_data_create failed");
}

RegexSplitter::Matcher::~Matcher() {
  pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_));
}

bool RegexSplitter::Matcher::find(std::string_view text, size_t start, size_t& begin, size_t& end) {
  auto* code = static_cast<pcre2_code*>(re_.code_);
  auto* md = static_cast<pcre2_match_data*>(match_data_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const int rc = re_.jit_ ? pcre2_jit_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr)
                          : pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof(msg));
    throw RuntimeError(str("pre-tokenizer regex match failed: ", reinterpret_cast<const char*>(msg)));
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  begin = ov[0];
  end = ov[1];
  return true;
}

}  // namespace megaton::data
