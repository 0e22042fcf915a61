#include "checkpoint/collective.h"

#include <mpi.h>

#include <chrono>
#include <thread>

#include "core/error.h"

namespace megaton::checkpoint {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::vector<std::string> allgather_strings(const std::string& mine) {
  const int n = world_size();
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(n), displs(n);
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    displs[i] = static_cast<int>(total);
    total += lens[i];
  }
  MEGATON_CHECK(total < (int64_t{1} << 31), CheckpointError, "checkpoint: gathered catalog too large (", total,
                " bytes)");
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> out(n);
  for (int i = 0; i < n; ++i) out[i] = all.substr(displs[i], lens[i]);
  return out;
}

std::string broadcast_string(const std::string& mine) {
  int len = static_cast<int>(mine.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string out = world_rank() == 0 ? mine : std::string(len, '\0');
  MPI_Bcast(out.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  return out;
}

void allreduce_xor(std::vector<uint32_t>& v) {
  if (v.empty()) return;
  MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_UINT32_T, MPI_BXOR, MPI_COMM_WORLD);
}

void allreduce_sum(std::vector<int64_t>& v) {
  if (v.empty()) return;
  MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
}

void sleepy_barrier() {
  MPI_Request req;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  int done = 0;
  MPI_Test(&req, &done, MPI_STATUS_IGNORE);
  while (!done) {
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
  }
}

void run_agreed(const std::function<void()>& fn, bool participate) {
  std::string err;
  if (participate) {
    try {
      fn();
    } catch (const Error& e) {
      err = e.what();
      if (err.empty()) err = "unknown error";
    }
  }
  sleepy_barrier();  // ranks waiting for rank 0's file-system work yield the CPU instead of spinning in MPI
  const auto all = allgather_strings(err);
  for (size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty()) throw CheckpointError(all.size() > 1 ? str("rank ", r, ": ", all[r]) : all[r]);
}

void agreed_step(const std::function<void()>& fn) {
  std::string err;
  try {
    fn();
  } catch (const std::exception& e) {
    err = e.what();
    if (err.empty()) err = "unknown error";
  }
  int failed = err.empty() ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!failed) return;
  const auto all = allgather_strings(err);
  for (size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty()) throw CheckpointError(all.size() > 1 ? str("rank ", r, ": ", all[r]) : all[r]);
}

}  // namespace megaton::checkpoint
