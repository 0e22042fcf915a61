#include "dist/process_groups.h"

#include <mpi.h>

#include "core/error.h"
#include "dist/mpi_communicator.h"
#include "dist/staged_communicator.h"
#if defined(MEGATON_HAVE_NCCL)
#include "dist/nccl_communicator.h"
#endif

namespace megaton::dist {

Backend parse_backend(const std::string& name, bool device_is_cuda) {
  if (name == "mpi" || name == "gloo") return Backend::kMpi;
  if (name == "nccl" || name == "auto") {
#if defined(MEGATON_HAVE_NCCL)
    if (device_is_cuda) return Backend::kNccl;
#endif
    MEGATON_CHECK(name == "auto" || !device_is_cuda, UsageError,
                  "--distributed-backend nccl: this build has no NCCL (configure with -DMEGATON_CUDA=ON)");
    return Backend::kMpi;
  }
  throw UsageError(str("--distributed-backend: expected nccl|mpi|auto, got '", name, "'"));
}

namespace {

CommunicatorPtr make_group(const std::vector<int>& members, int world_rank, const std::string& name, Backend backend,
                           double timeout_s) {
  // Color: the group's smallest member identifies it uniquely; key: position within the group.
  int color = members.front();
  int key = 0;
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i] == world_rank) key = static_cast<int>(i);
  MPI_Comm comm = MPI_COMM_NULL;
  const int rc = MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm);
  MEGATON_CHECK(rc == MPI_SUCCESS, CommError, "MPI_Comm_split for group '", name, "' failed with code ", rc);
  auto mpi = std::make_shared<MpiCommunicator>(comm, name, members, timeout_s);
#if defined(MEGATON_HAVE_NCCL)
  if (backend == Backend::kNccl) return std::make_shared<NcclCommunicator>(mpi, timeout_s);
#endif
  // MPI groups take CUDA tensors too (several ranks on one GPU, or no NCCL): staged through host memory.
  return std::make_shared<StagedCommunicator>(mpi);
}

}  // namespace

ProcessGroups build_process_groups(const RankGrid& grid, Backend backend, double timeout_s) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MEGATON_CHECK(world == grid.world(), InternalError, "grid is for ", grid.world(), " ranks but MPI world is ", world);
  ProcessGroups g{grid};
  g.rank = rank;
  g.coords = grid.coords(rank);
  std::vector<int> all(world);
  for (int i = 0; i < world; ++i) all[i] = i;
  // Every rank calls every split in the same order (MPI_Comm_split is collective over the world).
  g.world = make_group(all, rank, "world", backend, timeout_s);
  g.tp = make_group(grid.tp_group(rank), rank, "tp", backend, timeout_s);
  g.dp = make_group(grid.dp_group(rank), rank, "dp", backend, timeout_s);
  g.pp = make_group(grid.pp_group(rank), rank, "pp", backend, timeout_s);
  g.mp = make_group(grid.mp_group(rank), rank, "mp", backend, timeout_s);
  // Ranks in middle stages are not in any embedding group; give them a group of their own.
  const auto emb = grid.embedding_group(rank);
  bool in_emb = false;
  for (int r : emb) in_emb |= (r == rank);
  g.embedding = make_group(in_emb ? emb : std::vector<int>{rank}, rank, "embedding", backend, timeout_s);
  g.host = make_group(all, rank, "host", Backend::kMpi, timeout_s);
  return g;
}

}  // namespace megaton::dist
