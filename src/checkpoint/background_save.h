// A checkpoint written on a thread of its own while training goes on (--async-save). The caller hands it a write that
// owns everything it reads (a host snapshot of the state: train/checkpointing.cpp); the write runs the collective save
// of checkpoint.h on MPI_COMM_WORLD, which training never uses (its process groups are communicators of their own),
// so the two threads' MPI calls never share a communicator (MPI_THREAD_MULTIPLE). HDF5 is called from the writing
// thread only: the training loop touches no HDF5 while a save is in flight (a load or another save waits for it).
//
//   BackgroundSave bg;
//   bg.start(iteration, [=] { return save_checkpoint(...snapshot...); });
//   ... every iteration:  if (auto dir = bg.poll()) log("written: ", *dir);   // collective; rethrows a failed write
//   bg.wait();            // before the next save, a load, the end of training
#pragma once
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>

namespace megaton::checkpoint {

class BackgroundSave {
 public:
  /// Collective over MPI_COMM_WORLD (duplicates it for the polls). UsageError when MPI was not initialised with
  /// MPI_THREAD_MULTIPLE.
  BackgroundSave();
  /// Joins a write in flight, also while an exception unwinds (the write completes; see the .cpp).
  ~BackgroundSave();
  BackgroundSave(const BackgroundSave&) = delete;
  BackgroundSave& operator=(const BackgroundSave&) = delete;

  /// Runs `write` (returning the published directory) on the writing thread. InternalError while one is in flight.
  void start(int64_t iteration, std::function<std::string()> write);
  bool in_flight() const { return thread_.joinable(); }
  int64_t iteration() const { return iteration_; }
  /// Collective, cheap (one int all-reduced): when every rank's write has finished, joins it and returns the
  /// published directory, or rethrows the write's error (the save's collective checks give every rank the same one).
  /// nullopt while any rank is still writing, or when nothing is in flight.
  std::optional<std::string> poll();
  /// Collective: waits for the write in flight (nothing in flight: returns ""); rethrows its error.
  std::string wait();

 private:
  std::string finish();  // joins; the result or the error

  MPI_Comm comm_ = MPI_COMM_NULL;  // the polls' own communicator
  std::thread thread_;
  std::atomic<bool> done_{false};
  std::string result_;
  std::exception_ptr error_;
  int64_t iteration_ = -1;
};

}  // namespace megaton::checkpoint
