// Parses one subcommand's argv with Boost.Program_options: `--help` prints the options and returns false;
// an unknown flag is a UsageError naming it and the closest known flag ("did you mean --num-layers?").
#pragma once
#include <boost/program_options.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace megaton::cli {

/// Returns false when --help was asked (the help text is printed to `out`); throws UsageError on bad flags.
/// `positional` names an option that takes bare arguments (e.g. "checkpoint" for `megaton inspect DIR`), or "".
/// `hidden`: options parsed like the others but left out of --help (e.g. flags accepted for compatibility).
/// `arguments`, when given, receives every option's resolved value as Megatron prints its arguments: one
/// "name ..... value" line each (dashes as underscores, Python's repr; None for an option not given whose --help
/// default reads None), sorted case-insensitively.
bool parse_args(const std::string& command, const std::string& summary, int argc, const char* const* argv,
                boost::program_options::options_description& options, std::ostream& out,
                const std::string& positional = "", const boost::program_options::options_description* hidden = nullptr,
                std::vector<std::string>* arguments = nullptr);

/// A parsed value as Python prints it ("0.9", "None", "True", "['a', 'b']"); "?" for a type it does not know.
std::string python_repr(const boost::any& value);

/// "220_000_000" -> "220000000" (Python's numeric literal underscores, which Megatron's scripts use); any token
/// that is not entirely such a number is returned unchanged.
std::string strip_digit_separators(const std::string& token);

/// Python argparse's reading of a command line, as Megatron's parsers have it, rewritten for Boost's parser: a flag
/// given twice keeps its last value; `--flag value` and `--flag=value` alike; a value may be a negative number;
/// digit separators stripped from numbers; Megatron's `type=bool` flags (python_bool_flags) take an optional value
/// read as Python's bool(str) (`--eval-only True`; any non-empty value is true, with a warning to `warnings` when it
/// spells false). Prefixes of flags are not expanded: Megatron-DeepSpeed's parser sets allow_abbrev=False.
std::vector<std::string> argparse_normalize(const std::vector<std::string>& args,
                                            const boost::program_options::options_description& options,
                                            std::ostream& warnings);

/// Megatron's options declared `type=bool` (long names without dashes).
const std::vector<std::string>& python_bool_flags();

/// The candidate closest to `word` by edit distance, or "" when none is close (a third of its length, at least 2).
std::string closest_word(const std::string& word, const std::vector<std::string>& candidates);
/// The known long option closest to `unknown` by edit distance, or "" when nothing is close.
std::string closest_option(const std::string& unknown, const boost::program_options::options_description& options);

}  // namespace megaton::cli
