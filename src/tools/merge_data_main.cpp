// megaton merge-data: not implemented yet (see the issue tracker).
#include "core/error.h"
#include "tools/subcommands.h"

namespace megaton::tools {

int run_merge_data(int, const char* const*) {
  throw UsageError("megaton merge-data is not implemented in this build yet");
}

}  // namespace megaton::tools
