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
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cublasLt.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/device_clock.h"
#include "core/error.h"
#include "ops/cublaslt_gemm.h"
#include "ops/gemm_tuner.h"

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

// g with its product: D [m, n] = op(A) [m, k] . op(B) [k, n], the stored matrices and their leading dimensions.
Gemm product(cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, const torch::Tensor& a,
             int64_t lda, const torch::Tensor& b, int64_t ldb, torch::Tensor& d, int64_t ldd) {
  Gemm g;
  g.ta = ta, g.tb = tb;
  g.m = m, g.n = n, g.k = k;
  g.a = &a, g.lda = lda;
  g.b = &b, g.ldb = ldb;
  g.d = &d, g.ldd = ldd;
  return g;
}

constexpr int kMaxAlgos = 16;

// g's descriptors and (after query) the algorithms cuBLASLt's heuristic offers for them, best ranked first.
class Prepared {
 public:
  explicit Prepared(const Gemm& g) : type_(data_type(*g.a)), d_type_(g.fp32_output ? CUDA_R_32F : type_) {
    op_.set(CUBLASLT_MATMUL_DESC_TRANSA, int32_t(g.ta));
    op_.set(CUBLASLT_MATMUL_DESC_TRANSB, int32_t(g.tb));
    op_.set(CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(g.epilogue));
    if (g.bias != nullptr) op_.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
    if (g.aux != nullptr) {
      op_.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux);
      op_.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.aux_ld);
    }
    a_.emplace(type_, g.ta == CUBLAS_OP_N ? g.m : g.k, g.ta == CUBLAS_OP_N ? g.k : g.m, g.lda);
    b_.emplace(type_, g.tb == CUBLAS_OP_N ? g.k : g.n, g.tb == CUBLAS_OP_N ? g.n : g.k, g.ldb);
    d_.emplace(d_type_, g.m, g.n, g.ldd);
    pref_.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kWorkspaceBytes);
    pref_.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_of(g.a->data_ptr()));
    pref_.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment_of(g.b->data_ptr()));
    pref_.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment_of(g.d->data_ptr()));
    pref_.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment_of(g.d->data_ptr()));
  }

  // Asks the heuristic for up to `want` algorithms (its CPU cost is why the tuned paths keep their choice's record);
  // returns how many it offers.
  int query(int want) {
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle(), op_.get(), a_->get(), b_->get(), d_->get(),
                                                                 d_->get(), pref_.get(), want, results_, &found_);
    if (status != CUBLAS_STATUS_SUCCESS) found_ = 0;
    return found_;
  }
  int found() const { return found_; }
  const cublasLtMatmulAlgo_t& algo(int i) const { return results_[i].algo; }

  // Runs g with `algo` into *g.d (D and C).
  void launch(const Gemm& g, const cublasLtMatmulAlgo_t& algo) const {
    torch::Tensor& d = *g.d;
    torch::Tensor workspace =
        torch::empty({int64_t(kWorkspaceBytes)}, torch::TensorOptions().dtype(torch::kUInt8).device(d.device()));
    const float alpha = 1.0f, beta = g.beta;
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(d.device().index()).stream();
    check(cublasLtMatmul(handle(), op_.get(), &alpha, g.a->data_ptr(), a_->get(), g.b->data_ptr(), b_->get(), &beta,
                         d.data_ptr(), d_->get(), d.data_ptr(), d_->get(), &algo, workspace.data_ptr(), kWorkspaceBytes,
                         stream),
          "matmul");
  }

 private:
  static cublasLtHandle_t handle() { return reinterpret_cast<cublasLtHandle_t>(at::cuda::getCurrentCUDABlasHandle()); }
  cudaDataType_t type_, d_type_;
  MatmulDesc op_;
  std::optional<Layout> a_, b_, d_;
  Preference pref_;
  cublasLtMatmulHeuristicResult_t results_[kMaxAlgos] = {};
  int found_ = 0;
};

