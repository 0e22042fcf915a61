// Where a kernel's per-column sums over rows (a bias gradient, LayerNorm's dgamma and dbeta) go: a vector of the
// element type, or straight into the parameter's fp32 main grad (gradient accumulation fusion, as the weights'
// gradients go: src/parallel/main_grads.h), which saves the model-dtype vector, its rounding, and the separate kernel
// that would add it into the main grad.
#pragma once

namespace megaton::kernels {

struct ColumnSumOut {
  ColumnSumOut(void* out = nullptr) : out(out) {}  // NOLINT: a plain output pointer converts
  ColumnSumOut(float* main, bool overwrite) : main(main), overwrite(overwrite) {}
  void* out = nullptr;     // [cols] of the element type, when main is null
  float* main = nullptr;   // [cols] fp32: main = sums (overwrite) or main + sums
  bool overwrite = false;  // the main grad holds nothing of this iteration yet (it was not zeroed)
};

}  // namespace megaton::kernels
