// set_gemm_sm_carveout on cuBLAS's per-thread handle and ATen's carveout setting (ops/gemm_sm_carveout.h).
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublas_v2.h>

#include <optional>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "ops/gemm_sm_carveout.h"

namespace megaton::ops {

namespace {

// ATen's Context::_setSMCarveout_EXPERIMENTAL (its cuBLASLt GEMMs) exists in the LibTorch versions megaton runs on
// GPUs; "experimental, may be removed": where it is absent only cuBLAS's and megaton's own GEMMs take the target.
template <typename Context, typename = void>
struct HasAtenCarveout : std::false_type {};
template <typename Context>
struct HasAtenCarveout<
    Context, std::void_t<decltype(std::declval<Context&>()._setSMCarveout_EXPERIMENTAL(std::optional<int32_t>{}))>>
    : std::true_type {};

template <typename Context>
void set_aten_carveout(Context& context, int carveout) {
  if constexpr (HasAtenCarveout<Context>::value)
    context._setSMCarveout_EXPERIMENTAL(carveout > 0 ? std::optional<int32_t>(carveout) : std::nullopt);
}

}  // namespace

void set_gemm_sm_carveout(const torch::Device& device, int carveout) {
  if (!device.is_cuda()) return;
  const c10::cuda::CUDAGuard on(device);
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  MEGATON_CHECK(carveout >= 0 && carveout < sms, UsageError, "GEMM SM carveout ", carveout,
                ": expected 0 <= N < the GPU's ", sms, " SMs");
  const cublasStatus_t status =
      cublasSetSmCountTarget(at::cuda::getCurrentCUDABlasHandle(), carveout > 0 ? sms - carveout : 0);
  MEGATON_CHECK(status == CUBLAS_STATUS_SUCCESS, RuntimeError, "cublasSetSmCountTarget failed (status ",
                static_cast<int>(status), ")");
  set_aten_carveout(at::globalContext(), carveout);
}

int gemm_sm_target(const torch::Device& device) {
  if (!device.is_cuda()) return 0;
  const c10::cuda::CUDAGuard on(device);
  int target = 0;
  if (cublasGetSmCountTarget(at::cuda::getCurrentCUDABlasHandle(), &target) != CUBLAS_STATUS_SUCCESS) return 0;
  return target;
}

}  // namespace megaton::ops
