// Helpers of the 8-bit Adam tests (adam8bit_test.cpp, adam8bit_kernels_test.cpp): the scalars of step t, and the
// shard pieces of parameters laid out one after another.
#pragma once
#include <cmath>
#include <vector>

#include "optim/adam_step.h"
#include "parallel/data/data_parallel_layout.h"
#include "parallel/param_info.h"

namespace megaton::optimtest {

/// lr 1e-2, betas (0.9, 0.95), eps 1e-8, weight decay 0.1, the bias corrections of step `step`.
inline optim::AdamScalars adam8bit_scalars(int step) {
  optim::AdamScalars s;
  s.hyper.lr = 1e-2;
  s.hyper.beta1 = 0.9;
  s.hyper.beta2 = 0.95;
  s.hyper.eps = 1e-8;
  s.hyper.weight_decay = 0.1;
  s.hyper.bias_correction1 = 1 - std::pow(0.9, step);
  s.hyper.bias_correction2 = 1 - std::pow(0.95, step);
  return s;
}

/// One piece per parameter, each whole, back to back from offset 0.
inline std::vector<parallel::ParamPiece> whole_pieces(const parallel::ParamList& ps) {
  std::vector<parallel::ParamPiece> pieces;
  int64_t at = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    pieces.push_back({i, 0, at, ps[i].param.numel()});
    at += ps[i].param.numel();
  }
  return pieces;
}

}  // namespace megaton::optimtest
