// The device clock of a training run's timers: CUDA events on the current stream of a CUDA device (so timing a phase
// never waits for the GPU), none on the CPU (the timers then use the host clock).
#pragma once
#include <torch/torch.h>

#include "core/timer.h"

namespace megaton {

/// CUDA events on `device`'s current stream; an empty clock for the CPU or a build without CUDA.
DeviceClock device_clock(const torch::Device& device);

#ifdef MEGATON_HAVE_CUDA
/// The CUDA path (src/core/device_clock_cuda.cpp).
DeviceClock cuda_device_clock(int device_index);
#endif

}  // namespace megaton
