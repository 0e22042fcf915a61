#include "parallel/data/data_parallel.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <functional>
#include <set>

#include "core/error.h"
#include "parallel/data/grad_accum.h"

namespace megaton::parallel {

namespace {

std::vector<int64_t> row_major_strides(c10::IntArrayRef sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * sizes[d + 1];
  return strides;
}

int64_t bucket_numel_from_mb(double mb) {
  if (mb <= 0) return 0;
  return static_cast<int64_t>(mb * 1024.0 * 1024.0 / sizeof(float));
}

// Runs after AccumulateGrad has stored the micro-batch's gradient in param.grad.
struct AfterAccumulateHook : torch::autograd::FunctionPostHook {
  explicit AfterAccumulateHook(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    fn_();
    return outputs;
  }
  std::function<void()> fn_;
};

int checked_dp_size(const dist::ProcessGroups& g) {
  MEGATON_CHECK(g.dp != nullptr, InternalError, "data parallel: the process groups have no DP communicator");
  return g.dp->size();
}

}  // namespace

DataParallel::DataParallel(const ParamList& params, const dist::ProcessGroups& groups, DataParallelOptions options)
    : params_(params),
      groups_(groups),
      options_(options),
      dp_rank_(groups.dp ? groups.dp->rank() : 0),
      dp_size_(checked_dp_size(groups)),
      layout_(params, bucket_numel_from_mb(options.bucket_size_mb), options.zero1 ? checked_dp_size(groups) : 1) {
  const torch::Tensor& first = params_.front().param;
  std::set<const void*> seen;
  for (const auto& p : params_) {
    MEGATON_CHECK(p.param.scalar_type() == first.scalar_type() && p.param.device() == first.device(), UsageError,
                  "data parallel: every parameter must share one dtype and device; '", p.name, "' is ",
                  p.param.scalar_type(), " on ", p.param.device(), " but '", params_.front().name, "' is ",
                  first.scalar_type(), " on ", first.device());
    MEGATON_CHECK(seen.insert(p.param.unsafeGetTensorImpl()).second, UsageError, "data parallel: parameter '", p.name,
                  "' appears twice in the parameter list");
  }
  torch::NoGradGuard no_grad;
  const int64_t n = layout_.numel();
  param_buffer_ = torch::zeros({n}, first.options().requires_grad(false));
  grad_buffer_ = torch::zeros({n}, first.options().dtype(torch::kFloat32).requires_grad(false));
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i].param;
    const ParamSlot& s = layout_.slots()[i];
    param_buffer_.narrow(0, s.offset, s.numel).copy_(p.detach().reshape({-1}));
    // The leaf keeps its identity (same TensorImpl, autograd metadata, hooks); only its storage moves.
    p.set_(param_buffer_.storage(), s.offset, p.sizes(), row_major_strides(p.sizes()));
  }
  const bool sharded = options_.zero1 && dp_size_ > 1;
  shard_grad_ = sharded ? torch::zeros({layout_.shard_numel(dp_size_)}, grad_buffer_.options()) : grad_buffer_;
  shard_pieces_ = sharded ? layout_.shard_pieces(dp_rank_, dp_size_) : layout_.shard_pieces(0, 1);
  ready_.assign(layout_.buckets().size(), 0);
  started_.assign(layout_.buckets().size(), 0);
  gathers_.resize(layout_.buckets().size());
  for (size_t i = 0; i < params_.size(); ++i) {
    MEGATON_CHECK(params_[i].param.requires_grad(), UsageError, "data parallel: parameter '", params_[i].name,
                  "' does not require grad");
    auto acc = torch::autograd::impl::grad_accumulator(params_[i].param);
    MEGATON_CHECK(acc != nullptr, UsageError, "data parallel: parameter '", params_[i].name,
                  "' is not a leaf tensor (it has no gradient accumulator)");
    hook_keys_.push_back(
        acc->add_post_hook(std::make_unique<AfterAccumulateHook>([this, i] { on_grad_accumulated(i); })));
    grad_accs_.push_back(std::move(acc));
  }
}

DataParallel::~DataParallel() {
  for (size_t i = 0; i < grad_accs_.size(); ++i) grad_accs_[i]->del_post_hook(hook_keys_[i]);
}

torch::Tensor DataParallel::main_grad(size_t i) const {
  const ParamSlot& s = layout_.slots().at(i);
  return grad_buffer_.narrow(0, s.offset, s.numel).view(params_[i].param.sizes());
}

