// Data-parallel gradients (Megatron's local DDP / Megatron-Core's DistributedDataParallel, over our Communicator).
//
// At construction the parameters are moved into one flat buffer of the model dtype (each ParamInfo::param becomes a
// view of it, keeping its identity as an autograd leaf) and a flat fp32 "main grad" buffer of the same layout is
// allocated (BufferLayout: reverse parameter order, buckets of --dp-bucket-size-mb). A hook on every parameter's
// gradient accumulator (Megatron's grad_acc.register_hook) adds each micro-batch's .grad into its fp32 main grad and
// drops .grad, so gradients accumulate in fp32 whatever the model dtype and no model-dtype copy is kept.
//
// Per iteration:
//     dp.zero_grad();
//     for each micro-batch: dp.set_last_microbatch(i == n - 1); loss.backward();
//     dp.finish_grad_sync();     // every bucket reduced; tied embedding summed over the embedding group
//     optimizer.step();          // reads dp.shard_grad(), writes dp.param_buffer()
//
// With overlap on (--overlap-grad-reduce, the default), the hook that completes a bucket during the last micro-batch's
// backward starts that bucket's reduction at once (Communicator::start_*: on NCCL, on the group's communication
// stream beside the rest of backward; on MPI, a posted non-blocking collective), and finish_grad_sync waits for them
// all. With overlap off, every bucket is started and waited for in finish_grad_sync.
// Reduction: all-reduce (average) over the DP group; under ZeRO-1 a reduce-scatter (average) of each bucket, so each DP
// rank ends with the reduced gradients of its shard only (shard_grad()), and all_gather_params() brings the updated
// shards back into every rank's parameters.
// With --overlap-param-gather (ZeRO-1, the default there) the optimizer calls start_param_gather() instead: every
// bucket's all-gather is started at once, in the order the forward uses them, and the forward waits for a bucket just
// before it reads the bucket's first parameter (wait_param_gather, called by the model's pre-use hook,
// model::GptStage::set_before_use). Anything else that reads the parameters calls finish_param_gather() first.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "dist/process_groups.h"
#include "parallel/data/data_parallel_layout.h"
#include "parallel/data/main_grads.h"
#include "parallel/param_info.h"

namespace megaton::parallel {

struct DataParallelOptions {
  /// --dp-bucket-size-mb: bucket size in MiB of fp32 gradients; <= 0 puts everything in one bucket.
  double bucket_size_mb = 25.0;
  /// --overlap-grad-reduce: start a bucket's reduction from the backward hook as soon as its gradients are ready (last
  /// micro-batch only).
  bool overlap_grad_reduce = true;
  /// --overlap-param-gather: under ZeRO-1, the optimizer only starts the updated shards' all-gather
  /// (start_param_gather); whoever reads the parameters next must wait for them. Off here, on in the trainer (which
  /// installs the model's waits).
  bool overlap_param_gather = false;
  /// --zero-stage 1: reduce-scatter gradients into DP shards; the optimizer keeps state for its shard only.
  bool zero1 = false;
};

class DataParallel {
 public:
  /// Takes the parameters' storage into its flat buffer (values preserved). All parameters must share one dtype and
  /// one device. `groups` must outlive this object.
  DataParallel(const ParamList& params, const dist::ProcessGroups& groups, DataParallelOptions options);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  const ParamList& params() const { return params_; }
  const BufferLayout& layout() const { return layout_; }
  const DataParallelOptions& options() const { return options_; }
  bool zero1() const { return options_.zero1; }
  int dp_rank() const { return dp_rank_; }
  int dp_size() const { return dp_size_; }

  /// [N] model dtype: every parameter is a view of this buffer (padding elements are zero).
  const torch::Tensor& param_buffer() const { return param_buffer_; }
  /// [N] fp32 main grads; main_grad(i) is parameter i's view, shaped like the parameter.
  const torch::Tensor& grad_buffer() const { return grad_buffer_; }
  torch::Tensor main_grad(size_t i) const;
  /// [S] fp32: after finish_grad_sync, the reduced gradients of this rank's shard (S = N / DP under ZeRO-1, where it
  /// is its own buffer; without ZeRO it is grad_buffer() itself, S = N).
  const torch::Tensor& shard_grad() const { return shard_grad_; }
  int64_t shard_numel() const { return shard_grad_.numel(); }
  /// Pieces of each parameter inside this rank's shard (offsets into shard buffers).
  const std::vector<ParamPiece>& shard_pieces() const { return shard_pieces_; }

