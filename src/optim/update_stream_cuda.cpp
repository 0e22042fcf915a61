// UpdateStream on a CUDA side stream from ATen's pool, with one event per group; a CPU device runs the work in order.
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>
#include <vector>

#include "core/error.h"
#include "optim/update_stream.h"

namespace megaton::optim {

struct UpdateStream::Impl {
  int groups = 1;
  std::optional<c10::cuda::CUDAStream> side;  // CUDA devices only
  at::cuda::CUDAEvent queued;                 // on the caller's stream: the side stream starts behind it
  std::vector<at::cuda::CUDAEvent> group_done;
  at::cuda::CUDAEvent all_done;
  bool in_flight = false;
  int waited = -1;  // the caller's stream already waits for groups <= this
};

UpdateStream::UpdateStream(const torch::Device& device, int groups) : impl_(std::make_unique<Impl>()) {
  MEGATON_ASSERT(groups >= 1, "UpdateStream: ", groups, " groups");
  impl_->groups = groups;
  if (device.is_cuda()) {
    impl_->side = c10::cuda::getStreamFromPool(false, device.index());
    impl_->group_done.resize(static_cast<size_t>(groups));
  }
}

UpdateStream::~UpdateStream() {
  try {
    if (impl_->side) impl_->side->synchronize();  // nothing queued outlives the buffers it reads
  } catch (const std::exception&) {
  }
}

void UpdateStream::run(const std::function<void(int)>& work, const std::function<void()>& last) {
  Impl& s = *impl_;
  if (!s.side) {
    run_in_order(s.groups, work, last);
    return;
  }
  wait(s.groups);
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(s.side->device_index());
  s.queued.record(caller);
  s.queued.block(*s.side);
  {
    const c10::cuda::CUDAStreamGuard on_side(*s.side);
    for (int g = 0; g < s.groups; ++g) {
      work(g);
      s.group_done[static_cast<size_t>(g)].record(*s.side);
    }
    last();
    s.all_done.record(*s.side);
  }
  s.in_flight = true;
  s.waited = -1;
}

void UpdateStream::wait(int g) {
  Impl& s = *impl_;
  if (!s.in_flight) return;
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(s.side->device_index());
  if (g >= s.groups) {
    s.all_done.block(caller);
    s.in_flight = false;
    return;
  }
  if (g <= s.waited) return;
  s.group_done[static_cast<size_t>(g)].block(caller);
  s.waited = g;
}

int UpdateStream::groups() const {
  return impl_->groups;
}

}  // namespace megaton::optim
