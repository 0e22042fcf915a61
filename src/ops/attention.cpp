#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <vector>

#include "core/error.h"
#include "core/torch_compat.h"
#include "ops/alibi_fold.h"
#include "ops/alibi_fold_heads.h"
#include "ops/attention_varlen.h"

namespace megaton::ops {

namespace {

bool is_half(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 || t.scalar_type() == torch::kFloat16;
}

// Runs the fused kernel's dropout on our TP generator: the device's default generator takes the TP generator's state
// for the duration and hands the advanced state back (Megatron's tracker fork does the same with the CUDA state).
// The generator's mutex is held only while the states are swapped, never across the kernel: ATen's dropout (CPU
// bernoulli_, the CUDA kernels' philox offset) locks that same non-recursive mutex itself, so holding it for the scope
// deadlocks the first forward with attention dropout on LibTorch >= 2
// (ModelGpt.RecomputationGivesTheSameGradientsWithDropout on a GPU would never return). The swap assumes no other
// thread draws from the default generator meanwhile, which holds for the training loop (one host thread per rank).
class ScopedDefaultGenerator {
 public:
  ScopedDefaultGenerator(torch::Device device, at::Generator& mine)
      : global_(at::globalContext().defaultGenerator(device)), mine_(mine) {
    const std::lock_guard<std::mutex> lock(global_.mutex());
    saved_ = global_.get_state();
    global_.set_state(mine_.get_state());
  }
  ~ScopedDefaultGenerator() {
    const std::lock_guard<std::mutex> lock(global_.mutex());
    mine_.set_state(global_.get_state());
    global_.set_state(saved_);
  }
  ScopedDefaultGenerator(const ScopedDefaultGenerator&) = delete;
  ScopedDefaultGenerator& operator=(const ScopedDefaultGenerator&) = delete;

