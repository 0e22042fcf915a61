#include "dist/dist_options.h"

#include "core/error.h"

namespace megaton::dist {

void DistOptions::validate() const {
  MEGATON_CHECK(distributed_timeout_minutes > 0, UsageError, "--distributed-timeout-minutes must be > 0");
  MEGATON_CHECK(distributed_backend == "nccl" || distributed_backend == "mpi" || distributed_backend == "gloo" ||
                    distributed_backend == "auto",
                UsageError, "--distributed-backend: expected nccl|mpi|auto, got '", distributed_backend, "'");
  MEGATON_CHECK(device == "auto" || device == "cuda" || device == "cpu", UsageError,
                "--device: expected auto|cuda|cpu, got '", device, "'");
}

}  // namespace megaton::dist
