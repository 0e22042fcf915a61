// bitsandbytes' blockwise 8-bit Adam (bnb.optim.Adam8bit with its defaults: what the fork's --use-bnb-optimizer runs)
// over the optimizer's flat fp32 shard [S].
//
// State: each parameter with at least kMin8bitSize elements (and not ParamInfo::fp32_optimizer_state) keeps exp_avg
// and exp_avg_sq as uint8 codes in blocks of kBlock elements counted from the parameter's first element, each block
// with its fp32 absmax; the codes index bitsandbytes' dynamic maps (dynamic_map.h): signed for exp_avg, unsigned for
// exp_avg_sq. 2 bytes per element plus 8 per block instead of 8. The other parameters keep fp32 moments.
// Under ZeRO-1 a block that a shard boundary cuts is two blocks, one on each rank.
//
// Step, per element (bitsandbytes' kernels; on CUDA one kernel, elsewhere ATen ops: the same moments bit for bit): m =
// m*b1 + (1-b1)*g; v = v*b2 + (1-b2)*g^2 (m, v read from the codes); p += -lr*sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) +
// eps*sqrt(1-b2^t)); then p *= 1 - lr*wd where weight decay applies. Each block's new absmax is max |m| (max v) over
// the block, and the new m, v are stored as codes of m/absmax.
//
// Checkpoints hold the moments dequantized to fp32 (exp_avg(), exp_avg_sq()), so they reshard and load into either
// optimizer. load() finds for each block the absmax and codes that give back exactly the saved values when they came
// from this layout (resume continues bit for bit); other values (another layout, or fp32 Adam's moments) are
// quantized once.
#pragma once
#include <torch/torch.h>

#include <vector>

#include "optim/adam_step.h"
#include "optim/flat_runs.h"
#include "parallel/data/data_parallel_layout.h"
#include "parallel/param_info.h"

namespace megaton::optim {

class BlockwiseAdam8bit {
 public:
  static constexpr int64_t kBlock = 2048;        // bitsandbytes' blocksize of its 2-state blockwise optimizers
  static constexpr int64_t kMin8bitSize = 4096;  // bnb's min_8bit_size: smaller parameters keep fp32 moments
  static constexpr int64_t kChunkBlocks = 4096;  // blocks per batch of ATen ops (bounds the temporaries: 8 Mi)

  /// `pieces`: the parameters' pieces in the shard [S] (DataParallel::shard_pieces). `options`: the shard's device.
  BlockwiseAdam8bit(const std::vector<parallel::ParamPiece>& pieces, const parallel::ParamList& params,
                    int64_t shard_numel, const torch::TensorOptions& options);

  /// One step on master [S] fp32 (in place) from grad [S] fp32 (already unscaled and clipped); s.hyper's lr, betas,
  /// eps, weight decay and bias corrections (s.device_grad_scale must be undefined).
  void step(const torch::Tensor& master, const torch::Tensor& grad, const AdamScalars& s);

  /// [S] fp32: the moments as the update reads them (0 outside parameters).
  torch::Tensor exp_avg() const { return dequantized(0); }
  torch::Tensor exp_avg_sq() const { return dequantized(1); }
  /// Sets the moments from [S] fp32 values (see the header comment).
  void load(const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq);

  /// Elements with 8-bit moments, and their blocks.
  int64_t quantized_numel() const { return quantized_numel_; }
  int64_t num_blocks() const { return static_cast<int64_t>(block_start_host_.size()); }
  /// Bytes of state held (codes, absmax, fp32 moments).
  int64_t state_bytes() const;

 private:
  struct Chunk {
    torch::Tensor index;  // [b, kBlock] int64: shard offsets (0 in padding lanes)
    torch::Tensor valid;  // [b, kBlock] bool
    int64_t first = 0, count = 0;
  };
  Chunk chunk(int64_t first) const;
  /// [b, kBlock] fp32: the moment `which` (0: exp_avg, 1: exp_avg_sq) of the chunk's blocks, map[code] * absmax.
  torch::Tensor block_moments(int which, const Chunk& c) const;
  /// The quantized blocks' update: ATen ops in batches of kChunkBlocks (any device), or on CUDA in a CUDA build one
  /// kernel (kernels/adam8bit_kernels.cu, the same bits).
  void step_quantized_aten(const torch::Tensor& master, const torch::Tensor& grad, const AdamScalars& s);
#ifdef MEGATON_HAVE_CUDA
  void step_quantized_cuda(const torch::Tensor& master, const torch::Tensor& grad, const AdamScalars& s);
#endif
  torch::Tensor dequantized(int which) const;
  void step_fp32(const torch::Tensor& master, const torch::Tensor& grad, const AdamScalars& s);
  std::vector<torch::Tensor> fp32_views(int which) const;

  std::vector<int64_t> block_start_host_;
  torch::Tensor block_start_;                     // [B] int64: shard offset of each block
  torch::Tensor block_len_;                       // [B] int64: 1..kBlock
  torch::Tensor block_decay_;                     // [B] bool: weight decay applies
  torch::Tensor codes_[2];                        // [B, kBlock] uint8: exp_avg (signed map), exp_avg_sq (unsigned map)
  torch::Tensor absmax_[2];                       // [B] fp32
  torch::Tensor map_[2];                          // [256] fp32
  torch::Tensor lanes_;                           // [kBlock] int64
  std::vector<Run> fp32_runs_, fp32_decay_runs_;  // shard runs with fp32 moments (all; those with weight decay)
  torch::Tensor fp32_[2];                         // [sum of fp32_runs_] fp32: exp_avg, exp_avg_sq, run after run
  int64_t shard_numel_ = 0;
  int64_t quantized_numel_ = 0;
};

}  // namespace megaton::optim
