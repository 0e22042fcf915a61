// Next-token choice from the last position's logits, as Megatron's text_generation_utils.sample_sequence_batch:
// greedy argmax, or logits / temperature -> top-k filter -> top-p (nucleus) filter -> softmax -> multinomial.
#pragma once
#include <torch/torch.h>

namespace megaton::infer {

struct SamplingOptions {
  bool greedy = false;       // --greedy: argmax (temperature, top-k and top-p are ignored)
  double temperature = 1.0;  // --temperature (> 0)
  int64_t top_k = 0;         // --top_k: keep the k largest logits (0: off)
  double top_p = 0.0;        // --top_p: keep the smallest prefix of the sorted distribution with mass >= p (0: off)
};

/// Throws UsageError naming the flag for temperature <= 0, top_k < 0, top_p outside [0, 1].
void validate_sampling(const SamplingOptions& o);

/// Megatron's top_k_logits on float logits [b, V]: entries outside the top-k, then outside the nucleus, become -inf.
/// Top-p keeps every token whose preceding cumulative probability (in descending order) is <= p, so the first token
/// crossing p and the most likely token are always kept. Returns a new tensor.
torch::Tensor filter_logits(const torch::Tensor& logits, int64_t top_k, double top_p);

/// One token per row [b] (int64, CPU) from logits [b, V] (any dtype/device). Sampling draws from `gen` (a CPU
/// generator) so every rank that calls it with the same state draws the same tokens.
torch::Tensor sample_next(const torch::Tensor& logits, const SamplingOptions& o, at::Generator& gen);

}  // namespace megaton::infer