// Runs g with its algo-th heuristic algorithm; false (nothing run) where the heuristic offers fewer. count: where
// given, set to how many it offers (up to kMaxAlgos).
bool run(const Gemm& g, int* count = nullptr) {
  const int algo = g.algo < 0 ? 0 : g.algo;
  Prepared p(g);
  p.query(count != nullptr ? kMaxAlgos : algo + 1);
  if (count != nullptr) *count = p.found();
  if (algo >= p.found()) return false;
  p.launch(g, p.algo(algo));
  return true;
}

// What decides the algorithms on offer and their speed: the product, its layouts, epilogue, types, beta and the
// pointers' alignments, the device; `kind` tells apart GEMMs tuned among different candidate sets.
std::vector<int64_t> key_of(const Gemm& g, int64_t kind) {
  return {kind,
          g.ta,
          g.tb,
          g.m,
          g.n,
          g.k,
          g.lda,
          g.ldb,
          g.ldd,
          g.aux_ld,
          int64_t(g.epilogue),
          int64_t(data_type(*g.a)),
          g.fp32_output,
          g.beta != 0.0f,
          alignment_of(g.a->data_ptr()),
          alignment_of(g.b->data_ptr()),
          alignment_of(g.d->data_ptr()),
          g.d->device().index()};
}

// A kept choice as the tuner's record: {1, the cuBLASLt algorithm's words}, or {0} for cublasGemmEx.
constexpr size_t kAlgoWords = sizeof(cublasLtMatmulAlgo_t) / sizeof(uint64_t);
static_assert(sizeof(cublasLtMatmulAlgo_t) % sizeof(uint64_t) == 0);

std::vector<uint64_t> record_of(const cublasLtMatmulAlgo_t& algo) {
  std::vector<uint64_t> r(1 + kAlgoWords, 1);
  std::memcpy(r.data() + 1, &algo, sizeof(algo));
  return r;
}

cublasLtMatmulAlgo_t algo_of(const std::vector<uint64_t>& record) {
  MEGATON_ASSERT(record.size() == 1 + kAlgoWords && record[0] == 1, "not a cuBLASLt algorithm's record");
  cublasLtMatmulAlgo_t algo;
  std::memcpy(&algo, record.data() + 1, sizeof(algo));
  return algo;
}

// The tuner's key for g: key_of plus whether it tunes (off: the heuristic's first is kept instead).
std::vector<int64_t> tuner_key(const Gemm& g, int64_t kind) {
  std::vector<int64_t> key = key_of(g, kind);
  key.push_back(gemm_tuner().enabled());
  return key;
}

// main^T [in, out] (column-major) = x_cm [in, T] . dy_cm^T [T, out] (+ main): the weight gradient into an fp32 main
// grad.
Gemm wgrad_gemm(const torch::Tensor& dy, const torch::Tensor& x, torch::Tensor& main, bool overwrite) {
  const int64_t tokens = x.size(0), in = x.size(1), out = dy.size(1);
  Gemm g = product(CUBLAS_OP_N, CUBLAS_OP_T, in, out, tokens, x, in, dy, out, main, in);
  g.fp32_output = true;
  g.beta = overwrite ? 0.0f : 1.0f;
  return g;
}

// g (an fp32-output product) by cublasGemmEx (cuBLAS's own choice of kernel) into *g.d.
void gemm_ex_fp32(const Gemm& g) {
  torch::Tensor& d = *g.d;
  const cudaDataType_t ab = data_type(*g.a);
  const float alpha = 1.0f, beta = g.beta;
  const cublasStatus_t st =
      cublasGemmEx(at::cuda::getCurrentCUDABlasHandle(), g.ta, g.tb, int(g.m), int(g.n), int(g.k), &alpha,
                   g.a->data_ptr(), ab, int(g.lda), g.b->data_ptr(), ab, int(g.ldb), &beta, d.data_ptr(), CUDA_R_32F,
                   int(g.ldd), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP);
  MEGATON_CHECK(st == CUBLAS_STATUS_SUCCESS, RuntimeError,
                "weight-gradient GEMM into the fp32 main grad: cuBLAS status ", int(st), " (m ", g.m, ", n ", g.n,
                ", k ", g.k, ")");
}

