#include "data/weighted_split_paths.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/parse.h"
#include "data/split.h"

namespace megaton::data {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

double number(const std::string& text, const std::string& what, const std::string& flag, const std::string& group) {
  const auto v = parse_double(text);
  MEGATON_CHECK(v && std::isfinite(*v), UsageError, flag, " '", group, "': ", what, " '", text, "' is not a number");
  return *v;
}

}  // namespace

WeightedSplitGroup parse_weighted_split_group(const std::string& group, const std::string& flag) {
  const auto colon = group.find(':');
  const std::string expected = "; expected \"NAME: W1 START1:END1 PREFIX1, W2 START2:END2 PREFIX2, ...\"";
  MEGATON_CHECK(colon != std::string::npos, UsageError, flag, " '", group, "': no 'NAME:'", expected);
  WeightedSplitGroup g;
  g.name = trim(group.substr(0, colon));
  MEGATON_CHECK(!g.name.empty() && g.name.find_first_of(" \t") == std::string::npos, UsageError, flag, " '", group,
                "': the NAME before ':' must be one non-empty word", expected);
  std::stringstream parts(group.substr(colon + 1));
  std::string part;
  double sum = 0;
  while (std::getline(parts, part, ',')) {
    std::istringstream words(part);
    std::string w, range, prefix, extra;
    words >> w >> range >> prefix;
    MEGATON_CHECK(!prefix.empty() && !(words >> extra), UsageError, flag, " '", group, "': '", trim(part),
                  "' should be three words 'WEIGHT START:END PREFIX'", expected);
    const auto c = range.find(':');
    MEGATON_CHECK(c != std::string::npos, UsageError, flag, " '", group, "': range '", range,
                  "' should be START:END (fractions of the documents, e.g. 0:0.95)");
    WeightedSplitPart p;
    p.weight = number(w, "weight", flag, group);
    p.start = number(range.substr(0, c), "START", flag, group);
    p.end = number(range.substr(c + 1), "END", flag, group);
    p.prefix = prefix;
    MEGATON_CHECK(p.weight >= 0, UsageError, flag, " '", group, "': weight ", w, " is negative");
    MEGATON_CHECK(0 <= p.start && p.start < p.end && p.end <= 1, UsageError, flag, " '", group, "': range ", range,
                  " must satisfy 0 <= START < END <= 1");
    sum += p.weight;
    g.parts.push_back(p);
  }
  MEGATON_CHECK(!g.parts.empty(), UsageError, flag, " '", group, "': no datasets after the NAME", expected);
  MEGATON_CHECK(sum > 0, UsageError, flag, " '", group, "': the weights sum to 0");
  for (auto& p : g.parts) p.weight /= sum;
  return g;
}

std::vector<std::string> read_weighted_split_paths_file(const std::string& path, const std::string& flag) {
  std::ifstream in(path);
  MEGATON_CHECK(in.good(), UsageError, flag, ": cannot read '", path, "'");
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  std::vector<std::string> groups;
  if (text.find('"') != std::string::npos) {
    size_t pos = 0;
    while ((pos = text.find('"', pos)) != std::string::npos) {
      const auto close = text.find('"', pos + 1);
      MEGATON_CHECK(close != std::string::npos, UsageError, flag, ": '", path, "' has an unterminated double quote");
      groups.push_back(text.substr(pos + 1, close - pos - 1));
      pos = close + 1;
    }
  } else {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line))
      if (!trim(line).empty()) groups.push_back(trim(line));
  }
  MEGATON_CHECK(!groups.empty(), UsageError, flag, ": '", path,
                "' holds no group (expected \"NAME: W S:E PREFIX, ...\")");
  return groups;
}

std::pair<int64_t, int64_t> split_by_range(double start, double end, int64_t n) {
  return {round_half_even(start * double(n)), round_half_even(end * double(n))};
}

}  // namespace megaton::data
