#include "train/batches.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "data/document_positions.h"
#include "train/prompt_batches.h"

namespace megaton::train {

model::MicroBatch make_micro_batch(const data::SampleDataset& ds, const std::vector<int64_t>& indices,
                                   const BatchOptions& o) {
  const int64_t b = static_cast<int64_t>(indices.size()), stored = ds.seq_length();
  const int64_t s = o.seq_length > 0 ? std::min(o.seq_length, stored) : stored;  // tokens used of each sample
  MEGATON_CHECK(b > 0, InternalError, "empty micro-batch");
  if (o.objective != data::Objective::kCausalLm) return make_prompt_micro_batch(ds, indices, s, o);
  // Pinned on a GPU run, so the one upload below is asynchronous: the host goes on queueing work meanwhile.
  const bool cuda = o.device.is_cuda();
  torch::Tensor samples =
      torch::empty({b, stored + 1}, torch::TensorOptions().dtype(torch::kInt64).pinned_memory(cuda));  // [b, S + 1]
  int64_t* p = samples.data_ptr<int64_t>();
  for (int64_t i = 0; i < b; ++i) ds.get(indices[static_cast<size_t>(i)], p + i * (stored + 1));
  const torch::Tensor on_device = cuda ? samples.to(o.device, torch::kInt64, /*non_blocking=*/true) : samples;
  model::MicroBatch mb;
  mb.tokens = on_device.narrow(1, 0, s).contiguous();  // [b, s]
  mb.labels = on_device.narrow(1, 1, s).contiguous();  // [b, s]
  mb.loss_mask = o.eod_mask_loss && o.eod >= 0
                     ? (mb.tokens != o.eod).to(torch::kFloat32)
                     : torch::ones({b, s}, torch::TensorOptions().device(o.device));  // [b, s]
  if (!o.reset_position_ids && !o.reset_attention_mask) return mb;

  MEGATON_CHECK(o.eod >= 0, UsageError,
                "--reset-position-ids / --reset-attention-mask need a tokenizer (its end-of-document id)");
  const auto host = torch::TensorOptions().dtype(torch::kInt64).pinned_memory(cuda);
  torch::Tensor position = torch::empty({b, s}, host), document = torch::empty({b, s}, host);  // [b, s] each
  // Each sample's first s tokens: positions inside their documents, and the documents' indices.
  bool boundary = false;
  for (int64_t i = 0; i < b; ++i)
    boundary = data::document_positions(p + i * (stored + 1), s, o.eod, position.data_ptr<int64_t>() + i * s,
                                        document.data_ptr<int64_t>() + i * s) ||
               boundary;
  if (o.reset_position_ids) mb.position_ids = cuda ? position.to(o.device, torch::kInt64, true) : position;
  if (o.reset_attention_mask && boundary) mb.documents = ops::Documents(document, o.device);
  return mb;
}

}  // namespace megaton::train
