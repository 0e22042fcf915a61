// megaton preprocess: not implemented yet (see the issue tracker).
#include "core/error.h"
#include "tools/subcommands.h"

namespace megaton::tools {

int run_preprocess(int, const char* const*) {
  throw UsageError("megaton preprocess is not implemented in this build yet");
}

}  // namespace megaton::tools
