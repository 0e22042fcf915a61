// cuBLASLt GEMMs with epilogues (ops/cublaslt_gemm.h). cuBLASLt is column-major: a row-major [r, c] matrix is a
// column-major [c, r] one with leading dimension c, so every product below is written for the transposes:
// (X_cm is row-major X read column-major, i.e. X^T):
//   linear_gelu_aux  act_cm [out, T]  = w_cm^T [out, in] . x_cm [in, T]; bias over D's rows       (TN)
//   linear_dgelu     d_pre_cm [f, T]  = w_cm [f, h] . dy_cm [h, T]; times gelu'(aux)                (NN)
//   fp8_gemm         d_cm [N, M]      = b_cm^T [N, K] . a_cm [K, M]; bias (and GELU) over D's rows    (TN)
// (the layouts Transformer Engine uses for the same GEMMs). The handle is the current cuBLAS handle cast to a
// cuBLASLt one (cuBLAS documents that every cublasHandle_t is a valid cublasLtHandle_t); the workspace comes from the
// caching allocator on the current stream. The heuristic's answer for a GEMM's key is kept in the caller's
// GemmAlgoMemo where one is given.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cublasLt.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "core/error.h"
#include "ops/cublaslt_gemm.h"

namespace megaton::ops::lt {

namespace {

constexpr uint64_t kWorkspaceBytes = 32ull << 20;

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw InternalError(str("cuBLASLt ", what, ": ", cublasGetStatusString(status)));
}

// Largest power of two (<= 256) dividing the address: what cuBLASLt may assume of a pointer's alignment.
uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 1;
  while (al < 256 && a % (2 * al) == 0) al *= 2;
  return al;
}

cudaDataType_t data_type(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kBFloat16:
      return CUDA_R_16BF;
    case torch::kFloat16:
      return CUDA_R_16F;
    default:
      throw InternalError(str("cuBLASLt GEMM: unsupported dtype ", c10::toString(t.scalar_type())));
  }
}

// Owner of one cuBLASLt descriptor (matmul, matrix layout or preference): destroyed with the owner, attributes set
// by value.
template <typename Handle, typename Attr, cublasStatus_t (*Destroy)(Handle),
          cublasStatus_t (*SetAttr)(Handle, Attr, const void*, size_t)>
