#include "checkpoint/background_save.h"

#include "core/error.h"

namespace megaton::checkpoint {

BackgroundSave::BackgroundSave() {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  MEGATON_CHECK(level == MPI_THREAD_MULTIPLE, UsageError,
                "--async-save writes checkpoints on a thread of their own, which needs an MPI library initialised "
                "with MPI_THREAD_MULTIPLE; this one provides level ",
                level, ": leave --async-save out");
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
}

BackgroundSave::~BackgroundSave() {
  // Also while an exception unwinds: the other ranks' writing threads go on with this one whatever their training
  // threads do, so the write completes (a rank that died stalls it until the I/O watchdog ends the job), and the
  // job's end (dist/job_error.h) never finalises MPI under a writing thread.
  if (thread_.joinable()) thread_.join();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void BackgroundSave::start(int64_t iteration, std::function<std::string()> write) {
  MEGATON_CHECK(!thread_.joinable(), InternalError, "a checkpoint save started while another is in flight");
  done_ = false;
  result_.clear();
  error_ = nullptr;
  iteration_ = iteration;
  thread_ = std::thread([this, write = std::move(write)] {
    try {
      result_ = write();
    } catch (...) {
      error_ = std::current_exception();
    }
    done_.store(true, std::memory_order_release);
  });
}

std::string BackgroundSave::finish() {
  thread_.join();
  if (error_) std::rethrow_exception(error_);
  return result_;
}

std::optional<std::string> BackgroundSave::poll() {
  if (!thread_.joinable()) return std::nullopt;
  int all_done = done_.load(std::memory_order_acquire) ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all_done, 1, MPI_INT, MPI_MIN, comm_);
  if (!all_done) return std::nullopt;
  return finish();
}

std::string BackgroundSave::wait() {
  if (!thread_.joinable()) return "";
  return finish();
}

}  // namespace megaton::checkpoint
