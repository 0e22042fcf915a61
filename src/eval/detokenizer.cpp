#include "eval/detokenizer.h"

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <initializer_list>
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
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &off,
                    nullptr),
      &pcre2_code_free);
  MEGATON_ASSERT(re != nullptr, "detokenizer pattern ", pattern, " does not compile (PCRE2 error ", err, ")");
  std::vector<char> out(s.size() + s.size() / 4 + 64);
  for (;;) {
    PCRE2_SIZE n = out.size();
    const int rc = pcre2_substitute(re.get(), reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0,
                                    PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_OVERFLOW_LENGTH | PCRE2_NO_UTF_CHECK,
                                    nullptr, nullptr, reinterpret_cast<PCRE2_SPTR>(replacement), PCRE2_ZERO_TERMINATED,
                                    reinterpret_cast<PCRE2_UCHAR*>(out.data()), &n);
    if (rc == PCRE2_ERROR_NOMEMORY) {
      out.resize(n + 1);
      continue;
    }
    MEGATON_CHECK(rc >= 0, DataError, "detokenizer regex ", pattern, " failed on the input (PCRE2 error ", rc,
                  "; is the file valid UTF-8?)");
    return std::string(out.data(), n);
  }
}

// One step of a detokenizer: a literal replacement, or a regex substitution when `regex` is set.
struct Rule {
  const char* from;
  const char* to;
  bool regex = false;
};

std::string apply(std::string s, std::initializer_list<Rule> rules) {
  for (const auto& r : rules) s = r.regex ? regex_sub(s, r.from, r.to) : replace_all(s, r.from, r.to);
  return s;
}

}  // namespace

std::string ptb_detokenize(const std::string& text) {
  return apply(
      text, {{" '", "'"}, {" \n", "\n"}, {"\n ", "\n"}, {" n't", "n't"}, {" N ", "1 "}, {"$ 1", "$1"}, {"# 1", "#1"}});
}

std::string wikitext_detokenize(const std::string& text) {
  return apply(text, {
                         // contractions
                         {"s '", "s'"},
                         {"/' [0-9]/", "/'[0-9]/", true},  // Megatron's pattern, literal slashes included
                                                           // number separators
                         {" @-@ ", "-"},
                         {" @,@ ", ","},
                         {" @.@ ", "."},
                         // punctuation
                         {" : ", ": "},
                         {" ; ", "; "},
                         {" . ", ". "},
                         {" ! ", "! "},
                         {" ? ", "? "},
                         {" , ", ", "},
                         // double brackets
                         {R"(\(\s*([^\)]*?)\s*\))", "($1)", true},
                         {R"(\[\s*([^\]]*?)\s*\])", "[$1]", true},
                         {R"(\{\s*([^}]*?)\s*\})", "{$1}", true},
                         {R"("\s*([^"]*?)\s*")", "\"$1\"", true},
                         {R"('\s*([^']*?)\s*')", "'$1'", true},
                         // miscellaneous
                         {"= = = =", "===="},
                         {"= = =", "==="},
                         {"= =", "=="},
                         {" \xC2\xB0 ", "\xC2\xB0"},  // " ° " -> "°"
                         {" \n", "\n"},
                         {"\n ", "\n"},
                         {" N ", " 1 "},
                         {" 's", "'s"},
                     });
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
