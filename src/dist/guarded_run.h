// The one place errors are caught: runs a subcommand body, and on any exception ends the job through
// end_job_with_error (dist/job_error.h): printed once, every rank exits with the error's code, none left waiting.
#pragma once
#include <functional>

namespace megaton::dist {

/// Returns body()'s exit code, or never returns if body throws.
int guarded_run(const std::function<int()>& body);

}  // namespace megaton::dist
