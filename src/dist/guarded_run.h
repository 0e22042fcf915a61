// The one place errors are caught: runs a subcommand body, and on any exception prints it with the rank's tag and
// takes the whole job down (MPI_Abort with the error's exit code), so no peer rank is left waiting in a collective.
#pragma once
#include <functional>

namespace megaton::dist {

/// Returns body()'s exit code, or never returns if body throws.
int guarded_run(const std::function<int()>& body);

}  // namespace megaton::dist
