#include "parallel/data/main_grads.h"

#include "core/error.h"

namespace megaton::parallel {

void MainGrads::bind(const torch::Tensor& params, const torch::Tensor& grads) {
  MEGATON_ASSERT(params.dim() == 1 && grads.dim() == 1 && params.numel() == grads.numel() &&
                     grads.scalar_type() == torch::kFloat32 && grads.is_contiguous(),
                 "MainGrads::bind: params ", params.sizes(), ", grads ", grads.sizes(), " ",
                 c10::toString(grads.scalar_type()));
  params_ = params;
  grads_ = grads;
  registered_.clear();
  ++version_;
}

ops::MainGrad MainGrads::of(const torch::Tensor& param) {
  if (!grads_.defined() || !param.defined() || !param.has_storage() || !param.is_contiguous()) return {};
  if (param.storage().unsafeGetStorageImpl() != params_.storage().unsafeGetStorageImpl()) return {};
  const int64_t offset = param.storage_offset() - params_.storage_offset();
  if (offset < 0 || offset + param.numel() > params_.numel()) return {};
  auto it = registered_.find(offset);
  if (it == registered_.end()) {
    // Not fresh: the buffer was zeroed for this iteration before anything was registered.
    it = registered_.emplace(offset, Entry{param.numel(), torch::zeros({1}, torch::kBool)}).first;
    ++version_;
  }
  MEGATON_ASSERT(it->second.numel == param.numel(), "MainGrads: a parameter of ", param.numel(), " elements at offset ",
                 offset, " where one of ", it->second.numel, " was registered");
  return {grads_.narrow(0, offset, param.numel()).view(param.sizes()), it->second.overwrite};
}

std::vector<std::pair<int64_t, int64_t>> MainGrads::ranges() const {
  std::vector<std::pair<int64_t, int64_t>> out;
  out.reserve(registered_.size());
  for (const auto& [offset, e] : registered_) out.emplace_back(offset, offset + e.numel);
  return out;
}

void MainGrads::begin_step() {
  for (auto& [offset, e] : registered_) e.overwrite.fill_(true);
}

void MainGrads::settle(int64_t offset, Entry& e) {
  if (!e.overwrite.item<bool>()) return;
  torch::NoGradGuard no_grad;
  grads_.narrow(0, offset, e.numel).zero_();
  e.overwrite.fill_(false);
}

bool MainGrads::zero_if_unwritten(int64_t offset) {
  auto it = registered_.find(offset);
  if (it == registered_.end()) return false;
  settle(offset, it->second);
  return true;
}

void MainGrads::zero_unwritten() {
  for (auto& [offset, e] : registered_) settle(offset, e);
}

}  // namespace megaton::parallel
