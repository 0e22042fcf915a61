// How the job's ranks talk and where they compute: --distributed-backend, --distributed-timeout-minutes, --device.
#pragma once
#include <string>

namespace megaton::dist {

struct DistOptions {
  std::string distributed_backend = "auto";  // nccl | mpi | gloo (= mpi) | auto
  double distributed_timeout_minutes = 10.0;
  std::string device = "auto";  // auto | cuda | cpu

  /// UsageError for a timeout <= 0 or an unknown backend or device name.
  void validate() const;
};

}  // namespace megaton::dist
