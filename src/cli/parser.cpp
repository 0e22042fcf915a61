#include "cli/parser.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <regex>

#include "core/error.h"

namespace megaton::cli {

namespace po = boost::program_options;

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string strip_dashes(std::string s) {
  while (!s.empty() && s[0] == '-') s.erase(0, 1);
  const auto eq = s.find('=');
  if (eq != std::string::npos) s.resize(eq);
  return s;
}

// argparse's test for a token that is a value although it starts with '-': a negative number.
bool looks_like_negative_number(const std::string& t) {
  static const std::regex number(R"(-\d+$|-\d*\.\d+$)");
  return std::regex_match(t, number);
}

bool is_option_token(const std::string& t) {
  return t.size() > 1 && t[0] == '-' && !looks_like_negative_number(t);
}

// Python's bool(str): any non-empty string is true, "False" included.
bool python_bool(const std::string& v) {
  return !v.empty();
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool spells_false(const std::string& value) {
  const std::string v = lowercase(value);
  return v == "false" || v == "0" || v == "no" || v == "off";
}

}  // namespace

const std::vector<std::string>& python_bool_flags() {
  // Megatron-DeepSpeed's `type=bool` options: they take a value (`--eval-only True`), read as Python's bool(str).
  static const std::vector<std::string> flags = {"eval-only", "onnx-safe", "lazy-mpu-init"};
  return flags;
}

std::vector<std::string> argparse_normalize(const std::vector<std::string>& args,
                                            const po::options_description& options, std::ostream& warnings) {
  struct Occurrence {
    std::string name;                 // the long name as given, without dashes
    std::vector<std::string> values;  // the tokens it took
    bool known = false, with_equals = false;
  };
  std::vector<Occurrence> seen;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& t = args[i];
    if (t.rfind("--", 0) != 0 || t.size() == 2) {  // a short option, a bare value or "--": left to the parser
      seen.push_back({"", {t}, false, false});
      continue;
    }
    Occurrence o;
    const size_t eq = t.find('=');
    o.name = t.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const po::option_description* d = options.find_nothrow(o.name, false, false, false);
    o.known = d != nullptr;
    if (eq != std::string::npos) {
      o.with_equals = true;
      o.values.push_back(strip_digit_separators(t.substr(eq + 1)));
    }
    const bool python_bool_flag =
        std::find(python_bool_flags().begin(), python_bool_flags().end(), o.name) != python_bool_flags().end();
    const unsigned max_tokens = d == nullptr ? 0u : d->semantic()->max_tokens();
    if (o.known && !o.with_equals) {
      // argparse: a value is every following token up to the next option (negative numbers are values).
      const size_t want = python_bool_flag ? 1 : std::min<unsigned>(max_tokens, 1u << 20);
      while (o.values.size() < want && i + 1 < args.size() && !is_option_token(args[i + 1]))
        o.values.push_back(strip_digit_separators(args[++i]));
    }
    if (o.known) {
      for (auto it = seen.begin(); it != seen.end(); ++it) {
        if (it->known && it->name == o.name) {  // argparse's store: the last occurrence wins
          seen.erase(it);
          break;
        }
      }
    }
    if (python_bool_flag && !o.values.empty()) {
      const std::string v = o.values.front();
      if (spells_false(v))
        warnings << "megaton: warning: --" << o.name << " " << v
                 << " is true, as in Megatron-DeepSpeed (its type=bool reads any non-empty value as True); "
                    "leave the flag out to turn it off\n";
      if (!python_bool(v)) continue;  // an empty value is False: the flag is dropped
      o.values.clear();
      o.with_equals = false;
    }
    seen.push_back(std::move(o));
  }
  std::vector<std::string> out;
  for (const Occurrence& o : seen) {
    if (o.name.empty()) {
      out.insert(out.end(), o.values.begin(), o.values.end());
    } else if (o.values.size() == 1 && (o.with_equals || o.known)) {
      out.push_back("--" + o.name + "=" + o.values.front());  // "=" keeps a value like "-1" a value
    } else {
      out.push_back("--" + o.name);
      out.insert(out.end(), o.values.begin(), o.values.end());
    }
  }
  return out;
}

std::string strip_digit_separators(const std::string& token) {
  // Python's int()/float() (and so Megatron's argparse) accept "1_000_000": digits with single underscores between
  // them, optional sign, fraction and exponent. Only such all-numeric tokens are rewritten.
  static const std::regex numeric(R"([+-]?\d+(_\d+)*(\.\d+(_\d+)*)?([eE][+-]?\d+)?)");
  if (token.find('_') == std::string::npos || !std::regex_match(token, numeric)) return token;
  std::string out;
  for (char c : token)
    if (c != '_') out += c;
  return out;
}

