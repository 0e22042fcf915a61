#include "dist/guarded_run.h"

#include <mpi.h>

#include <iostream>

#include "core/error.h"
#include "dist/mpi_session.h"

namespace megaton::dist {
namespace {

[[noreturn]] void die(const char* kind, const char* what, int code) {
  int initialized = 0, finalized = 0, rank = 0, world = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
  }
  std::cerr << "[r" << rank << "/" << world << "] megaton: " << kind << ": " << what << std::endl;
  if (world > 1)
    std::cerr << "[r" << rank << "/" << world << "] megaton: aborting all " << world << " ranks with exit code " << code
              << std::endl;
  MpiSession::abort_job(code);
}

}  // namespace

int guarded_run(const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    die(e.kind(), e.what(), static_cast<int>(e.code()));
  } catch (const c10::Error& e) {
    die("torch error", e.what_without_backtrace(), static_cast<int>(ExitCode::kRuntime));
  } catch (const std::bad_alloc&) {
    die("runtime error", "out of memory", static_cast<int>(ExitCode::kRuntime));
  } catch (const std::exception& e) {
    die("internal error", e.what(), static_cast<int>(ExitCode::kInternal));
  }
}

}  // namespace megaton::dist