 private:
  at::Generator global_;
  at::Generator& mine_;
  torch::Tensor saved_;
};

constexpr int64_t kAlibiFoldDims = 8;  // the extra head dimensions of the folded ALiBi bias (a multiple of 8)

// Takes the cached tensor if it has `shape` and q's dtype and device, else makes it and caches it.
template <typename Make>
torch::Tensor cached(const std::shared_ptr<torch::Tensor>& cache, const std::vector<int64_t>& shape,
                     const torch::Tensor& q, Make&& make) {
  torch::Tensor* c = cache.get();
  if (c != nullptr && c->defined() && c->sizes().equals(shape) && c->scalar_type() == q.scalar_type() &&
      c->device() == q.device())
    return *c;
  torch::Tensor t = make();
  if (c != nullptr) *c = t;
  return t;
}

// ALiBi's key-only bias b [np, 1, >= s] (fp32) as the extra key columns of uses_alibi_fold: [s, 1, np, 8] in `dtype`,
// columns 0-2 the three parts of b[h, j] sqrt(d) (each the rounding of what the earlier ones leave: their sum is
// b sqrt(d) to ~2^-24 relative), the rest zero.
torch::Tensor alibi_key_columns(const torch::Tensor& alibi, int64_t s, int64_t d, torch::ScalarType dtype) {
  const int64_t np = alibi.size(0);
  torch::Tensor left =
      alibi.narrow(-1, 0, s).reshape({np, s}).t().to(torch::kFloat64) * std::sqrt(double(d));  // [s, np]
  std::vector<torch::Tensor> cols;
  for (int i = 0; i < 3; ++i) {
    const torch::Tensor part = left.to(dtype);
    cols.push_back(part);
    left = left - part.to(torch::kFloat64);
  }
  for (int64_t i = 3; i < kAlibiFoldDims; ++i) cols.push_back(torch::zeros_like(cols[0]));
  return torch::stack(cols, -1).unsqueeze(1);  // [s, 1, np, 8]
}

// ALiBi folded into the heads (attention.h): q' = [q, 1, 1, 1, 0...], k' = [k, the key columns], v as it is, causal,
// the scale 1/sqrt(d) of the original head size.
torch::Tensor attention_alibi_folded(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                     const AttentionOptions& o, double p) {
  const int64_t s = q.size(0), np = q.size(2), d = q.size(3);
  const torch::Tensor cols = cached(o.alibi_mask_cache, {s, 1, np, kAlibiFoldDims}, q, [&] {
    return alibi_key_columns(o.alibi, s, d, q.scalar_type()).to(q.device());
  });                                                               // [s, 1, np, 8]
  torch::Tensor ones = torch::ones({kAlibiFoldDims}, q.options());  // [8]: 1, 1, 1, 0, ...
  ones.narrow(0, 3, kAlibiFoldDims - 3).zero_();
  const FoldedHeads f = fold_heads(q, k, v, ones, cols);  // q', k' [s, b, np, d + 8], v [s, b, np, d]
  const auto heads_first = [](const torch::Tensor& t) { return t.permute({1, 2, 0, 3}); };  // [b, np, s, .]
  return compat::scaled_dot_product_attention(heads_first(f.q), heads_first(f.k), heads_first(f.v), torch::Tensor(), p,
                                              /*is_causal=*/true, 1.0 / std::sqrt(double(d)));  // [b, np, s, d]
}

torch::Tensor attention_fused(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const AttentionOptions& o) {
  const int64_t s = q.size(0), b = q.size(1), np = q.size(2), d = q.size(3);
  const double p = o.training ? o.dropout_p : 0.0;
  std::optional<ScopedDefaultGenerator> swap;  // the dropout's draws from the TP generator
  if (p > 0.0) {
    MEGATON_ASSERT(o.dropout_generator != nullptr, "attention dropout without a generator");
    swap.emplace(q.device(), *o.dropout_generator);
  }
  if (uses_alibi_fold(q, o))
    return attention_alibi_folded(q, k, v, o, p).permute({2, 0, 1, 3}).reshape({s, b, np * d});  // [s, b, np*d]
  torch::Tensor qb = q.permute({1, 2, 0, 3});                                                    // [b, np, s, d]
  torch::Tensor kb = k.permute({1, 2, 0, 3});
  torch::Tensor vb = v.permute({1, 2, 0, 3});
  torch::Tensor mask;  // undefined: is_causal
  if (o.alibi.defined()) {
    const auto make = [&] {
      const auto opts = torch::TensorOptions().dtype(q.scalar_type()).device(q.device());
      const double inf = std::numeric_limits<float>::infinity();
      torch::Tensor masked = o.documents.defined()
                                 ? torch::zeros({b, 1, s, s}, opts).masked_fill(o.documents.mask(), -inf)  // [b,1,s,s]
                                 : torch::full({s, s}, -inf, opts).triu(1).unsqueeze(0).unsqueeze(0);      // [1,1,s,s]
      return o.alibi.to(q.scalar_type()).narrow(-1, 0, s).unsqueeze(0) + masked;  // [b or 1, np, s, s]
    };
    mask = cached(o.alibi_mask_cache, {o.documents.defined() ? b : 1, np, s, s}, q, make);
  } else if (o.documents.defined()) {
    mask = o.documents.mask().logical_not();  // [b, 1, s, s]: SDPA's boolean masks are true where attention is allowed
  }
  const torch::Tensor ctx = compat::scaled_dot_product_attention(qb, kb, vb, mask, p, !mask.defined());
  return ctx.permute({2, 0, 1, 3}).reshape({s, b, np * d});  // [s, b, np*d]
}

// The variable-length path: [s, b, np, d] -> the samples' tokens end to end [b*s, np, d], each document causal alone.
torch::Tensor attention_varlen(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const AttentionOptions& o) {
  const int64_t s = q.size(0), b = q.size(1), np = q.size(2), d = q.size(3);
  const auto packed = [&](const torch::Tensor& x) { return x.transpose(0, 1).reshape({b * s, np, d}); };
  const double p = o.training ? o.dropout_p : 0.0;
  std::optional<ScopedDefaultGenerator> swap;  // the dropout's draws from the TP generator
  if (p > 0.0) {
    MEGATON_ASSERT(o.dropout_generator != nullptr, "attention dropout without a generator");
    swap.emplace(q.device(), *o.dropout_generator);
  }
  const torch::Tensor ctx = varlen_causal_attention(packed(q), packed(k), packed(v), o.documents.cu_seqlens(),
                                                    o.documents.max_length(), p);  // [b*s, np, d]
  return ctx.view({b, s, np * d}).transpose(0, 1).contiguous();                    // [s, b, np*d]
}

void check_documents(const Documents& docs, const torch::Tensor& q) {
  if (!docs.defined()) return;
  const int64_t s = q.size(0), b = q.size(1);
  MEGATON_CHECK(docs.ids().dim() == 2 && docs.ids().size(0) == b && docs.ids().size(1) == s, InternalError,
                "attention documents: expected ids [", b, ", ", s, "], got ", docs.ids().sizes());
}

}  // namespace

Documents::Documents(const torch::Tensor& ids, torch::Device device, const torch::Tensor& prefix) {
  MEGATON_CHECK(ids.dim() == 2 && ids.size(1) > 0 && !ids.is_floating_point(), InternalError,
                "document ids: expected integers [b, s], got ", ids.scalar_type(), " ", ids.sizes());
  const torch::Tensor host = ids.to(torch::kCPU, torch::kInt64).contiguous();  // [b, s]
  const int64_t b = host.size(0), s = host.size(1);
  const int64_t* id = host.data_ptr<int64_t>();
  std::vector<int32_t> starts;  // each document's first token in the samples' tokens end to end
  for (int64_t i = 0; i < b * s; ++i) {
    const bool sample_start = i % s == 0;
    MEGATON_CHECK(sample_start || id[i] >= id[i - 1], InternalError, "document ids must not decrease along a sample");
    if (sample_start || id[i] != id[i - 1]) {
      if (!starts.empty()) max_length_ = std::max<int64_t>(max_length_, i - starts.back());
      starts.push_back(static_cast<int32_t>(i));
    }
  }
  max_length_ = std::max<int64_t>(max_length_, b * s - starts.back());
  starts.push_back(static_cast<int32_t>(b * s));
  // Host tensors reach the GPU through pinned memory, asynchronously: the training loop never waits on the device here.
  const auto upload = [&](const torch::Tensor& t) {
    return device.is_cuda() ? t.pin_memory().to(device, /*non_blocking=*/true) : t.to(device);
  };
  cu_seqlens_ = upload(torch::tensor(starts, torch::kInt32));  // [n + 1]
  ids_ = ids.device() == device ? ids.to(torch::kInt64) : upload(host);
  if (prefix.defined()) {
    MEGATON_CHECK(prefix.sizes() == ids.sizes(), InternalError, "document prefix: expected [", b, ", ", s, "], got ",
                  prefix.sizes());
    prefix_ = prefix.device() == device ? prefix.to(torch::kBool) : upload(prefix.to(torch::kBool).contiguous());
  }
  mask_ = std::make_shared<torch::Tensor>();
}

Documents Documents::per_forward() const {
  Documents d = *this;
  if (defined()) d.mask_ = std::make_shared<torch::Tensor>();
  return d;
}

const torch::Tensor& Documents::mask() const {
  MEGATON_ASSERT(defined(), "the mask of no documents");
  if (!mask_->defined()) *mask_ = document_mask(ids_, prefix_);  // [b, 1, s, s]
  return *mask_;
}

bool uses_varlen(const torch::Tensor& q, const AttentionOptions& o) {
  const int64_t d = q.size(-1);
  return compat::kHasVarlenFlash && o.use_fused && o.use_varlen && o.documents.defined() && q.is_cuda() && is_half(q) &&
         !o.documents.has_prefix() && !o.alibi.defined() && d % 8 == 0 && d <= 256;
}

bool uses_alibi_fold(const torch::Tensor& q, const AttentionOptions& o) {
  return compat::kHasSdpa && compat::kHasSdpaScale && o.use_fused && o.alibi_fold && o.alibi.defined() &&
         !o.documents.defined() && q.is_cuda() && is_half(q) &&
         alibi_fold_fits(q.scalar_type() == torch::kFloat16, q.size(0), q.size(-1));
}

torch::Tensor document_mask(const torch::Tensor& document_ids, const torch::Tensor& prefix) {
  const int64_t s = document_ids.size(1);
  torch::Tensor later =
      torch::ones({s, s}, torch::TensorOptions().dtype(torch::kBool).device(document_ids.device())).triu(1);  // j > i
  if (prefix.defined()) later = later.logical_and(prefix.unsqueeze(2).logical_and(prefix.unsqueeze(1)).logical_not());
  return (document_ids.unsqueeze(2) != document_ids.unsqueeze(1)).logical_or(later).unsqueeze(1);  // [b, 1, s, s]
}

torch::Tensor causal_attention_explicit(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                        const AttentionOptions& o) {
  const int64_t s = q.size(0), b = q.size(1), np = q.size(2), d = q.size(3);
  const double coeff = o.layer_scale;
  const double norm_factor = std::sqrt(double(d)) * coeff;
  torch::Tensor q2 = q.reshape({s, b * np, d}).transpose(0, 1);     // [b*np, s, d]
  torch::Tensor k2 = k.reshape({s, b * np, d}).permute({1, 2, 0});  // [b*np, d, s]
  torch::Tensor scores;                                             // [b*np, s, s]
  if (o.alibi.defined()) {
    torch::Tensor bias = o.alibi.to(q.scalar_type()).narrow(-1, 0, s).repeat({b, 1, 1}).expand({b * np, s, s});
    scores = torch::baddbmm(bias, q2, k2, /*beta=*/1.0 / coeff, /*alpha=*/1.0 / norm_factor);
  } else {
    scores = torch::bmm(q2, k2) * (1.0 / norm_factor);
  }
  scores = scores.view({b, np, s, s});
  const bool fp32_softmax = is_half(q) && (o.softmax_in_fp32 || coeff != 1.0 || q.device().is_cpu());
  torch::Tensor x = fp32_softmax ? scores.to(torch::kFloat32) : scores;
  if (coeff != 1.0) x = x * coeff;
  check_documents(o.documents, q);
  const torch::Tensor masked =
      o.documents.defined()
          ? o.documents.mask()  // [b, 1, s, s]
          : torch::ones({s, s}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(1);
  x = x.masked_fill(masked, -10000.0);
  torch::Tensor probs = torch::softmax(x, -1).to(q.scalar_type());  // [b, np, s, s]
  if (o.training && o.dropout_p > 0.0) {
    MEGATON_ASSERT(o.dropout_generator != nullptr, "attention dropout without a generator");
    torch::Tensor keep = torch::empty_like(probs).bernoulli_(1.0 - o.dropout_p, *o.dropout_generator);
    probs = probs * keep * (1.0 / (1.0 - o.dropout_p));
  }
  torch::Tensor v2 = v.reshape({s, b * np, d}).transpose(0, 1);                  // [b*np, s, d]
  torch::Tensor ctx = torch::bmm(probs.view({b * np, s, s}), v2);                // [b*np, s, d]
  return ctx.view({b, np, s, d}).permute({2, 0, 1, 3}).reshape({s, b, np * d});  // [s, b, np*d]
}

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const AttentionOptions& o) {
  check_documents(o.documents, q);
  if (uses_varlen(q, o)) return attention_varlen(q, k, v, o);
  if (compat::kHasSdpa && o.use_fused) return attention_fused(q, k, v, o);
  return causal_attention_explicit(q, k, v, o);
}

}  // namespace megaton::ops
