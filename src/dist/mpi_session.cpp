#include "dist/mpi_session.h"

#include <mpi.h>

#include <cstdlib>
#include <exception>

#include "core/error.h"
#include "core/torch_compat.h"

namespace megaton::dist {

MpiSession::MpiSession(const LaunchEnv& env) : env_(env) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    owns_mpi_ = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (env.launcher != "singleton" && env.size != size_) {
    throw UsageError(str("the launcher (", env.launcher, ") started ", env.size, " tasks but MPI sees a world of ",
                         size_, ". Under srun, the --mpi plugin must match this MPI (try `srun --mpi=pmix`)."));
  }
  if (env.launcher != "singleton" && env.rank != rank_) {
    throw UsageError(str("the launcher (", env.launcher, ") gave this task rank ", env.rank, " but MPI gave rank ",
                         rank_, "; the launcher and the MPI library disagree"));
  }
}

MpiSession::~MpiSession() {
  // While an exception unwinds, main's error handler ends the job (dist/job_error.h: MPI_Finalize once every rank
  // has failed, else MPI_Abort): MPI_Finalize here would block waiting for peers blocked in a collective.
  if (std::uncaught_exceptions() > 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_mpi_ && !finalized) MPI_Finalize();
}

void MpiSession::abort_job(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

std::string select_device(const std::string& want, int local_rank) {
  if (want == "cpu") return "cpu";
  MEGATON_CHECK(want == "auto" || want == "cuda", UsageError, "--device: expected auto|cuda|cpu, got '", want, "'");
  if (compat::cuda_available()) {
    const int n = static_cast<int>(torch::cuda::device_count());
    return str("cuda:", local_rank % n);
  }
  MEGATON_CHECK(want == "auto", UsageError, "--device cuda: this LibTorch (", compat::torch_version(),
                ") sees no CUDA device");
  return "cpu";
}

}  // namespace megaton::dist
