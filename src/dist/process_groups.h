// Every communicator a rank needs, built once from the rank grid and passed explicitly to whoever communicates
// (Megatron-Core's ProcessGroupCollection, without parallel_state's globals).
#pragma once
#include <string>

#include "dist/communicator.h"
#include "dist/grid.h"

namespace megaton::dist {

enum class Backend { kMpi, kNccl };

/// "mpi" | "nccl" | "auto" (nccl when the device is CUDA and NCCL was built in, else mpi).
Backend parse_backend(const std::string& name, bool device_is_cuda);

struct ProcessGroups {
  RankGrid grid;
  int rank = 0;  // global rank
  Coords coords;
  CommunicatorPtr world;
  CommunicatorPtr tp;
  CommunicatorPtr dp;
  CommunicatorPtr pp;
  CommunicatorPtr mp;         // tp x pp: one model replica
  CommunicatorPtr embedding;  // first + last pipeline stage (tied embeddings)
  CommunicatorPtr host;       // MPI over the world for host values (the stop agreement): never waits for the device

  bool is_first_stage() const { return coords.pp == 0; }
  bool is_last_stage() const { return coords.pp == grid.pp_size() - 1; }
};

/// Collective over MPI_COMM_WORLD: every rank must call it with the same grid. timeout_s bounds every later op.
ProcessGroups build_process_groups(const RankGrid& grid, Backend backend, double timeout_s);

}  // namespace megaton::dist
