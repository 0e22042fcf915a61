// Where this process sits in the job, as the launcher told it through environment variables: SLURM (srun),
// OpenMPI (mpirun), PMI/PMIx (Intel MPI, MPICH, srun --mpi=pmi2), or none (a singleton run).
#pragma once
#include <functional>
#include <map>
#include <string>

namespace megaton::dist {

struct LaunchEnv {
  std::string launcher = "singleton";  // "slurm" | "openmpi" | "pmi" | "singleton"
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int node_id = 0;
  std::string job_id;  // SLURM_JOB_ID when present
};

using EnvLookup = std::function<const char*(const char*)>;

/// Reads the launcher's variables through `getenv` (tests pass a fake). SLURM wins over OpenMPI over PMI.
/// Throws UsageError when a variable is present but not a number, or rank >= size.
LaunchEnv detect_launch_env(const EnvLookup& getenv_fn);

/// detect_launch_env over the process environment.
LaunchEnv detect_launch_env();

/// Builds an EnvLookup over a fixed map (for tests and --dry-run).
EnvLookup env_from_map(const std::map<std::string, std::string>& vars);

}  // namespace megaton::dist
