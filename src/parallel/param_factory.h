// Creates the parameters of one model shard and records them as a ParamList (param_info.h). A layer asks for a
// parameter by canonical name, global canonical shape and split dimension; the factory draws this rank's shard with
// init_shard (layout-independent values), reshapes it to the layer's working shape (a contiguous view of the
// canonical shard: fused QKV [heads/tp, 3, head_dim, h] is used as [3*h/tp, h]), converts it to the training
// dtype/device and marks it a leaf that requires grad.
#pragma once
#include <torch/torch.h>

#include <string>
#include <vector>

#include "ops/fp8/fp8_scaling.h"
#include "parallel/data/main_grads.h"
#include "parallel/param_info.h"
#include "parallel/sharded_init.h"

namespace megaton::parallel {

struct ParamRequest {
  std::string name;                   // canonical, global layer numbers
  std::vector<int64_t> global_shape;  // canonical layout
  int partition_dim = -1;             // -1: replicated over TP
  std::vector<int64_t> local_shape;   // working shape of the shard; empty: the canonical shard shape
  InitSpec init;
  int64_t global_unpadded_rows = 0;  // vocabulary rows that are real (word embeddings only)
  bool no_weight_decay = false;
  bool tied_embedding = false;
  bool fp32_optimizer_state = false;  // ParamInfo::fp32_optimizer_state
  double lr_scale = 1.0;              // ParamInfo::lr_scale
};

class ParamFactory {
 public:
  ParamFactory(uint64_t seed, int tp_rank, int tp_size, torch::ScalarType dtype, torch::Device device)
      : seed_(seed), tp_rank_(tp_rank), tp_size_(tp_size), dtype_(dtype), device_(device) {}

  /// The new leaf parameter (also appended to params()).
  torch::Tensor make(const ParamRequest& r);

  const ParamList& params() const { return params_; }
  ParamList& params() { return params_; }
  int tp_rank() const { return tp_rank_; }
  int tp_size() const { return tp_size_; }
  torch::ScalarType dtype() const { return dtype_; }
  torch::Device device() const { return device_; }
  /// The main-grad table shared with the layers built from this factory (empty until the trainer binds it).
  const MainGradsPtr& main_grads() const { return main_grads_; }
  /// The FP8 scaling table the linear layers built from this factory register in (--fp8-format), or null.
  ops::fp8::ScalingTable* fp8_table() const { return fp8_table_.get(); }
  void set_fp8_table(std::shared_ptr<ops::fp8::ScalingTable> table) { fp8_table_ = std::move(table); }

 private:
  uint64_t seed_;
  int tp_rank_, tp_size_;
  torch::ScalarType dtype_;
  torch::Device device_;
  ParamList params_;
  MainGradsPtr main_grads_ = std::make_shared<MainGrads>();
  std::shared_ptr<ops::fp8::ScalingTable> fp8_table_;
};

}  // namespace megaton::parallel
