// Typed errors. Every failure the user can cause or meet is one of these, thrown where it is found and caught once,
// in main, which prints it with the rank's tag and aborts the whole job with the error's exit code (docs/errors.md).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace megaton {

/// Process exit codes: the job's exit status tells the operator which kind of failure ended it.
enum class ExitCode : int {
  kOk = 0,
  kInternal = 1,    // a bug: an invariant did not hold
  kUsage = 2,       // bad flags or inconsistent configuration, found before any allocation
  kData = 3,        // unreadable or malformed input data (corpus, tokenizer files, .bin/.idx)
  kCheckpoint = 4,  // unreadable, corrupt or mismatched checkpoint
  kComm = 5,        // a collective failed or timed out, or a peer rank died
  kRuntime = 6,     // anything else at run time (out of memory, I/O)
};

/// Base of all megaton errors.
class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ExitCode code() const { return code_; }
  const char* kind() const;

 private:
  ExitCode code_;
};

struct UsageError : Error {
  explicit UsageError(const std::string& w) : Error(ExitCode::kUsage, w) {}
};
struct DataError : Error {
  explicit DataError(const std::string& w) : Error(ExitCode::kData, w) {}
};
struct CheckpointError : Error {
  explicit CheckpointError(const std::string& w) : Error(ExitCode::kCheckpoint, w) {}
};
struct CommError : Error {
  explicit CommError(const std::string& w) : Error(ExitCode::kComm, w) {}
};
struct RuntimeError : Error {
  explicit RuntimeError(const std::string& w) : Error(ExitCode::kRuntime, w) {}
};
struct InternalError : Error {
  explicit InternalError(const std::string& w) : Error(ExitCode::kInternal, w) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  append(os, rest...);
}
}  // namespace detail

/// Concatenates its arguments with operator<< into a string: str("expected ", n, " got ", m).
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  detail::append(os, args...);
  return os.str();
}

}  // namespace megaton

/// User-facing check: MEGATON_CHECK(cond, UsageError, "--x (", x, ") must be > 0"). The message is built only on
/// failure.
#define MEGATON_CHECK(cond, ErrorType, ...)                    \
  do {                                                         \
    if (!(cond)) throw ErrorType(::megaton::str(__VA_ARGS__)); \
  } while (0)

/// Invariant check, always on (also in Release): a failure is a bug in megaton.
#define MEGATON_ASSERT(cond, ...)                                                                            \
  do {                                                                                                       \
    if (!(cond))                                                                                             \
      throw ::megaton::InternalError(::megaton::str(__FILE__, ":", __LINE__, ": assertion '", #cond,         \
                                                    "' failed: ", ##__VA_ARGS__, " (please report a bug)")); \
  } while (0)