// How the tuner's log names g: what it computes ("weight gradient", "GELU_AUX_BIAS", "DGELU", else the epilogue's
// number) and its m x n x k.
std::string tuner_label(const Gemm& g, bool gemm_ex) {
  std::string what = gemm_ex                                         ? "weight gradient"
                     : g.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ? "GELU_AUX_BIAS"
                     : g.epilogue == CUBLASLT_EPILOGUE_DGELU         ? "DGELU"
                                                                     : "epilogue " + std::to_string(int(g.epilogue));
  return what + " " + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k);
}

// Runs g (into *g.d) with the algorithm the tuner keeps for its shape; while the shape's trial runs, with the
// candidate whose turn it is, between two CUDA events (ops/gemm_tuner.h); once a choice is final its record is kept
// and later calls launch it without asking the heuristic again. gemm_ex: cublasGemmEx (candidate -1, fp32 output only)
// is a candidate and the baseline, else cuBLASLt's first-ranked algorithm is. False where nothing is on offer.
bool run_tuned(const Gemm& g, bool gemm_ex) {
  GemmTuner& tuner = gemm_tuner();
  if (gemm_ex && !tuner.enabled()) {  // the baseline, untimed
    gemm_ex_fp32(g);
    return true;
  }
  const std::vector<int64_t> key = tuner_key(g, gemm_ex);
  Prepared p(g);
  std::vector<uint64_t> record = tuner.record(key);
  if (!record.empty()) {
    if (record[0] == 0)
      gemm_ex_fp32(g);
    else
      p.launch(g, algo_of(record));
    return true;
  }
  const int found = p.query(kMaxAlgos);
  if (found == 0 && !gemm_ex) return false;
  const int baseline = gemm_ex ? -1 : 0;
  auto launch = [&](int c) { c < 0 ? gemm_ex_fp32(g) : p.launch(g, p.algo(c)); };
  const GemmTuner::Turn turn = tuner.next(key, baseline, found, tuner_label(g, gemm_ex));
  if (!turn.timed) {
    launch(turn.candidate);
  } else {
    const DeviceClock clock = cuda_device_clock(c10::cuda::current_device());  // events on the current stream
    std::unique_ptr<DeviceMark> start = clock();
    try {
      launch(turn.candidate);
    } catch (const std::exception&) {  // a candidate cuBLAS refuses: no more turns; this call takes the baseline
      if (turn.candidate == baseline) throw;
      tuner.failed(key, turn.candidate);
      launch(baseline);
      start.reset();
    }
    if (start) tuner.add_sample(key, turn.candidate, std::move(start), clock());
  }
  if (turn.final || tuner.decided(key)) {
    const int i = turn.final ? turn.candidate : tuner.choice(key);
    tuner.keep_record(key, i < 0 ? std::vector<uint64_t>{0} : record_of(p.algo(i)));
  }
  return true;
}

}  // namespace

bool linear_gelu_aux(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, torch::Tensor& act,
                     torch::Tensor& pre, int algo, int* count) {
  const int64_t tokens = x.size(0), in = x.size(1), out = w.size(0);
  Gemm g = product(CUBLAS_OP_T, CUBLAS_OP_N, out, tokens, in, w, in, x, in, act, out);
  g.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  g.bias = b.data_ptr();
  g.aux = pre.data_ptr(), g.aux_ld = out;
  g.algo = algo;
  return algo == kTunedAlgo && count == nullptr ? run_tuned(g, /*gemm_ex=*/false) : run(g, count);
}

bool dgelu_bgrad(const torch::Tensor& dy, const torch::Tensor& w, const torch::Tensor& pre, torch::Tensor& d_pre,
                 torch::Tensor& db) {
  const int64_t tokens = dy.size(0), h = dy.size(1), f = w.size(1);
  Gemm g = product(CUBLAS_OP_N, CUBLAS_OP_N, f, tokens, h, w, f, dy, h, d_pre, f);
  g.epilogue = CUBLASLT_EPILOGUE_DGELU_BGRAD;
  g.bias = db.data_ptr();
  g.aux = pre.data_ptr(), g.aux_ld = f;
  return run(g);
}

