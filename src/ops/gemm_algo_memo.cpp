#include "ops/gemm_algo_memo.h"

namespace megaton::ops {

std::optional<GemmAlgoMemo::Algo> GemmAlgoMemo::find(const Key& key) const {
  const auto it = algos_.find(key);
  if (it == algos_.end()) return std::nullopt;
  return it->second;
}

void GemmAlgoMemo::remember(const Key& key, Algo algo) {
  algos_[key] = std::move(algo);
}

}  // namespace megaton::ops
