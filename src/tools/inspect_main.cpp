// megaton inspect: not implemented yet (see the issue tracker).
#include "core/error.h"
#include "tools/subcommands.h"

namespace megaton::tools {

int run_inspect(int, const char* const*) {
  throw UsageError("megaton inspect is not implemented in this build yet");
}

}  // namespace megaton::tools
