// CUDA events as timer marks: recorded on the device's current stream, read with cudaEventElapsedTime once the later
// event has completed.
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

#include "core/device_clock.h"

namespace megaton {

namespace {

class CudaMark : public DeviceMark {
 public:
  explicit CudaMark(int device_index) : event_(cudaEventDefault) {
    event_.record(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_index)));
  }
  double seconds_since(const DeviceMark& earlier) const override {
    const auto& e = dynamic_cast<const CudaMark&>(earlier);
    event_.synchronize();  // cudaEventElapsedTime fails with cudaErrorNotReady on an event not yet reached
    return static_cast<double>(e.event_.elapsed_time(event_)) * 1e-3;
  }

 private:
  at::cuda::CUDAEvent event_;
};

}  // namespace

DeviceClock cuda_device_clock(int device_index) {
  return [device_index]() -> std::unique_ptr<DeviceMark> { return std::make_unique<CudaMark>(device_index); };
}

}  // namespace megaton
