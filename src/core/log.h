// Rank-prefixed logging. A Logger carries its rank's tag ("[r3/8 tp1 pp0 dp1]") and is passed to whoever logs;
// there is no global logger. info0/warn0 print on global rank 0 only (the "print_rank_0" of Megatron).
// Why not spdlog: its loggers live in a process-wide registry, where megaton passes its Logger explicitly (no
// process-wide mutable state); what a line needs (an ISO timestamp, the rank tag, a level, operator<< of any value) is
// the short class below. Numbers are formatted by core/format.h and core/timer.h's Progress.
#pragma once
#include <iostream>
#include <mutex>
#include <string>

#include "core/error.h"

namespace megaton {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kQuiet = 4 };

/// Parses "debug|info|warning|error|quiet" (Megatron's --log-level names; "passive" and "critical" map to quiet/error).
LogLevel parse_log_level(const std::string& name);

class Logger {
 public:
  /// A logger for a process that knows only its world rank (before the rank grid exists).
  Logger(int rank = 0, int world = 1, LogLevel level = LogLevel::kInfo, std::ostream* out = &std::cerr);

  /// Sets the grid coordinates shown in the tag: "[r3/8 tp1 pp0 dp1]".
  void set_coords(int tp, int pp, int dp);
  void set_level(LogLevel level) { level_ = level; }
  LogLevel level() const { return level_; }
  int rank() const { return rank_; }
  int world() const { return world_; }
  bool is_rank0() const { return rank_ == 0; }
  const std::string& tag() const { return tag_; }

  template <typename... A>
  void debug(const A&... a) const {
    write(LogLevel::kDebug, str(a...));
  }
  template <typename... A>
  void info(const A&... a) const {
    write(LogLevel::kInfo, str(a...));
  }
  template <typename... A>
  void warn(const A&... a) const {
    write(LogLevel::kWarning, str(a...));
  }
  template <typename... A>
  void error(const A&... a) const {
    write(LogLevel::kError, str(a...));
  }
  template <typename... A>
  void info0(const A&... a) const {
    if (is_rank0()) info(a...);
  }
  template <typename... A>
  void warn0(const A&... a) const {
    if (is_rank0()) warn(a...);
  }

  /// Writes one whole line with the tag, never interleaved with another thread's line.
  void write(LogLevel level, const std::string& line) const;

 private:
  int rank_;
  int world_;
  LogLevel level_;
  std::ostream* out_;
  std::string tag_;
  mutable std::mutex mu_;
};

}  // namespace megaton
