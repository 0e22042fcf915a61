#include "core/error.h"

namespace megaton {

const char* Error::kind() const {
  switch (code_) {
    case ExitCode::kOk:
      return "ok";
    case ExitCode::kInternal:
      return "internal error";
    case ExitCode::kUsage:
      return "usage error";
    case ExitCode::kData:
      return "data error";
    case ExitCode::kCheckpoint:
      return "checkpoint error";
    case ExitCode::kComm:
      return "communication error";
    case ExitCode::kRuntime:
      return "runtime error";
  }
  return "error";
}

}  // namespace megaton
