// megaton generate: not implemented yet (see the issue tracker).
#include "core/error.h"
#include "tools/subcommands.h"

namespace megaton::tools {

int run_generate(int, const char* const*) {
  throw UsageError("megaton generate is not implemented in this build yet");
}

}  // namespace megaton::tools
