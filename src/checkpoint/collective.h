// The few MPI collectives checkpointing needs beyond tensor communicators: gathering variable-length strings
// (tensor catalogs), XOR-reducing checksum partials, and agreeing on failure so that every rank throws the same
// error instead of some ranks waiting forever in the next collective. All over MPI_COMM_WORLD.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace megaton::checkpoint {

int world_rank();
int world_size();

/// Every rank's string, indexed by world rank.
std::vector<std::string> allgather_strings(const std::string& mine);
/// Rank 0's string on every rank.
std::string broadcast_string(const std::string& mine);
/// Element-wise XOR over ranks, in place.
void allreduce_xor(std::vector<uint32_t>& v);
/// Element-wise sum over ranks, in place.
void allreduce_sum(std::vector<int64_t>& v);
/// A barrier that sleeps while it waits (MPI_Ibarrier polled every 0.5 ms): ranks waiting for another rank's
/// file-system work leave the CPU to it, which matters when ranks outnumber cores.
void sleepy_barrier();
/// Runs `fn` on this rank (if `participate`), then agrees: if it threw megaton::Error on any rank, every rank throws
/// a CheckpointError with the first failing rank's message ("rank R: ..."). Non-megaton exceptions propagate.
void run_agreed(const std::function<void()>& fn, bool participate = true);
/// As run_agreed, for a step every rank takes together (a collective HDF5 call): no barrier first, one integer
/// all-reduce when every rank succeeded, and any exception (not only megaton's: a failed allocation, a torch error)
/// counts as a failure. Used between the collective writes so that a rank whose write failed (a full disk) never
/// leaves its peers waiting inside the next HDF5 collective.
void agreed_step(const std::function<void()>& fn);

}  // namespace megaton::checkpoint