  /// Zeroes the main grads (and the shard buffer), drops the parameters' .grad, resets bucket readiness. The main
  /// grads registered in an attached MainGrads table are not zeroed but marked for a first write
  /// (MainGrads::begin_step).
  void zero_grad();
  /// Gradient accumulation fusion's table of main grads (parallel/main_grads.h, bound to this object's buffers): its
  /// registered main grads are left to their first write each iteration; one that receives its gradient through the
  /// hooks, or none, is zeroed first. `table` must outlive this object.
  void attach(MainGrads& table);
  /// Tells the hooks whether the coming backward is the last micro-batch (only then do they start reductions).
  void set_last_microbatch(bool last) { last_microbatch_ = last; }
  /// Starts the reduction of every bucket not yet started.
  void start_grad_sync();
  /// Sums the tied embedding's grads over the embedding group, starts what is left and waits for every bucket's
  /// reduction: after it, the reduced gradients may be read (on a GPU: by work queued on the current stream).
  void finish_grad_sync();
  /// --sync-tp-duplicated-parameters: after finish_grad_sync, replaces the reduced gradient of every TP-replicated
  /// parameter (ParamInfo::tp_replicated: LayerNorms, row-parallel biases, positions) in this rank's shard by its
  /// average over `tp`, so the replicas' fp32 masters and weights take identical steps and cannot drift apart.
  /// Collective over `tp`; every TP rank has the same buffer layout (same parameters, evenly split).
  void average_tp_replicated_grads(dist::Communicator& tp);
  /// Adds each parameter's .grad (if any) into its main grad and drops .grad: for gradients produced outside the
  /// hooks (e.g. assigned by hand). The hooks already do this during backward.
  void accumulate_param_grads();

  /// Writes a shard [S] (fp32 or model dtype) into the parameters: under ZeRO-1 all-gathers the shards of every DP
  /// rank (bucket by bucket); otherwise copies the whole buffer.
  void all_gather_params(const torch::Tensor& shard);
  /// Whether the optimizer starts the parameters' all-gather instead of waiting for it: --overlap-param-gather with a
  /// shard that is not the whole buffer.
  bool overlaps_param_gather() const { return options_.overlap_param_gather && !shard_is_whole(); }
  /// Starts writing a shard [S] (fp32 or model dtype) into the parameters, as all_gather_params, without waiting:
  /// each bucket's all-gather is started (the bucket the forward reads first, first). The parameters may be read only
  /// after wait_param_gather for them or finish_param_gather. A plain copy, done at once, when shard_is_whole().
  void start_param_gather(const torch::Tensor& shard);
  /// Waits for the all-gathers of the buckets holding parameters [begin, end) of params() (a no-op for those done).
  void wait_param_gather(size_t begin, size_t end);
  /// Waits for every all-gather still in flight.
  void finish_param_gather();
  /// Whether some bucket's parameter all-gather has not been waited for.
  bool param_gather_pending() const { return gathers_pending_ > 0; }

  /// [N] <- every DP rank's [S] shard (collective over DP under ZeRO-1; a plain copy otherwise). `full` keeps its
  /// dtype.
  void all_gather_into(torch::Tensor& full, const torch::Tensor& shard) const;
  /// [S] copy of this rank's shard of a full [N] buffer (the whole buffer, copied, without ZeRO-1).
  torch::Tensor shard_of(const torch::Tensor& full) const;
  /// True when this rank's shard is the whole buffer (no ZeRO-1, or DP = 1).
  bool shard_is_whole() const { return !options_.zero1 || dp_size_ == 1; }

  /// Buckets whose reduction has started in the current iteration (tests and diagnostics).
  int buckets_started() const;

 private:
  void on_grad_accumulated(size_t i);
  /// Zeroes parameter i's main grad if an attached table still waits for its first write.
  void settle_first_write(size_t i);
  /// The main-grad ranges zero_grad zeroes: everything outside the attached tables' registered ranges.
  const std::vector<torch::Tensor>& zeroed_views();
  void reduce_bucket(size_t b);
  void reduce_tied_embedding();

  ParamList params_;
  const dist::ProcessGroups& groups_;
  DataParallelOptions options_;
  int dp_rank_ = 0, dp_size_ = 1;
  BufferLayout layout_;
  torch::Tensor param_buffer_;  // [N] model dtype
  torch::Tensor grad_buffer_;   // [N] fp32
  torch::Tensor shard_grad_;    // [S] fp32 (aliases grad_buffer_ without ZeRO-1 or with DP = 1)
  std::vector<ParamPiece> shard_pieces_;
  std::vector<int> ready_;                // per bucket: parameters whose last-micro-batch grad has arrived
  std::vector<char> started_;             // per bucket
  std::vector<dist::WorkPtr> in_flight_;  // reductions started and not yet waited for
  std::vector<dist::WorkPtr> gathers_;    // per bucket: its parameter all-gather, until waited for
  int gathers_pending_ = 0;
  torch::Tensor gather_source_;  // [S] model dtype: the shard the gathers in flight read
  std::vector<std::shared_ptr<torch::autograd::Node>> grad_accs_;  // kept alive: they carry our hooks
  std::vector<uintptr_t> hook_keys_;
  bool last_microbatch_ = true;
  bool tied_reduced_ = false;
  std::vector<MainGrads*> first_write_;      // attached tables
  std::vector<torch::Tensor> zeroed_views_;  // [pieces] of grad_buffer_, for the versions below
  std::vector<uint64_t> zeroed_versions_;    // each attached table's version() when zeroed_views_ was built
};

}  // namespace megaton::parallel
