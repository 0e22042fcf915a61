#include "cli/parser.h"

#include <algorithm>
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

}  // namespace

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

std::string closest_option(const std::string& unknown, const po::options_description& options) {
  const std::string u = strip_dashes(unknown);
  std::string best;
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

bool parse_args(const std::string& command, const std::string& summary, int argc, const char* const* argv,
                po::options_description& options, std::ostream& out, const std::string& positional,
                const po::options_description* hidden) {
  po::options_description all("megaton " + command + " options");
  all.add_options()("help,h", po::bool_switch(), "print this help and exit");
  all.add(options);
  po::options_description parsed;  // what the parser takes: all, and the hidden options
  parsed.add(all);
  if (hidden != nullptr) parsed.add(*hidden);
  po::positional_options_description pos;
  if (!positional.empty()) pos.add(positional.c_str(), -1);
  po::variables_map vm;
  std::vector<std::string> args;  // argv without the program name, "1_000" -> "1000"
  for (int i = 1; i < argc; ++i) args.push_back(strip_digit_separators(argv[i]));
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
