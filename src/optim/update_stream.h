// The side stream of a deferred optimizer update (--overlap-optimizer-step, optim/optimizer.h): the update's groups
// are queued on it behind everything the caller's stream has queued so far, each group followed by an event, and the
// caller's stream waits for a group's event only where it is about to read that group's parameters (the next
// iteration's forward). Memory-bound update kernels then run beside the forward's GEMMs instead of after the backward.
// For a CPU device (or a build without CUDA) the work runs in order when queued and every wait is a no-op.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <memory>

namespace megaton::optim {

/// work(0), ..., work(groups - 1), then last(), in order on the calling thread: the update without a side stream.
inline void run_in_order(int groups, const std::function<void(int)>& work, const std::function<void()>& last) {
  for (int g = 0; g < groups; ++g) work(g);
  last();
}

class UpdateStream {
 public:
  /// `groups` >= 1 events, one per group of the update.
  UpdateStream(const torch::Device& device, int groups);
  ~UpdateStream();
  UpdateStream(const UpdateStream&) = delete;
  UpdateStream& operator=(const UpdateStream&) = delete;

  /// Queues work(0), ..., work(groups - 1), then last(), on the side stream behind the current stream's work (the side
  /// stream is the current one while they queue), with an event after each group and one after last(). Waits first
  /// for what an earlier run() queued.
  void run(const std::function<void(int)>& work, const std::function<void()>& last);
  /// The current stream waits for group g's work and, the side stream running in order, every earlier group's;
  /// g >= groups: for everything run() queued, last() included (later waits are no-ops until the next run()).
  void wait(int g);
  int groups() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megaton::optim
