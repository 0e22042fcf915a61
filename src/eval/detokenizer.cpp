#include "eval/detokenizer.h"

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <memory>
#include <vector>

#include "core/error.h"

namespace megaton::eval {

namespace {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
  return s;
}

// Python's re.sub(pattern, replacement, s) for every match (replacement in PCRE2 syntax: $1 for \1).
std::string regex_sub(const std::string& s, const char* pattern, const char* replacement) {
  int err = 0;
  PCRE2_SIZE off = 0;
  std::unique_ptr<pcre2_code, decltype(&pcre2_code_free)> re(
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr),
      &pcre2_code_free);
  MEGATON_ASSERT(re != nullptr, "detokenizer pattern ", pattern, " does not compile (PCRE2 error ", err, ")");
  std::vector<char> out(s.size() + s.size() / 4 + 64);
  for (;;) {
    PCRE2_SIZE n = out.size();
    const int rc = pcre2_substitute(re.get(), reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0,
                                    PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH | PCRE2_NO_UTF_CHECK,
                                    nullptr, nullptr, reinterpret_cast<PCRE2_SPTR>(replacement),
                                    PCRE2_ZERO_TERMINATED, reinterpret_cast<PCRE2_UCHAR*>(out.data()), &n);
    if (rc == PCRE2_ERROR_NOMEMORY) {
      out.resize(n + 1);
      continue;
    }
    MEGATON_CHECK(rc >= 0, DataError, "detokenizer regex ", pattern, " failed on the input (PCRE2 error ", rc,
                  "; is the file valid UTF-8?)");
    return std::string(out.data(), n);
  }
}

}  // namespace

std::string ptb_detokenize(const std::string& text) {
  std::string s = text;
  s = replace_all(s, " '", "'");
  s = replace_all(s, " \n", "\n");
  s = replace_all(s, "\n ", "\n");
  s = replace_all(s, " n't", "n't");
  s = replace_all(s, " N ", "1 ");
  s = replace_all(s, "$ 1", "$1");
  s = replace_all(s, "# 1", "#1");
  return s;
}

std::string wikitext_detokenize(const std::string& text) {
  std::string s = text;
  // contractions
  s = replace_all(s, "s '", "s'");
  s = regex_sub(s, "/' [0-9]/", "/'[0-9]/");  // Megatron's pattern, literal slashes included
  // number separators
  s = replace_all(s, " @-@ ", "-");
  s = replace_all(s, " @,@ ", ",");
  s = replace_all(s, " @.@ ", ".");
  // punctuation
  s = replace_all(s, " : ", ": ");
  s = replace_all(s, " ; ", "; ");
  s = replace_all(s, " . ", ". ");
  s = replace_all(s, " ! ", "! ");
  s = replace_all(s, " ? ", "? ");
  s = replace_all(s, " , ", ", ");
  // double brackets
  s = regex_sub(s, R"(\(\s*([^\)]*?)\s*\))", "($1)");
  s = regex_sub(s, R"(\[\s*([^\]]*?)\s*\])", "[$1]");
  s = regex_sub(s, R"(\{\s*([^}]*?)\s*\})", "{$1}");
  s = regex_sub(s, R"("\s*([^"]*?)\s*")", "\"$1\"");
  s = regex_sub(s, R"('\s*([^']*?)\s*')", "'$1'");
  // miscellaneous
  s = replace_all(s, "= = = =", "====");
  s = replace_all(s, "= = =", "===");
  s = replace_all(s, "= =", "==");
  s = replace_all(s, " \xC2\xB0 ", "\xC2\xB0");  // " ° " -> "°"
  s = replace_all(s, " \n", "\n");
  s = replace_all(s, "\n ", "\n");
  s = replace_all(s, " N ", " 1 ");
  s = replace_all(s, " 's", "'s");
  return s;
}

Detokenizer detokenizer_for_path(const std::string& path, std::string* name) {
  auto set = [&](const char* n) {
    if (name) *name = n;
  };
  if (path.find("ptb") != std::string::npos) {
    set("ptb");
    return ptb_detokenize;
  }
  if (path.find("wiki") != std::string::npos) {
    set("wiki");
    return wikitext_detokenize;
  }
  set(path.find("lambada") != std::string::npos ? "lambada" : "none");
  return [](const std::string& s) { return s; };
}

}  // namespace megaton::eval
