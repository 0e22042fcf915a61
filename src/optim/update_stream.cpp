// UpdateStream without CUDA: the work runs in order when queued; nothing to wait for.
#ifndef MEGATON_HAVE_CUDA
#include "optim/update_stream.h"

#include "core/error.h"

namespace megaton::optim {

struct UpdateStream::Impl {
  int groups = 1;
};

UpdateStream::UpdateStream(const torch::Device& device, int groups) : impl_(std::make_unique<Impl>()) {
  MEGATON_CHECK(!device.is_cuda(), UsageError, "--overlap-optimizer-step: this megaton was built without CUDA");
  MEGATON_ASSERT(groups >= 1, "UpdateStream: ", groups, " groups");
  impl_->groups = groups;
}
UpdateStream::~UpdateStream() = default;

void UpdateStream::run(const std::function<void(int)>& work, const std::function<void()>& last) {
  run_in_order(impl_->groups, work, last);
}

void UpdateStream::wait(int) {}

int UpdateStream::groups() const {
  return impl_->groups;
}

}  // namespace megaton::optim
#endif
