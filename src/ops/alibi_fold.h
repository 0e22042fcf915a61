// Where ALiBi's bias can be folded into the heads (ops/attention.h), as a rule on sizes alone, so that the attention
// op (ops::uses_alibi_fold, on tensors) and the estimates made from flags (train::alibi_folds: --dry-run, megaton plan)
// decide alike.
#pragma once
#include <cmath>
#include <cstdint>

namespace megaton::ops {

/// For a half-precision run: the head size d takes the 8 extra columns as a multiple of 8, and in fp16 (`fp16`) the key
/// columns' b sqrt(d) fit: ALiBi's slopes are below 1 and b < s, so s sqrt(d) below 65504 with a factor 2 to spare.
inline bool alibi_fold_fits(bool fp16, int64_t s, int64_t d) {
  return d % 8 == 0 && (!fp16 || double(s) * std::sqrt(double(d)) < 32768.0);
}

}  // namespace megaton::ops
