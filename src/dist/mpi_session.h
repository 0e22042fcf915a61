// The MPI lifetime of one megaton process: MPI_Init_thread at construction, a check that MPI's world agrees with
// what the launcher said (srun with a mismatched --mpi plugin starts N singletons, which would train N copies),
// MPI_Finalize at destruction, and abort() that takes the whole job down with a documented exit code.
#pragma once
#include <string>

#include "dist/launch_env.h"

namespace megaton::dist {

class MpiSession {
 public:
  /// Initialises MPI if nobody has yet. Throws UsageError if the launcher's world and MPI's world differ.
  explicit MpiSession(const LaunchEnv& env);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const LaunchEnv& env() const { return env_; }

  /// MPI_Abort on MPI_COMM_WORLD: every rank of the job exits with `code`. Never returns.
  [[noreturn]] static void abort_job(int code);

 private:
  LaunchEnv env_;
  int rank_ = 0;
  int size_ = 1;
  bool owns_mpi_ = false;
};

/// The device this rank computes on: "cuda:<local_rank % visible GPUs>" when CUDA is usable and `want` is "auto" or
/// "cuda", else "cpu". Throws UsageError for --device cuda without a GPU, or an unknown name.
std::string select_device(const std::string& want, int local_rank);

}  // namespace megaton::dist
