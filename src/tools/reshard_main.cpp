// megaton reshard: not implemented yet (see the issue tracker).
#include "core/error.h"
#include "tools/subcommands.h"

namespace megaton::tools {

int run_reshard(int, const char* const*) {
  throw UsageError("megaton reshard is not implemented in this build yet");
}

}  // namespace megaton::tools
