// cuBLASLt GEMMs with epilogues (ops/cublaslt_gemm.h). cuBLASLt is column-major: a row-major [r, c] matrix is a
// column-major [c, r] one with leading dimension c, so every product below is written for the transposes:
// (X_cm is row-major X read column-major, i.e. X^T):
//   linear_gelu_aux  act_cm [out, T]  = w_cm^T [out, in] . x_cm [in, T]; bias over D's rows       (TN)
//   dgelu_bgrad      d_pre_cm [f, T]  = w_cm [f, h] . dy_cm [h, T]; bias grad over D's rows        (NN)
//   linear_dgelu     d_pre_cm [f, T]  = w_cm [f, h] . dy_cm [h, T]; times gelu'(aux)                (NN)
//   wgrad_bgrad      dw_cm [in, out]  = x_cm [in, T] . dy_cm^T [T, out]; bias grad of B's columns (NT)
// (the layouts Transformer Engine uses for the same three GEMMs). The handle is the current cuBLAS handle cast to a
// cuBLASLt one (cuBLAS documents that every cublasHandle_t is a valid cublasLtHandle_t); the workspace comes from the
// caching allocator on the current stream.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAStream.h>
#include <cublasLt.h>

#include <cstdint>

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

// One column-major GEMM D [m, n] = op(A) [m, k] . op(B) [k, n] with an epilogue; lda/ldb/ldd of the stored matrices.
struct Gemm {
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
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
  bool fp32_output = false;  // D (and C) fp32 instead of A's type
  float beta = 0.0f;         // D = A B + beta D
  int algo = 0;              // which of the heuristic's algorithms, best ranked first
};

constexpr int kMaxAlgos = 16;

// Runs g with its algo-th heuristic algorithm; false (nothing run) where the heuristic offers fewer. count: where
// given, set to how many it offers (up to kMaxAlgos).
bool run(const Gemm& g, int* count = nullptr) {
  const cudaDataType_t type = data_type(*g.a), d_type = g.fp32_output ? CUDA_R_32F : type;
  MatmulDesc op;
  op.set(CUBLASLT_MATMUL_DESC_TRANSA, int32_t(g.ta));
  op.set(CUBLASLT_MATMUL_DESC_TRANSB, int32_t(g.tb));
  op.set(CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(g.epilogue));
  if (g.bias != nullptr) op.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  if (g.aux != nullptr) {
    op.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux);
    op.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.aux_ld);
  }
  const Layout a(type, g.ta == CUBLAS_OP_N ? g.m : g.k, g.ta == CUBLAS_OP_N ? g.k : g.m, g.lda);
  const Layout b(type, g.tb == CUBLAS_OP_N ? g.k : g.n, g.tb == CUBLAS_OP_N ? g.n : g.k, g.ldb);
  const Layout d(d_type, g.m, g.n, g.ldd);

  Preference pref;
  pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kWorkspaceBytes);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_of(g.a->data_ptr()));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment_of(g.b->data_ptr()));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment_of(g.d->data_ptr()));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment_of(g.d->data_ptr()));

  auto handle = reinterpret_cast<cublasLtHandle_t>(at::cuda::getCurrentCUDABlasHandle());
  cublasLtMatmulHeuristicResult_t results[kMaxAlgos] = {};
  int found = 0;
  const int want = count != nullptr ? kMaxAlgos : g.algo + 1;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, op.get(), a.get(), b.get(), d.get(), d.get(),
                                                               pref.get(), want, results, &found);
  if (status != CUBLAS_STATUS_SUCCESS) found = 0;
  if (count != nullptr) *count = found;
  if (g.algo >= found) return false;

  torch::Tensor workspace =
      torch::empty({int64_t(kWorkspaceBytes)}, torch::TensorOptions().dtype(torch::kUInt8).device(g.d->device()));
  const float alpha = 1.0f, beta = g.beta;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(g.d->device().index()).stream();
  check(cublasLtMatmul(handle, op.get(), &alpha, g.a->data_ptr(), a.get(), g.b->data_ptr(), b.get(), &beta,
                       g.d->data_ptr(), d.get(), g.d->data_ptr(), d.get(), &results[g.algo].algo, workspace.data_ptr(),
                       kWorkspaceBytes, stream),
        "matmul");
  return true;
}

}  // namespace