bool linear_dgelu(const torch::Tensor& dy, const torch::Tensor& w, const torch::Tensor& pre, torch::Tensor& d_pre,
                  int algo, int* count) {
  const int64_t tokens = dy.size(0), h = dy.size(1), f = w.size(1);
  Gemm g = product(CUBLAS_OP_N, CUBLAS_OP_N, f, tokens, h, w, f, dy, h, d_pre, f);
  g.epilogue = CUBLASLT_EPILOGUE_DGELU;
  g.aux = pre.data_ptr(), g.aux_ld = f;
  g.algo = algo;
  return algo == kTunedAlgo && count == nullptr ? run_tuned(g, /*gemm_ex=*/false) : run(g, count);
}

bool wgrad_fp32(const torch::Tensor& dy, const torch::Tensor& x, torch::Tensor& main, bool overwrite, int algo,
                int* count) {
  Gemm g = wgrad_gemm(dy, x, main, overwrite);
  g.algo = algo;
  return run(g, count);
}

void wgrad_fp32_tuned(const torch::Tensor& dy, const torch::Tensor& x, torch::Tensor& main, bool overwrite) {
  run_tuned(wgrad_gemm(dy, x, main, overwrite), /*gemm_ex=*/true);
}

bool wgrad_bgrad(const torch::Tensor& dy, const torch::Tensor& x, torch::Tensor& dw, torch::Tensor& db) {
  const int64_t tokens = x.size(0), in = x.size(1), out = dy.size(1);
  Gemm g = product(CUBLAS_OP_N, CUBLAS_OP_T, in, out, tokens, x, in, dy, out, dw, in);
  g.epilogue = CUBLASLT_EPILOGUE_BGRADB;
  g.bias = db.data_ptr();
  return run(g);
}

bool mlp_probe(MlpProbe what, const torch::Tensor& a, const torch::Tensor& w, const torch::Tensor& b,
               torch::Tensor& out, torch::Tensor& aux, int algo, int* count) {
  const int64_t tokens = a.size(0), h = a.size(1), f = 4 * h;
  Gemm g;
  switch (what) {
    case MlpProbe::kFc1GeluAux:  // as linear_gelu_aux
    case MlpProbe::kFc1Plain:
      g = product(CUBLAS_OP_T, CUBLAS_OP_N, f, tokens, h, w, h, a, h, out, f);
      if (what == MlpProbe::kFc1GeluAux) {
        g.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
        g.bias = b.data_ptr();
        g.aux = aux.data_ptr(), g.aux_ld = f;
      }
      break;
    case MlpProbe::kFc1GeluAuxT:  // out_cm [T, f] = x_cm^T [T, h] . w1_cm [h, f]
      g = product(CUBLAS_OP_T, CUBLAS_OP_N, tokens, f, h, a, h, w, h, out, tokens);
      g.epilogue = CUBLASLT_EPILOGUE_GELU_AUX;
      g.aux = aux.data_ptr(), g.aux_ld = tokens;
      break;
    case MlpProbe::kDgelu:  // as linear_dgelu
    case MlpProbe::kDgeluPlain:
      g = product(CUBLAS_OP_N, CUBLAS_OP_N, f, tokens, h, w, f, a, h, out, f);
      if (what == MlpProbe::kDgelu) g.epilogue = CUBLASLT_EPILOGUE_DGELU, g.aux = aux.data_ptr(), g.aux_ld = f;
      break;
    case MlpProbe::kDgeluT:  // out_cm [T, f] = dy_cm^T [T, h] . w2_cm^T [h, f]
      g = product(CUBLAS_OP_T, CUBLAS_OP_T, tokens, f, h, a, h, w, f, out, tokens);
      g.epilogue = CUBLASLT_EPILOGUE_DGELU, g.aux = aux.data_ptr(), g.aux_ld = tokens;
      break;
    case MlpProbe::kDgeluTW:  // out_cm [T, f] = dy_cm^T [T, h] . w2t_cm [h, f]
    case MlpProbe::kDgeluPlainT:
      g = product(CUBLAS_OP_T, CUBLAS_OP_N, tokens, f, h, a, h, w, h, out, tokens);
      if (what == MlpProbe::kDgeluTW) g.epilogue = CUBLASLT_EPILOGUE_DGELU, g.aux = aux.data_ptr(), g.aux_ld = tokens;
      break;
  }
  g.algo = algo;
  return run(g, count);
}

}  // namespace megaton::ops::lt
