#include "dist/guarded_run.h"

#include <mpi.h>

#include <cstdlib>
#include <iostream>

#include "core/error.h"
#include "dist/launch_env.h"
#include "dist/mpi_session.h"

namespace megaton::dist {
namespace {

[[noreturn]] void die(const char* kind, const char* what, int code, bool same_on_every_rank) {
  int initialized = 0, finalized = 0, rank = 0, world = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
  } else {
    // Before MPI starts (flag parsing): the launcher's place in the job. A usage error is every rank's alike, so
    // only the first rank prints it and ends the job with its code. The others exit quietly with status 0: a launcher
    // (mpirun) ends every process as soon as one exits non-zero, which could stop rank 0 before it has printed.
    const LaunchEnv env = detect_launch_env();
    rank = env.rank;
    world = env.size;
    if (same_on_every_rank && rank != 0) std::_Exit(0);
  }
  std::cerr << "[r" << rank << "/" << world << "] megaton: " << kind << ": " << what << std::endl;
  if (world > 1 && initialized && !finalized)
    std::cerr << "[r" << rank << "/" << world << "] megaton: aborting all " << world << " ranks with exit code " << code
              << std::endl;
  MpiSession::abort_job(code);
}

}  // namespace

int guarded_run(const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    die(e.kind(), e.what(), static_cast<int>(e.code()), e.code() == ExitCode::kUsage);
  } catch (const c10::Error& e) {
    die("torch error", e.what_without_backtrace(), static_cast<int>(ExitCode::kRuntime), false);
  } catch (const std::bad_alloc&) {
    die("runtime error", "out of memory", static_cast<int>(ExitCode::kRuntime), false);
  } catch (const std::exception& e) {
    die("internal error", e.what(), static_cast<int>(ExitCode::kInternal), false);
  }
}

}  // namespace megaton::dist
