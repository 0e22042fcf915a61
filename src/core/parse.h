// Whole-string number parsing for flag values and text files: "0.95" is a number, "0.95x", "" and "x" are not.
//   if (auto w = parse_double(text)) use(*w); else throw UsageError(...naming the flag...);
#pragma once
#include <optional>
#include <string>

namespace megaton {

/// The double `text` spells from its first to its last character (std::stod syntax, so leading whitespace, inf and
/// nan are accepted; callers check finiteness), or nullopt.
std::optional<double> parse_double(const std::string& text);

}  // namespace megaton