void DataParallel::on_grad_accumulated(size_t i) {
  const ParamSlot& s = layout_.slots()[i];
  // No gradient here: the layer added it to the main grad itself (gradient accumulation fusion, parallel/main_grads.h),
  // or it is zero. Either way this parameter is done for the micro-batch.
  // A main grad left to its first write still holds the last iteration's values: zeroed before anything is added.
  settle_first_write(i);
  torch::Tensor& grad = params_[i].param.mutable_grad();
  MEGATON_CHECK(!started_[s.bucket], InternalError, "data parallel: a gradient for '", params_[i].name,
                "' arrived after its bucket's reduction started; call set_last_microbatch(false) before every "
                "micro-batch but the last, and zero_grad() between iterations");
  if (grad.defined()) {
    {
      torch::NoGradGuard no_grad;
      torch::Tensor main = main_grad(i);
      accumulate_main_grad(main, grad);  // fp32 accumulation whatever the model dtype
    }
    grad.reset();  // no model-dtype copy is kept across micro-batches
  }
  if (!last_microbatch_) return;
  const Bucket& b = layout_.buckets()[s.bucket];
  if (++ready_[s.bucket] < static_cast<int>(b.params.size()) || !options_.overlap_grad_reduce) return;
  // The tied embedding's bucket waits for the embedding-group sum in finish_grad_sync.
  if (b.has_tied_embedding && groups_.embedding && groups_.embedding->size() > 1) return;
  reduce_bucket(s.bucket);
}

void DataParallel::reduce_bucket(size_t b) {
  const Bucket& bk = layout_.buckets()[b];
  started_[b] = 1;
  finish_param_gather();  // a bucket no forward read (unused parameters) is still in flight
  if (dp_size_ == 1) return;
  torch::Tensor in = grad_buffer_.narrow(0, bk.start, bk.numel);  // [bucket]
  if (options_.zero1) {
    torch::Tensor out =
        shard_grad_.narrow(0, layout_.shard_bucket_offset(static_cast<int>(b), dp_size_), bk.numel / dp_size_);
    in_flight_.push_back(groups_.dp->start_reduce_scatter(out, in, dist::ReduceOp::kAvg));  // [bucket / dp]
  } else {
    in_flight_.push_back(groups_.dp->start_all_reduce(in, dist::ReduceOp::kAvg));
  }
}

void DataParallel::reduce_tied_embedding() {
  if (tied_reduced_) return;
  tied_reduced_ = true;
  if (!groups_.embedding || groups_.embedding->size() == 1) return;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].tied_embedding) continue;
    torch::Tensor g = main_grad(i);
    groups_.embedding->all_reduce(g, dist::ReduceOp::kSum);
  }
}

void DataParallel::start_grad_sync() {
  for (MainGrads* t : first_write_) t->zero_unwritten();  // main grads that got no gradient at all
  reduce_tied_embedding();
  for (size_t b = 0; b < started_.size(); ++b)
    if (!started_[b]) reduce_bucket(b);
}

void DataParallel::finish_grad_sync() {
  start_grad_sync();
  for (auto& w : in_flight_) w->wait();
  in_flight_.clear();
  finish_param_gather();
}

void DataParallel::attach(MainGrads& table) {
  first_write_.push_back(&table);
  zeroed_versions_.clear();  // rebuild zeroed_views_
}

void DataParallel::settle_first_write(size_t i) {
  for (MainGrads* t : first_write_)
    if (t->zero_if_unwritten(layout_.slots()[i].offset)) return;
}

const std::vector<torch::Tensor>& DataParallel::zeroed_views() {
  std::vector<uint64_t> versions;
  for (const MainGrads* t : first_write_) versions.push_back(t->version());
  if (versions == zeroed_versions_) return zeroed_views_;
  std::vector<std::pair<int64_t, int64_t>> skip;  // [begin, end) registered ranges of every table
  for (const MainGrads* t : first_write_)
    for (const auto& r : t->ranges()) skip.push_back(r);
  std::sort(skip.begin(), skip.end());
  zeroed_views_.clear();
  int64_t pos = 0;
  for (const auto& [begin, end] : skip) {
    if (begin > pos) zeroed_views_.push_back(grad_buffer_.narrow(0, pos, begin - pos));
    pos = std::max(pos, end);
  }
  if (pos < grad_buffer_.numel()) zeroed_views_.push_back(grad_buffer_.narrow(0, pos, grad_buffer_.numel() - pos));
  zeroed_versions_ = std::move(versions);
  return zeroed_views_;
}

void DataParallel::zero_grad() {
  torch::NoGradGuard no_grad;
  if (first_write_.empty()) {
    grad_buffer_.zero_();
  } else {
    // Everything but the registered main grads, in one multi-tensor launch on CUDA; those wait for their first write.
    const std::vector<torch::Tensor>& views = zeroed_views();
    if (!views.empty()) at::_foreach_zero_(views);
    for (MainGrads* t : first_write_) t->begin_step();
  }
  if (!shard_grad_.is_same(grad_buffer_)) shard_grad_.zero_();
  for (auto& p : params_) p.param.mutable_grad().reset();
  MEGATON_CHECK(in_flight_.empty(), InternalError,
                "data parallel: zero_grad() while gradient reductions are in flight; call finish_grad_sync() first");
  std::fill(ready_.begin(), ready_.end(), 0);
  std::fill(started_.begin(), started_.end(), 0);
  tied_reduced_ = false;
}