class Descriptor {
 public:
  explicit Descriptor(Handle h) : h_(h) {}
  ~Descriptor() { Destroy(h_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  template <typename T>
  void set(Attr attr, const T& value) {
    check(SetAttr(h_, attr, &value, sizeof(T)), "descriptor attribute");
  }
  Handle get() const { return h_; }

 private:
  Handle h_;
};

using MatmulDescBase = Descriptor<cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, cublasLtMatmulDescDestroy,
                                  cublasLtMatmulDescSetAttribute>;
using LayoutBase = Descriptor<cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t, cublasLtMatrixLayoutDestroy,
                              cublasLtMatrixLayoutSetAttribute>;
using PreferenceBase = Descriptor<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                  cublasLtMatmulPreferenceDestroy, cublasLtMatmulPreferenceSetAttribute>;

cublasLtMatmulDesc_t new_matmul_desc() {
  cublasLtMatmulDesc_t d = nullptr;
  check(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
  return d;
}
struct MatmulDesc : MatmulDescBase {
  MatmulDesc() : MatmulDescBase(new_matmul_desc()) {}
};

cublasLtMatrixLayout_t new_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  check(cublasLtMatrixLayoutCreate(&l, type, uint64_t(rows), uint64_t(cols), ld), "matrix layout");
  return l;
}
struct Layout : LayoutBase {
  Layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) : LayoutBase(new_layout(type, rows, cols, ld)) {}
};

cublasLtMatmulPreference_t new_preference() {
  cublasLtMatmulPreference_t p = nullptr;
  check(cublasLtMatmulPreferenceCreate(&p), "preference");
  return p;
}
struct Preference : PreferenceBase {
  Preference() : PreferenceBase(new_preference()) {}
};

// One column-major GEMM D [m, n] = op(A) [m, k] . op(B) [k, n] (* a_scale * b_scale) (+ beta D) with an epilogue;
// lda/ldb/ldd of the stored matrices.
struct Gemm {
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  cudaDataType_t a_type = CUDA_R_16BF, b_type = CUDA_R_16BF, d_type = CUDA_R_16BF;
  const void* a_scale = nullptr;  // FP8: fp32 device scalars multiplying the product (the operands' scale inverses)
  const void* b_scale = nullptr;
  float beta = 0.0f;        // 1: D += the product (C is D)
  bool fast_accum = false;  // FP8: Hopper's faster, less precise accumulation
  int64_t m = 0, n = 0, k = 0;
  const torch::Tensor* a = nullptr;
  int64_t lda = 0;
  const torch::Tensor* b = nullptr;
  int64_t ldb = 0;
  torch::Tensor* d = nullptr;
  int64_t ldd = 0;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;  // the bias (input) or the bias gradient (output)
  void* aux = nullptr;   // GELU input: output of the forward, input of the backward
  int64_t aux_ld = 0;
  // FP8 GEMMs: the bias's and the GELU input's types, set explicitly (cuBLASLt's defaults for FP8 depend on D's type)
  std::optional<cudaDataType_t> bias_type, aux_type;
  // FP8 D: C's memory (16 bits, apart from D: cuBLASLt takes C in D's memory only with D's layout; C is not read,
  // beta being 0), D's scale and where D's amax goes (fp32 device scalars)
  torch::Tensor c;
  const void* d_scale = nullptr;
  void* d_amax = nullptr;
};

// g with its product: D [m, n] = op(A) [m, k] . op(B) [k, n], the stored matrices and their leading dimensions.
Gemm product(cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, const torch::Tensor& a,
             int64_t lda, const torch::Tensor& b, int64_t ldb, torch::Tensor& d, int64_t ldd) {
  Gemm g;
  g.ta = ta, g.tb = tb;
  g.a_type = g.b_type = g.d_type = data_type(a);
  g.m = m, g.n = n, g.k = k;
  g.a = &a, g.lda = lda;
  g.b = &b, g.ldb = ldb;
  g.d = &d, g.ldd = ldd;
  return g;
}

// C's type: g.c's where C has memory of its own (FP8 D), else D's.
cudaDataType_t c_type(const Gemm& g) {
  return g.c.defined() ? data_type(g.c) : g.d_type;
}

// g's descriptors and (after query) the algorithm cuBLASLt's heuristic ranks first for them.
class Prepared {
 public:
  explicit Prepared(const Gemm& g) {
    op_.set(CUBLASLT_MATMUL_DESC_TRANSA, int32_t(g.ta));
    op_.set(CUBLASLT_MATMUL_DESC_TRANSB, int32_t(g.tb));
    op_.set(CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(g.epilogue));
    if (g.bias != nullptr) op_.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
    if (g.aux != nullptr) {
      op_.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux);
      op_.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.aux_ld);
    }
    if (g.bias_type) op_.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(*g.bias_type));
    if (g.aux_type) op_.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, int32_t(*g.aux_type));
    if (g.a_scale != nullptr) op_.set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, g.a_scale);
    if (g.b_scale != nullptr) op_.set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, g.b_scale);
    if (g.fast_accum) op_.set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, int8_t(1));
    if (g.d_scale != nullptr) op_.set(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, g.d_scale);
    if (g.d_amax != nullptr) op_.set(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, g.d_amax);
    a_.emplace(g.a_type, g.ta == CUBLAS_OP_N ? g.m : g.k, g.ta == CUBLAS_OP_N ? g.k : g.m, g.lda);
    b_.emplace(g.b_type, g.tb == CUBLAS_OP_N ? g.k : g.n, g.tb == CUBLAS_OP_N ? g.n : g.k, g.ldb);
    d_.emplace(g.d_type, g.m, g.n, g.ldd);
    c_.emplace(c_type(g), g.m, g.n, g.ldd);
    pref_.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kWorkspaceBytes);
    pref_.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_of(g.a->data_ptr()));
    pref_.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment_of(g.b->data_ptr()));
    pref_.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
              alignment_of(g.c.defined() ? g.c.data_ptr() : g.d->data_ptr()));
    pref_.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment_of(g.d->data_ptr()));
  }

  // The heuristic's first-ranked algorithm, or nothing where it offers none.
  std::optional<cublasLtMatmulAlgo_t> query() {
    cublasLtMatmulHeuristicResult_t result = {};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle(), op_.get(), a_->get(), b_->get(), c_->get(),
                                                                 d_->get(), pref_.get(), 1, &result, &found);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0) return std::nullopt;
    return result.algo;
  }

  // Runs g with `algo` into *g.d (C: g.c where defined, else D itself); cuBLASLt's status (its argument checks
  // refuse before anything runs).
  cublasStatus_t launch(const Gemm& g, const cublasLtMatmulAlgo_t& algo) const {
    torch::Tensor& d = *g.d;
    torch::Tensor workspace =
        torch::empty({int64_t(kWorkspaceBytes)}, torch::TensorOptions().dtype(torch::kUInt8).device(d.device()));
    const float alpha = 1.0f, beta = g.beta;
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(d.device().index()).stream();
    void* c = g.c.defined() ? g.c.data_ptr() : d.data_ptr();
    return cublasLtMatmul(handle(), op_.get(), &alpha, g.a->data_ptr(), a_->get(), g.b->data_ptr(), b_->get(), &beta, c,
                          c_->get(), d.data_ptr(), d_->get(), &algo, workspace.data_ptr(), kWorkspaceBytes, stream);
  }

 private:
  static cublasLtHandle_t handle() { return reinterpret_cast<cublasLtHandle_t>(at::cuda::getCurrentCUDABlasHandle()); }
  MatmulDesc op_;
  std::optional<Layout> a_, b_, c_, d_;  // (C: g.c, or D's memory, read only when beta is 1)
  Preference pref_;
};

