// megaton import-hf: not implemented yet (see the issue tracker).
#include "core/error.h"
#include "tools/subcommands.h"

namespace megaton::tools {

int run_import_hf(int, const char* const*) {
  throw UsageError("megaton import-hf is not implemented in this build yet");
}

}  // namespace megaton::tools
