#include "dist/launch_env.h"

#include <cstdlib>
#include <memory>

#include "core/error.h"

namespace megaton::dist {
namespace {

bool read_int(const EnvLookup& env, const char* name, int& out) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return false;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  MEGATON_CHECK(end != v && *end == '\0' && x >= 0, UsageError, "environment variable ", name,
                " must be a non-negative integer, got '", v, "'");
  out = static_cast<int>(x);
  return true;
}

}  // namespace

LaunchEnv detect_launch_env(const EnvLookup& env) {
  LaunchEnv e;
  int v = 0;
  if (read_int(env, "SLURM_PROCID", e.rank) && read_int(env, "SLURM_NTASKS", e.size)) {
    // SLURM_PROCID is set for srun steps; sbatch's batch script alone has SLURM_NTASKS but no step PROCID.
    e.launcher = "slurm";
    read_int(env, "SLURM_LOCALID", e.local_rank);
    read_int(env, "SLURM_NODEID", e.node_id);
    if (read_int(env, "SLURM_NTASKS_PER_NODE", v))
      e.local_size = v;
    else if (const char* s = env("SLURM_TASKS_PER_NODE"))
      e.local_size = std::atoi(s) > 0 ? std::atoi(s) : 1;
    if (const char* j = env("SLURM_JOB_ID")) e.job_id = j;
  } else if (read_int(env, "OMPI_COMM_WORLD_RANK", e.rank) && read_int(env, "OMPI_COMM_WORLD_SIZE", e.size)) {
    e.launcher = "openmpi";
    read_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", e.local_rank);
    read_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", e.local_size);
    read_int(env, "OMPI_COMM_WORLD_NODE_RANK", e.node_id);
  } else if ((read_int(env, "PMI_RANK", e.rank) && read_int(env, "PMI_SIZE", e.size)) ||
             (read_int(env, "PMIX_RANK", e.rank) && read_int(env, "PMI_SIZE", e.size))) {
    e.launcher = "pmi";
    if (!read_int(env, "MPI_LOCALRANKID", e.local_rank)) read_int(env, "PMI_LOCAL_RANK", e.local_rank);
    if (!read_int(env, "MPI_LOCALNRANKS", e.local_size)) read_int(env, "PMI_LOCAL_SIZE", e.local_size);
  } else {
    e = LaunchEnv{};
  }
  MEGATON_CHECK(e.size >= 1, UsageError, e.launcher, " launcher reports a world size of ", e.size);
  MEGATON_CHECK(e.rank < e.size, UsageError, e.launcher, " launcher reports rank ", e.rank, " >= world size ", e.size);
  MEGATON_CHECK(e.local_rank < std::max(e.local_size, 1) || e.local_size <= 1, UsageError, e.launcher,
                " launcher reports local rank ", e.local_rank, " >= local size ", e.local_size);
  return e;
}

LaunchEnv detect_launch_env() {
  return detect_launch_env([](const char* n) { return static_cast<const char*>(std::getenv(n)); });
}

EnvLookup env_from_map(const std::map<std::string, std::string>& vars) {
  auto copy = std::make_shared<std::map<std::string, std::string>>(vars);
  return [copy](const char* n) -> const char* {
    auto it = copy->find(n);
    return it == copy->end() ? nullptr : it->second.c_str();
  };
}

}  // namespace megaton::dist