std::string closest_word(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string closest_option(const std::string& unknown, const po::options_description& options) {
  const std::string u = strip_dashes(unknown);
  std::string best;
  // A prefix (argparse's abbreviation, which Megatron's parser refuses) suggests the shortest flag it starts.
  for (const auto& opt : options.options()) {
    const std::string& name = opt->long_name();
    if (!u.empty() && name.rfind(u, 0) == 0 && (best.empty() || name.size() < best.size())) best = name;
  }
  if (!best.empty()) return "--" + best;
  size_t best_d = std::max<size_t>(3, u.size() / 3) + 1;
  for (const auto& opt : options.options()) {
    const std::string name = opt->long_name();
    // Megatron-DeepSpeed users also write underscores (--local_rank, --deepspeed_config).
    std::string u2 = u;
    std::replace(u2.begin(), u2.end(), '_', '-');
    const size_t d = std::min(edit_distance(u, name), edit_distance(u2, name));
    if (d < best_d) {
      best_d = d;
      best = name;
    }
  }
  return best.empty() ? "" : "--" + best;
}

namespace {

std::string repr_double(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  char b[40];
  for (int precision = 1; precision <= 17; ++precision) {  // the shortest that reads back, as Python's repr
    std::snprintf(b, sizeof b, "%.*g", precision, v);
    if (std::strtod(b, nullptr) == v) break;
  }
  std::string s = b;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

template <typename T>
std::string repr_list(const std::vector<T>& v, bool quote) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += str(i ? ", " : "", quote ? "'" : "", v[i], quote ? "'" : "");
  return s + "]";
}

}  // namespace

std::string python_repr(const boost::any& a) {
  if (const auto* v = boost::any_cast<bool>(&a)) return *v ? "True" : "False";
  if (const auto* v = boost::any_cast<int>(&a)) return std::to_string(*v);
  if (const auto* v = boost::any_cast<int64_t>(&a)) return std::to_string(*v);
  if (const auto* v = boost::any_cast<uint32_t>(&a)) return std::to_string(*v);
  if (const auto* v = boost::any_cast<double>(&a)) return repr_double(*v);
  if (const auto* v = boost::any_cast<float>(&a)) return repr_double(*v);
  if (const auto* v = boost::any_cast<std::string>(&a)) return v->empty() ? "None" : *v;
  if (const auto* v = boost::any_cast<std::vector<std::string>>(&a)) return v->empty() ? "None" : repr_list(*v, true);
  if (const auto* v = boost::any_cast<std::vector<int64_t>>(&a)) return v->empty() ? "None" : repr_list(*v, false);
  if (const auto* v = boost::any_cast<std::vector<int>>(&a)) return v->empty() ? "None" : repr_list(*v, false);
  return "?";
}

bool parse_args(const std::string& command, const std::string& summary, int argc, const char* const* argv,
                po::options_description& options, std::ostream& out, const std::string& positional,
                const po::options_description* hidden, std::vector<std::string>* arguments) {
  po::options_description all("megaton " + command + " options");
  all.add_options()("help,h", po::bool_switch(), "print this help and exit");
  all.add(options);
  po::options_description parsed;  // what the parser takes: all, and the hidden options
  parsed.add(all);
  if (hidden != nullptr) parsed.add(*hidden);
  po::positional_options_description pos;
  if (!positional.empty()) pos.add(positional.c_str(), -1);
  po::variables_map vm;
  std::vector<std::string> raw;  // argv without the program name
  for (int i = 1; i < argc; ++i) raw.push_back(argv[i]);
  const std::vector<std::string> args = argparse_normalize(raw, parsed, std::cerr);
  try {
    po::command_line_parser parser(args);
    parser.options(parsed).style(po::command_line_style::unix_style ^ po::command_line_style::allow_guessing);
    if (!positional.empty()) parser.positional(pos);
    po::store(parser.run(), vm);
    if (vm.count("help") && vm["help"].as<bool>()) {
      out << "usage: megaton " << command << " [options]\n" << summary << "\n\n" << all << std::flush;
      return false;
    }
    po::notify(vm);
    if (arguments != nullptr) {
      arguments->clear();
      for (const auto& opt : parsed.options()) {
        std::string name = opt->long_name();
        if (name == "help") continue;
        std::replace(name.begin(), name.end(), '-', '_');
        const auto it = vm.find(opt->long_name());
        // A default shown as None (a Megatron None that megaton holds as 0) is printed as Megatron prints it.
        const bool none_default =
            it != vm.end() && it->second.defaulted() && opt->format_parameter().find("(=None)") != std::string::npos;
        const std::string value = it == vm.end() || none_default ? "None" : python_repr(it->second.value());
        arguments->push_back(
            str("  ", name, " ", std::string(name.size() < 48 ? 48 - name.size() : 1, '.'), " ", value));
      }
      std::sort(arguments->begin(), arguments->end(),
                [](const std::string& a, const std::string& b) { return lowercase(a) < lowercase(b); });
    }
  } catch (const po::unknown_option& e) {
    const std::string hint = closest_option(e.get_option_name(), parsed);
    throw UsageError(str("megaton ", command, ": unrecognised option '", e.get_option_name(), "'",
                         hint.empty() ? "" : str(" (did you mean ", hint, "?)"), "; see `megaton ", command,
                         " --help`"));
  } catch (const po::error& e) {
    throw UsageError(str("megaton ", command, ": ", e.what(), "; see `megaton ", command, " --help`"));
  }
  return true;
}

}  // namespace megaton::cli
