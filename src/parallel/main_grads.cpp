#include "parallel/main_grads.h"

#include "core/error.h"

namespace megaton::parallel {

void MainGrads::bind(const torch::Tensor& params, const torch::Tensor& grads) {
  MEGATON_ASSERT(params.dim() == 1 && grads.dim() == 1 && params.numel() == grads.numel() &&
                     grads.scalar_type() == torch::kFloat32 && grads.is_contiguous(),
                 "MainGrads::bind: params ", params.sizes(), ", grads ", grads.sizes(), " ",
                 c10::toString(grads.scalar_type()));
  params_ = params;
  grads_ = grads;
}

torch::Tensor MainGrads::of(const torch::Tensor& param) const {
  if (!grads_.defined() || !param.defined() || !param.has_storage() || !param.is_contiguous()) return {};
  if (param.storage().unsafeGetStorageImpl() != params_.storage().unsafeGetStorageImpl()) return {};
  const int64_t offset = param.storage_offset() - params_.storage_offset();
  if (offset < 0 || offset + param.numel() > params_.numel()) return {};
  return grads_.narrow(0, offset, param.numel()).view(param.sizes());
}

}  // namespace megaton::parallel
