#include "infer/sampling.h"

#include <limits>

#include "core/error.h"

namespace megaton::infer {

void validate_sampling(const SamplingOptions& o) {
  MEGATON_CHECK(o.temperature > 0.0, UsageError, "--temperature must be > 0, got ", o.temperature);
  MEGATON_CHECK(o.top_k >= 0, UsageError, "--top_k must be >= 0 (0: off), got ", o.top_k);
  MEGATON_CHECK(o.top_p >= 0.0 && o.top_p <= 1.0, UsageError, "--top_p must be in [0, 1] (0: off), got ", o.top_p);
}

torch::Tensor filter_logits(const torch::Tensor& logits, int64_t top_k, double top_p) {
  MEGATON_CHECK(logits.dim() == 2, InternalError, "filter_logits takes logits [b, V], got ", logits.sizes());
  const double ninf = -std::numeric_limits<double>::infinity();
  torch::Tensor out = logits.clone();  // [b, V]
  if (top_k > 0) {
    const int64_t k = std::min<int64_t>(top_k, out.size(1));
    torch::Tensor kth = std::get<0>(out.topk(k, -1)).narrow(-1, k - 1, 1);  // [b, 1]
    out.masked_fill_(out < kth, ninf);
  }
  if (top_p > 0.0) {
    auto [sorted, idx] = out.sort(-1, /*descending=*/true);     // [b, V]
    torch::Tensor cum = torch::softmax(sorted, -1).cumsum(-1);  // [b, V]
    torch::Tensor remove = cum > top_p;                         // [b, V] bool
    // Shift right by one: the token that crosses p stays; the top-1 always stays.
    remove = torch::cat({torch::zeros_like(remove.narrow(-1, 0, 1)), remove.narrow(-1, 0, remove.size(1) - 1)}, -1);
    torch::Tensor mask = torch::zeros_like(remove).scatter(-1, idx, remove);  // back to vocabulary order
    out.masked_fill_(mask, ninf);
  }
  return out;
}

torch::Tensor sample_next(const torch::Tensor& logits, const SamplingOptions& o, at::Generator& gen) {
  if (o.greedy) return logits.argmax(-1).to(torch::kCPU, torch::kInt64);      // [b]
  torch::Tensor l = logits.to(torch::kCPU, torch::kFloat32) / o.temperature;  // [b, V]
  l = filter_logits(l, o.top_k, o.top_p);
  torch::Tensor probs = torch::softmax(l, -1);
  return at::multinomial(probs, 1, false, gen).view({-1});  // [b]
}

}  // namespace megaton::infer