void DataParallel::accumulate_param_grads() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& g = params_[i].param.mutable_grad();
    if (!g.defined()) continue;
    settle_first_write(i);
    torch::Tensor main = main_grad(i);
    accumulate_main_grad(main, g);
    g.reset();
  }
}

void DataParallel::all_gather_params(const torch::Tensor& shard) {
  finish_param_gather();
  all_gather_into(param_buffer_, shard);
}

void DataParallel::start_param_gather(const torch::Tensor& shard) {
  finish_param_gather();
  if (shard_is_whole()) {
    all_gather_into(param_buffer_, shard);
    return;
  }
  MEGATON_ASSERT(shard.dim() == 1 && shard.numel() == shard_numel(), "shard of ", shard.numel(), " elements, expected ",
                 shard_numel());
  torch::NoGradGuard no_grad;
  gather_source_ = shard.to(param_buffer_.scalar_type()).contiguous();  // [S] model dtype
  // The layout is in reverse parameter order: the forward reads the last bucket first.
  const auto& buckets = layout_.buckets();
  for (size_t b = buckets.size(); b-- > 0;) {
    const int64_t len = buckets[b].numel / dp_size_;
    torch::Tensor in = gather_source_.narrow(0, layout_.shard_bucket_offset(static_cast<int>(b), dp_size_), len);
    torch::Tensor out = param_buffer_.narrow(0, buckets[b].start, buckets[b].numel);  // [bucket]
    gathers_[b] = groups_.dp->start_all_gather(out, in);
    ++gathers_pending_;
  }
}

void DataParallel::wait_param_gather(size_t begin, size_t end) {
  if (gathers_pending_ == 0) return;
  MEGATON_ASSERT(begin <= end && end <= params_.size(), "parameters [", begin, ", ", end, ") of ", params_.size());
  for (size_t i = begin; i < end; ++i) {
    dist::WorkPtr& w = gathers_[static_cast<size_t>(layout_.slots()[i].bucket)];
    if (!w) continue;
    w->wait();
    w.reset();
    --gathers_pending_;
  }
  if (gathers_pending_ == 0) gather_source_ = torch::Tensor();
}

void DataParallel::finish_param_gather() {
  if (gathers_pending_ == 0) return;
  wait_param_gather(0, params_.size());
}

void DataParallel::all_gather_into(torch::Tensor& full, const torch::Tensor& shard) const {
  MEGATON_ASSERT(shard.dim() == 1 && shard.numel() == shard_numel(), "shard of ", shard.numel(), " elements, expected ",
                 shard_numel());
  MEGATON_ASSERT(full.dim() == 1 && full.numel() == layout_.numel() && full.is_contiguous(), "full buffer of ",
                 full.numel(), " elements, expected ", layout_.numel());
  torch::NoGradGuard no_grad;
  if (shard_is_whole()) {
    if (!shard.is_same(full)) full.copy_(shard);
    return;
  }
  const auto& buckets = layout_.buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t len = buckets[b].numel / dp_size_;
    torch::Tensor in = shard.narrow(0, layout_.shard_bucket_offset(static_cast<int>(b), dp_size_), len)
                           .to(full.scalar_type())
                           .contiguous();                                    // [bucket / dp]
    torch::Tensor out = full.narrow(0, buckets[b].start, buckets[b].numel);  // [bucket]
    groups_.dp->all_gather(out, in);
  }
}

torch::Tensor DataParallel::shard_of(const torch::Tensor& full) const {
  MEGATON_ASSERT(full.dim() == 1 && full.numel() == layout_.numel(), "full buffer of ", full.numel(),
                 " elements, expected ", layout_.numel());
  if (shard_is_whole()) return full.clone();
  torch::Tensor shard = torch::empty({shard_numel()}, full.options());  // [S]
  const auto& buckets = layout_.buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t len = buckets[b].numel / dp_size_;
    shard.narrow(0, layout_.shard_bucket_offset(static_cast<int>(b), dp_size_), len)
        .copy_(full.narrow(0, buckets[b].start + dp_rank_ * len, len));
  }
  return shard;
}

int DataParallel::buckets_started() const {
  int n = 0;
  for (char s : started_) n += s;
  return n;
}

void DataParallel::average_tp_replicated_grads(dist::Communicator& tp) {
  if (tp.size() == 1) return;
  std::vector<torch::Tensor> views;  // this rank's shard pieces of TP-replicated parameters, in layout order
  for (const auto& piece : shard_pieces_)
    if (params_[piece.param].tp_replicated()) views.push_back(shard_grad_.narrow(0, piece.buffer_offset, piece.numel));
  if (views.empty()) return;
  torch::Tensor packed = torch::cat(views);  // [n] fp32
  tp.all_reduce(packed, dist::ReduceOp::kAvg);
  int64_t off = 0;
  for (auto& v : views) {
    v.copy_(packed.narrow(0, off, v.numel()));
    off += v.numel();
  }
}

}  // namespace megaton::parallel
