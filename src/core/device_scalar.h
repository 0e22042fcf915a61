// A scalar the device computed (the grad norm, a loss), read by the host only when asked: reading waits for the
// device, so the training loop reads at log intervals instead of every iteration.
#pragma once
#include <torch/torch.h>

#include <utility>

namespace megaton {

class DeviceScalar {
 public:
  DeviceScalar() = default;
  /// t: a one-element tensor on any device.
  explicit DeviceScalar(torch::Tensor t) : t_(std::move(t)) {}
  bool has_value() const { return t_.defined(); }
  explicit operator bool() const { return has_value(); }
  /// The value; waits for the device.
  double operator*() const { return t_.item<double>(); }
  const torch::Tensor& tensor() const { return t_; }

 private:
  torch::Tensor t_;
};

}  // namespace megaton