// What decides the algorithm on offer: the product, its layouts, epilogue, type, the pointers' alignments, the
// device.
std::vector<int64_t> key_of(const Gemm& g) {
  return {g.ta,
          g.tb,
          g.m,
          g.n,
          g.k,
          g.lda,
          g.ldb,
          g.ldd,
          g.aux_ld,
          int64_t(g.epilogue),
          int64_t(g.a_type),
          int64_t(g.b_type),
          int64_t(g.d_type),
          int64_t(c_type(g)),
          int64_t(g.beta != 0.0f),
          int64_t(g.fast_accum),
          alignment_of(g.a->data_ptr()),
          alignment_of(g.b->data_ptr()),
          alignment_of(g.d->data_ptr()),
          g.d->device().index()};
}

constexpr size_t kAlgoWords = sizeof(cublasLtMatmulAlgo_t) / sizeof(uint64_t);
static_assert(sizeof(cublasLtMatmulAlgo_t) % sizeof(uint64_t) == 0);

// Runs g with the heuristic's first-ranked algorithm (looked up in `memo` when given); false (nothing run) where it
// offers none.
bool run(const Gemm& g, GemmAlgoMemo* memo) {
  Prepared p(g);
  std::optional<cublasLtMatmulAlgo_t> algo;
  const std::vector<int64_t> key = key_of(g);
  if (const auto known = memo ? memo->find(key) : std::nullopt) {
    if (known->empty()) return false;
    cublasLtMatmulAlgo_t a;
    std::memcpy(&a, known->data(), sizeof(a));
    algo = a;
  } else {
    algo = p.query();
    GemmAlgoMemo::Algo bytes;
    if (algo) {
      bytes.resize(kAlgoWords);
      std::memcpy(bytes.data(), &*algo, sizeof(*algo));
    }
    if (memo) memo->remember(key, std::move(bytes));
  }
  if (!algo) return false;
  const cublasStatus_t status = p.launch(g, *algo);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE) {
    // The heuristic offered an algorithm the matmul then refuses (its checks run before anything is launched): no
    // algorithm for this key, as where none is offered; the caller takes its other path.
    if (memo) memo->remember(key, {});
    return false;
  }
  check(status, "matmul");
  return true;
}

}  // namespace

bool linear_gelu_aux(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, torch::Tensor& act,
                     torch::Tensor& pre, GemmAlgoMemo* memo) {
  const int64_t tokens = x.size(0), in = x.size(1), out = w.size(0);
  Gemm g = product(CUBLAS_OP_T, CUBLAS_OP_N, out, tokens, in, w, in, x, in, act, out);
  g.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  g.bias = b.data_ptr();
  g.aux = pre.data_ptr(), g.aux_ld = out;
  return run(g, memo);
}

