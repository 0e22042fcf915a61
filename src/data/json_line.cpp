#include "data/json_line.h"

#include <cstring>

#include "core/error.h"
#include "data/utf8.h"

#ifdef MEGATON_HAVE_SIMDJSON
#include <simdjson.h>
#else
#include <nlohmann/json.hpp>
#endif

namespace megaton::data {

struct JsonLineParser::Impl {
#ifdef MEGATON_HAVE_SIMDJSON
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
#else
  nlohmann::json doc;
  std::vector<std::string> strings;
#endif
};

JsonLineParser::JsonLineParser(std::vector<std::string> keys)
    : impl_(std::make_unique<Impl>()), keys_(std::move(keys)) {}
JsonLineParser::~JsonLineParser() = default;

namespace {
int hex4(std::string_view s, size_t i) {
  if (i + 4 > s.size()) return -1;
  int v = 0;
  for (size_t k = i; k < i + 4; ++k) {
    const char c = s[k];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= c - '0';
    else if (c >= 'a' && c <= 'f')
      v |= c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v |= c - 'A' + 10;
    else
      return -1;
  }
  return v;
}
}  // namespace

std::string replace_lone_surrogate_escapes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out.push_back(s[i++]);
      continue;
    }
    if (s[i + 1] != 'u') {
      out.append(s.substr(i, 2));
      i += 2;
      continue;
    }
    const int cp = hex4(s, i + 2);
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      const int lo = (i + 7 < s.size() && s[i + 6] == '\\' && s[i + 7] == 'u') ? hex4(s, i + 8) : -1;
      if (lo >= 0xDC00 && lo <= 0xDFFF) {
        out.append(s.substr(i, 12));
        i += 12;
      } else {
        out.append("\\ufffd");
        i += 6;
      }
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      out.append("\\ufffd");
      i += 6;
    } else {
      out.append(s.substr(i, 2));
      i += 2;
    }
  }
  return out;
}

std::string JsonLineParser::parse_once(std::string_view line, bool padded, std::vector<std::string_view>& values) {
  values.assign(keys_.size(), std::string_view());
#ifdef MEGATON_HAVE_SIMDJSON
  auto r = impl_->parser.parse(line.data(), line.size(), !padded);
  if (r.error()) return str("not valid JSON (", simdjson::error_message(r.error()), ")");
  impl_->doc = r.value_unsafe();
  simdjson::dom::object obj;
  if (impl_->doc.get_object().get(obj)) return "not a JSON object";
  // A key given twice takes its last value, as Python's json.loads does (simdjson's at_key would take the first).
  std::vector<simdjson::dom::element> last(keys_.size());
  std::vector<bool> seen(keys_.size(), false);
  for (const auto field : obj)
    for (size_t k = 0; k < keys_.size(); ++k)
      if (field.key == keys_[k]) {
        last[k] = field.value;
        seen[k] = true;
      }
  for (size_t k = 0; k < keys_.size(); ++k) {
    if (!seen[k]) return str("no key '", keys_[k], "'");
    if (last[k].get_string().get(values[k])) return str("key '", keys_[k], "' is not a string");
  }
#else
  (void)padded;
  try {
    impl_->doc = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    return str("not valid JSON (", e.what(), ")");
  }
  if (!impl_->doc.is_object()) return "not a JSON object";
  impl_->strings.assign(keys_.size(), std::string());
  for (size_t k = 0; k < keys_.size(); ++k) {
    auto it = impl_->doc.find(keys_[k]);
    if (it == impl_->doc.end()) return str("no key '", keys_[k], "'");
    if (!it->is_string()) return str("key '", keys_[k], "' is not a string");
    impl_->strings[k] = it->get<std::string>();
    values[k] = impl_->strings[k];
  }
#endif
  return "";
}

std::string JsonLineParser::parse(std::string_view line, std::vector<std::string_view>& values) {
  std::string err = parse_once(line, true, values);
  if (err.empty() || err.rfind("not valid JSON", 0) != 0) return err;
  // Repairable problems: invalid UTF-8 bytes, lone surrogate escapes.
  std::string fixed = is_valid_utf8(line) ? std::string(line) : sanitize_utf8(line);
  if (fixed.find("\\u") != std::string::npos || fixed.find("\\U") != std::string::npos)
    fixed = replace_lone_surrogate_escapes(fixed);
  if (fixed == line) return err;
  fixed_ = std::move(fixed);
  const std::string err2 = parse_once(fixed_, false, values);
  return err2.empty() ? "" : err;
}

}  // namespace megaton::data
