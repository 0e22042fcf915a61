// Where each parameter's fp32 main gradient lives once DataParallel has moved the parameters into its flat buffer:
// the layers that write weight gradients straight into it (gradient accumulation fusion, Megatron-LM's
// --gradient-accumulation-fusion: the weight-gradient GEMM accumulates into the fp32 main grad, so no model-dtype
// gradient is written, read back and added) ask here in their forward. Shared by a model chunk's ParamFactory and its
// layers; empty (nothing fused) until the trainer binds DataParallel's buffers.
//
// First write: every main grad handed out is registered (its range of the buffer and a CPU flag). DataParallel, to
// which the trainer attaches this table, does not zero the registered ranges between iterations but marks them
// (begin_step): the next weight gradient then overwrites instead of adding (GEMM beta 0; ops::MainGrad), which saves
// the zeroing pass and the GEMM's read of the old values (per 1.3B step: 5.3 GB written, 5.3 GB read). A registered
// main grad that gets its gradient some other way (an autograd .grad, through DataParallel's hook) or none at all is
// zeroed first by zero_if_unwritten / zero_unwritten, before anything reads or adds to it.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "ops/linear.h"

namespace megaton::parallel {

class MainGrads {
 public:
  /// params [N]: the flat buffer holding the parameters' storage; grads [N] fp32: their main grads, same offsets.
  void bind(const torch::Tensor& params, const torch::Tensor& grads);
  /// `param`'s main grad (fp32, param's shape, a view into the grads buffer) with its overwrite flag, registering it;
  /// undefined when nothing is bound or param does not live in the bound buffer.
  ops::MainGrad of(const torch::Tensor& param);

  /// [offset, offset + numel) of every registered main grad in the buffer, by offset.
  std::vector<std::pair<int64_t, int64_t>> ranges() const;
  /// Bumped whenever a main grad is registered (a cache of ranges() is stale when it changed).
  uint64_t version() const { return version_; }
  /// The registered main grads were not zeroed for the coming iteration: each one's next gradient overwrites it.
  void begin_step();
  /// If the main grad starting at `offset` is registered and still waiting for its first write, zeroes it and clears
  /// the flag (its gradient comes through DataParallel's hook, or not at all). True when it was registered.
  bool zero_if_unwritten(int64_t offset);
  /// zero_if_unwritten for every registered main grad (before the gradients are reduced or read).
  void zero_unwritten();

 private:
  struct Entry {
    int64_t numel;
    torch::Tensor overwrite;  // CPU bool [1]
  };
  /// Zeroes the main grad at `offset` and clears its flag if it is still waiting for its first write.
  void settle(int64_t offset, Entry& e);
  torch::Tensor params_, grads_;
  std::map<int64_t, Entry> registered_;  // by offset into the buffer
  uint64_t version_ = 0;
};

using MainGradsPtr = std::shared_ptr<MainGrads>;

}  // namespace megaton::parallel