bool fp8_gemm(const Fp8Operand& a, const Fp8Operand& b, torch::Tensor& d, bool accumulate, bool fast_accum,
              GemmAlgoMemo* memo, const Fp8Epilogue& epilogue) {
  const int64_t rows = a.bytes.size(0), cols = b.bytes.size(0), k = a.bytes.size(1);
  MEGATON_ASSERT(a.bytes.scalar_type() == torch::kUInt8 && b.bytes.scalar_type() == torch::kUInt8 &&
                     b.bytes.size(1) == k && a.bytes.is_contiguous() && b.bytes.is_contiguous(),
                 "fp8_gemm: operands [", a.bytes.sizes(), "] and [", b.bytes.sizes(), "] of FP8 bytes");
  MEGATON_ASSERT(d.dim() == 2 && d.size(0) == rows && d.size(1) == cols && d.is_contiguous(), "fp8_gemm: output ",
                 d.sizes(), " for [", rows, ", ", cols, "]");
  MEGATON_ASSERT(!accumulate || d.scalar_type() == torch::kFloat32, "fp8_gemm accumulates into fp32 only");
  if (a.format == fp8::Format::kE5M2 && b.format == fp8::Format::kE5M2) return false;  // no E5M2 x E5M2 on Hopper
  // Row-major d [rows, cols] = a [rows, k] . b [cols, k]^T is column-major d^T [cols, rows] = b_cm^T . a_cm: TN, the
  // layout cuBLASLt's FP8 kernels take.
  Gemm g;
  g.ta = CUBLAS_OP_T, g.tb = CUBLAS_OP_N;
  g.m = cols, g.n = rows, g.k = k;
  g.a = &b.bytes, g.lda = k;
  g.b = &a.bytes, g.ldb = k;
  g.d = &d, g.ldd = cols;
  const auto fp8_type = [](fp8::Format f) { return f == fp8::Format::kE4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; };
  g.a_type = fp8_type(b.format), g.b_type = fp8_type(a.format);
  const bool fp8_out = d.scalar_type() == torch::kUInt8;
  // The epilogue's 16-bit type: D's, or for FP8 D the bias's (bf16 without one), which C takes too.
  const torch::ScalarType epilogue_dtype =
      fp8_out ? (epilogue.bias.defined() ? epilogue.bias.scalar_type() : torch::kBFloat16) : d.scalar_type();
  if (fp8_out) {
    MEGATON_ASSERT(!accumulate && epilogue.d_scale.defined() && epilogue.d_scale.numel() == 1 &&
                       epilogue.d_scale.scalar_type() == torch::kFloat32 &&
                       (!epilogue.d_amax.defined() ||
                        (epilogue.d_amax.numel() == 1 && epilogue.d_amax.scalar_type() == torch::kFloat32)),
                   "fp8_gemm: FP8 output needs an fp32 [1] scale (and amax), and does not accumulate");
    g.d_type = fp8_type(epilogue.d_format);
    g.c = torch::empty(d.sizes(), d.options().dtype(epilogue_dtype));  // [M, N], never read (beta 0)
    g.d_scale = epilogue.d_scale.data_ptr();
    if (epilogue.d_amax.defined()) g.d_amax = epilogue.d_amax.data_ptr();
  } else {
    g.d_type = d.scalar_type() == torch::kFloat32 ? CUDA_R_32F : data_type(d);
  }
  g.a_scale = b.scale_inv.data_ptr(), g.b_scale = a.scale_inv.data_ptr();
  g.beta = accumulate ? 1.0f : 0.0f;
  g.fast_accum = fast_accum;
  if (epilogue.bias.defined()) {
    MEGATON_ASSERT(
        !accumulate && d.scalar_type() != torch::kFloat32 &&
            (epilogue.bias.scalar_type() == torch::kBFloat16 || epilogue.bias.scalar_type() == torch::kFloat16) &&
            epilogue.bias.scalar_type() == epilogue_dtype && epilogue.bias.numel() == cols &&
            epilogue.bias.is_contiguous(),
        "fp8_gemm: bias [", epilogue.bias.sizes(), "] for output ", d.sizes(), " ", d.scalar_type());
    g.epilogue = CUBLASLT_EPILOGUE_BIAS;
    g.bias = epilogue.bias.data_ptr();
    g.bias_type = data_type(epilogue.bias);
    if (epilogue.gelu_pre.defined()) {
      MEGATON_ASSERT(epilogue.gelu_pre.sizes() == d.sizes() && epilogue.gelu_pre.is_contiguous() &&
                         epilogue.gelu_pre.scalar_type() == epilogue_dtype,
                     "fp8_gemm: GELU input ", epilogue.gelu_pre.sizes(), " for output ", d.sizes());
      g.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
      g.aux = epilogue.gelu_pre.data_ptr(), g.aux_ld = cols;
      g.aux_type = data_type(epilogue.gelu_pre);
    }
  }
  return run(g, memo);
}

bool linear_dgelu(const torch::Tensor& dy, const torch::Tensor& w, const torch::Tensor& pre, torch::Tensor& d_pre,
                  GemmAlgoMemo* memo) {
  const int64_t tokens = dy.size(0), h = dy.size(1), f = w.size(1);
  Gemm g = product(CUBLAS_OP_N, CUBLAS_OP_N, f, tokens, h, w, f, dy, h, d_pre, f);
  g.epilogue = CUBLASLT_EPILOGUE_DGELU;
  g.aux = pre.data_ptr(), g.aux_ld = f;
  return run(g, memo);
}

}  // namespace megaton::ops::lt
