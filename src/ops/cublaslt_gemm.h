// cuBLASLt GEMMs (as Transformer Engine does for the MLP), declared only in CUDA builds: three with fused epilogues of
// the MLP and one weight gradient into an fp32 main grad by a chosen algorithm. ops/gemm_epilogue.cpp uses
// linear_gelu_aux and linear_dgelu; dgelu_bgrad and wgrad_bgrad measured slower than ATen's kernels on an H200
// (perf/bench_gemm_epilogue.cpp keeps the comparison; docs/gpu.md has the numbers); wgrad_fp32 is what
// perf/bench_gemm_algos.cpp times against cublasGemmEx's choice. Matrices are row-major, contiguous, bf16 or fp16 (the
// fp32 main grad aside), of one dtype, with T rows of tokens; every function returns false without touching its outputs
// when cuBLASLt offers no algorithm for the shapes and alignments given (the caller then computes the same with ATen).
//
// algo, count (linear_gelu_aux, linear_dgelu, wgrad_fp32): run the algo-th algorithm of cuBLASLt's heuristic (0: the
// one it ranks best; kTunedAlgo, what training runs: the one ops::gemm_tuner() measured fastest for the shape with
// --gemm-autotune, else the first); count, where given, is set to how many it offers (up to 16)
// (perf/bench_gemm_algos.cpp times them all).
//
// cuBLASLt's GELU is the tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
#pragma once
#ifdef MEGATON_HAVE_CUDA
#include <torch/torch.h>

namespace megaton::ops::lt {

/// algo: the algorithm ops::gemm_tuner() keeps for the shape (with --gemm-autotune; else the heuristic's first).
inline constexpr int kTunedAlgo = -1;

/// Forward of fc1 + GELU: pre = x w^T + b and act = gelu(pre) in one GEMM (epilogue GELU_AUX_BIAS).
/// x [T, in], w [out, in], b [out] -> act, pre [T, out] (preallocated, contiguous).
bool linear_gelu_aux(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, torch::Tensor& act,
                     torch::Tensor& pre, int algo = kTunedAlgo, int* count = nullptr);

/// Backward through fc2's input and the GELU: d_pre = (dy w) * gelu'(pre) and db = d_pre summed over rows, in one
/// GEMM (epilogue DGELU_BGRAD). dy [T, h], w [h, f], pre [T, f] -> d_pre [T, f], db [f] (preallocated).
bool dgelu_bgrad(const torch::Tensor& dy, const torch::Tensor& w, const torch::Tensor& pre, torch::Tensor& d_pre,
                 torch::Tensor& db);

/// Backward through fc2's input and the GELU without the bias gradient: d_pre = (dy w) * gelu'(pre), the derivative
/// applied to the fp32 product before its one rounding (epilogue DGELU). dy [T, h], w [h, f], pre [T, f] -> d_pre
/// [T, f] (preallocated).
bool linear_dgelu(const torch::Tensor& dy, const torch::Tensor& w, const torch::Tensor& pre, torch::Tensor& d_pre,
                  int algo = kTunedAlgo, int* count = nullptr);

/// A weight gradient into an fp32 main grad: main [out, in] = dy^T x (overwrite) or += it, with bf16/fp16 dy [T, out]
/// and x [T, in], through the algo-th algorithm of cuBLASLt's heuristic (0: the one it ranks best). count: where
/// given, set to how many algorithms the heuristic offers (up to 16). False where it offers no algo-th one.
bool wgrad_fp32(const torch::Tensor& dy, const torch::Tensor& x, torch::Tensor& main, bool overwrite, int algo = 0,
                int* count = nullptr);

/// wgrad_fp32 by the algorithm ops::gemm_tuner() keeps for the shape among cublasGemmEx (the baseline: cuBLAS's own
/// choice) and cuBLASLt's offered ones. Throws RuntimeError where cuBLAS fails.
void wgrad_fp32_tuned(const torch::Tensor& dy, const torch::Tensor& x, torch::Tensor& main, bool overwrite);

/// Weight and bias gradients of y = x w^T + b in one GEMM (epilogue BGRADB): dw = dy^T x, db = dy summed over rows.
/// dy [T, out], x [T, in] -> dw [out, in], db [out] (preallocated).
bool wgrad_bgrad(const torch::Tensor& dy, const torch::Tensor& x, torch::Tensor& dw, torch::Tensor& db);

/// The MLP's two epilogue GEMMs, in other orientations and without their epilogues: which kernels cuBLASLt has for
/// them (perf/bench_gemm_algos.cpp's BM_MlpGemmOrientations; training does not call this). Row-major operands, T
/// tokens, f = 4h: x [T, h], w1 [f, h], b [f]; dy [T, h], w2 [h, f], w2t = w2^T contiguous [f, h]; out and aux hold
/// T f elements, [T, f] or, for the transposed (..T) ones, [f, T].
enum class MlpProbe {
  kFc1GeluAux,   // out = gelu(x w1^T + b), aux = the pre-activation: linear_gelu_aux's GEMM (TN)
  kFc1Plain,     // out = x w1^T (TN)
  kFc1GeluAuxT,  // out^T = gelu(w1 x^T), aux^T, without the bias (cuBLASLt adds it along D's other dim) (TN)
  kDgelu,        // out = (dy w2) * gelu'(aux): linear_dgelu's GEMM (NN)
  kDgeluPlain,   // out = dy w2 (NN)
  kDgeluT,       // out^T = (dy w2)^T * gelu'(aux^T), from w2 (TT)
  kDgeluTW,      // the same from w2t (TN)
  kDgeluPlainT,  // out^T = (dy w2)^T, from w2t (TN)
};
/// One MlpProbe GEMM by the algo-th algorithm of cuBLASLt's heuristic; a = x or dy, w = w1, w2 or w2t as above, b
/// used by kFc1GeluAux only. count as for linear_dgelu. False where no algo-th algorithm is offered.
bool mlp_probe(MlpProbe what, const torch::Tensor& a, const torch::Tensor& w, const torch::Tensor& b,
               torch::Tensor& out, torch::Tensor& aux, int algo, int* count = nullptr);

}  // namespace megaton::ops::lt

#endif  // MEGATON_HAVE_CUDA