bool linear_gelu_aux(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, torch::Tensor& act,
                     torch::Tensor& pre, int algo, int* count) {
  const int64_t tokens = x.size(0), in = x.size(1), out = w.size(0);
  Gemm g;
  g.ta = CUBLAS_OP_T;
  g.tb = CUBLAS_OP_N;
  g.m = out, g.n = tokens, g.k = in;
  g.a = &w, g.lda = in;
  g.b = &x, g.ldb = in;
  g.d = &act, g.ldd = out;
  g.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  g.bias = b.data_ptr();
  g.aux = pre.data_ptr(), g.aux_ld = out;
  g.algo = algo;
  return run(g, count);
}

bool dgelu_bgrad(const torch::Tensor& dy, const torch::Tensor& w, const torch::Tensor& pre, torch::Tensor& d_pre,
                 torch::Tensor& db) {
  const int64_t tokens = dy.size(0), h = dy.size(1), f = w.size(1);
  Gemm g;
  g.ta = CUBLAS_OP_N;
  g.tb = CUBLAS_OP_N;
  g.m = f, g.n = tokens, g.k = h;
  g.a = &w, g.lda = f;
  g.b = &dy, g.ldb = h;
  g.d = &d_pre, g.ldd = f;
  g.epilogue = CUBLASLT_EPILOGUE_DGELU_BGRAD;
  g.bias = db.data_ptr();
  g.aux = pre.data_ptr(), g.aux_ld = f;
  return run(g);
}

bool linear_dgelu(const torch::Tensor& dy, const torch::Tensor& w, const torch::Tensor& pre, torch::Tensor& d_pre,
                  int algo, int* count) {
  const int64_t tokens = dy.size(0), h = dy.size(1), f = w.size(1);
  Gemm g;
  g.ta = CUBLAS_OP_N;
  g.tb = CUBLAS_OP_N;
  g.m = f, g.n = tokens, g.k = h;
  g.a = &w, g.lda = f;
  g.b = &dy, g.ldb = h;
  g.d = &d_pre, g.ldd = f;
  g.epilogue = CUBLASLT_EPILOGUE_DGELU;
  g.aux = pre.data_ptr(), g.aux_ld = f;
  g.algo = algo;
  return run(g, count);
}

bool wgrad_fp32(const torch::Tensor& dy, const torch::Tensor& x, torch::Tensor& main, bool overwrite, int algo,
                int* count) {
  const int64_t tokens = x.size(0), in = x.size(1), out = dy.size(1);
  Gemm g;  // main^T [in, out] (column-major) = x_cm [in, T] . dy_cm^T [T, out]
  g.ta = CUBLAS_OP_N;
  g.tb = CUBLAS_OP_T;
  g.m = in, g.n = out, g.k = tokens;
  g.a = &x, g.lda = in;
  g.b = &dy, g.ldb = out;
  g.d = &main, g.ldd = in;
  g.fp32_output = true;
  g.beta = overwrite ? 0.0f : 1.0f;
  g.algo = algo;
  return run(g, count);
}

bool wgrad_bgrad(const torch::Tensor& dy, const torch::Tensor& x, torch::Tensor& dw, torch::Tensor& db) {
  const int64_t tokens = x.size(0), in = x.size(1), out = dy.size(1);
  Gemm g;
  g.ta = CUBLAS_OP_N;
  g.tb = CUBLAS_OP_T;
  g.m = in, g.n = out, g.k = tokens;
  g.a = &x, g.lda = in;
  g.b = &dy, g.ldb = out;
  g.d = &dw, g.ldd = in;
  g.epilogue = CUBLASLT_EPILOGUE_BGRADB;
  g.bias = db.data_ptr();
  return run(g);
}

}  // namespace megaton::ops::lt
