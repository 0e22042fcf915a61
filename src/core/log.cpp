#include "core/log.h"

#include <chrono>
#include <ctime>
#include <iomanip>
#include <sstream>

namespace megaton {

LogLevel parse_log_level(const std::string& name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warning" || name == "warn") return LogLevel::kWarning;
  if (name == "error" || name == "critical") return LogLevel::kError;
  if (name == "quiet" || name == "passive") return LogLevel::kQuiet;
  throw UsageError(str("--log-level: expected one of debug|info|warning|error|critical|passive, got '", name, "'"));
}

Logger::Logger(int rank, int world, LogLevel level, std::ostream* out)
    : rank_(rank), world_(world), level_(level), out_(out), tag_(str("[r", rank, "/", world, "]")) {}

void Logger::set_coords(int tp, int pp, int dp) {
  tag_ = str("[r", rank_, "/", world_, " tp", tp, " pp", pp, " dp", dp, "]");
}

void Logger::write(LogLevel level, const std::string& line) const {
  if (level < level_ || level_ == LogLevel::kQuiet) return;
  static const char* const kNames[] = {"debug", "info", "WARNING", "ERROR"};
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::ostringstream os;
  os << std::put_time(&tm, "%Y-%m-%dT%H:%M:%S") << ' ' << tag_ << ' ';  // ISO 8601, local time: jobs run for days
  if (level != LogLevel::kInfo) os << kNames[static_cast<int>(level)] << ": ";
  os << line << '\n';
  std::lock_guard<std::mutex> lock(mu_);
  (*out_) << os.str() << std::flush;
}

}  // namespace megaton
