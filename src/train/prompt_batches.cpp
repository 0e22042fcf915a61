#include "train/prompt_batches.h"

#include <algorithm>

#include "core/error.h"
#include "data/document_positions.h"
#include "data/packed_mtf.h"
#include "data/prefix_lm.h"
#include "data/python_random.h"

namespace megaton::train {

namespace {

// One micro-batch's host tensors, pinned on a GPU run so the uploads are asynchronous, and the micro-batch made of
// them.
struct HostBatch {
  torch::Tensor samples, loss, position, document, prefix;  // [b, S + 1] int64; [b, s] fp32, int64, int64, bool
  HostBatch(int64_t b, int64_t stored, int64_t s, bool cuda) {
    const auto make = [&](std::vector<int64_t> shape, torch::ScalarType t) {
      return torch::empty(shape, torch::TensorOptions().dtype(t).pinned_memory(cuda));
    };
    samples = make({b, stored + 1}, torch::kInt64);
    loss = make({b, s}, torch::kFloat32);
    position = make({b, s}, torch::kInt64);
    document = make({b, s}, torch::kInt64);
    prefix = make({b, s}, torch::kBool);
  }
  /// tokens and labels from the samples' first s + 1 tokens; position ids and prefixes only where asked.
  model::MicroBatch micro_batch(int64_t s, torch::Device d, bool positions, bool prefixes) const {
    const auto up = [&](const torch::Tensor& t) { return d.is_cuda() ? t.to(d, t.scalar_type(), true) : t; };
    const torch::Tensor on_device = up(samples);
    model::MicroBatch mb;
    mb.tokens = on_device.narrow(1, 0, s).contiguous();  // [b, s]
    mb.labels = on_device.narrow(1, 1, s).contiguous();  // [b, s]
    mb.loss_mask = up(loss);                             // [b, s]
    if (positions) mb.position_ids = up(position);
    mb.documents = ops::Documents(document, d, prefixes ? prefix : torch::Tensor());
    return mb;
  }
};

model::MicroBatch prefix_lm_batch(const data::SampleDataset& ds, const std::vector<int64_t>& indices, int64_t s,
                                  const BatchOptions& o) {
  const int64_t b = static_cast<int64_t>(indices.size()), stored = ds.seq_length();
  HostBatch h(b, stored, s, o.device.is_cuda());
  data::PrefixLmOptions po;
  po.reset_position_ids = o.reset_position_ids;
  po.reset_attention_mask = o.reset_attention_mask;
  po.eod_mask_loss = o.eod_mask_loss;
  po.loss_on_targets_only = o.loss_on_targets_only;
  po.reweight_loss = o.reweight_loss;
  po.attention_matrix = false;
  std::vector<int64_t> scratch(static_cast<size_t>(s));
  for (int64_t i = 0; i < b; ++i) {
    int64_t* row = h.samples.data_ptr<int64_t>() + i * (stored + 1);
    ds.get(indices[static_cast<size_t>(i)], row);
    const std::vector<int64_t> tokens(row, row + s);
    data::PythonRandom rng((static_cast<uint64_t>(o.seed) << 32) + static_cast<uint64_t>(indices[size_t(i)]));
    const std::vector<int64_t> split = data::prefix_lm_indices(tokens, o.eod, o.reset_attention_mask, rng);
    const data::PrefixLmMasks m = data::prefix_lm_masks(tokens, o.eod, split, po);
    const std::vector<uint8_t> in = data::prefix_lm_prefix_tokens(tokens, o.eod, split, o.reset_attention_mask);
    std::copy(m.loss_mask.begin(), m.loss_mask.end(), h.loss.data_ptr<float>() + i * s);
    std::copy(m.position_ids.begin(), m.position_ids.end(), h.position.data_ptr<int64_t>() + i * s);
    std::copy(in.begin(), in.end(), h.prefix.data_ptr<bool>() + i * s);
    int64_t* doc = h.document.data_ptr<int64_t>() + i * s;
    if (o.reset_attention_mask)
      data::document_positions(tokens.data(), s, o.eod, scratch.data(), doc);
    else
      std::fill(doc, doc + s, 0);
  }
  return h.micro_batch(s, o.device, o.reset_position_ids, /*prefixes=*/true);
}

model::MicroBatch packed_batch(const data::SampleDataset& ds, const std::vector<int64_t>& indices, int64_t s,
                               const BatchOptions& o) {
  MEGATON_CHECK(ds.packed(), InternalError, "a packed-prompt objective over unpacked samples");
  MEGATON_CHECK(o.pad >= 0, InternalError, "packed prompts without a padding id");
  const int64_t b = static_cast<int64_t>(indices.size()), stored = ds.seq_length();
  const bool non_causal = o.objective == data::Objective::kPackedMtfNonCausal;
  HostBatch h(b, stored, s, o.device.is_cuda());
  std::vector<int64_t> segment(static_cast<size_t>(stored + 1));
  std::vector<uint8_t> is_inputs(static_cast<size_t>(stored + 1));
  for (int64_t i = 0; i < b; ++i) {
    int64_t* row = h.samples.data_ptr<int64_t>() + i * (stored + 1);
    ds.get_packed(indices[static_cast<size_t>(i)], row, segment.data(), is_inputs.data());
    float* lm = h.loss.data_ptr<float>() + i * s;
    int64_t* pos = h.position.data_ptr<int64_t>() + i * s;
    int64_t* doc = h.document.data_ptr<int64_t>() + i * s;
    bool* pre = h.prefix.data_ptr<bool>() + i * s;
    for (int64_t t = 0; t < s; ++t) {
      const int64_t token = row[t], label = row[t + 1];
      const bool target_label = is_inputs[static_cast<size_t>(t + 1)] == 0;
      bool counts = !(o.eod_mask_loss && token == o.eod);
      if (non_causal)  // finetune_t0_non_causal_decoder.py: targets only, no loss where the input token is padding
        counts = counts && target_label && token != o.pad;
      else  // finetune_t0.py: no loss where the label is padding; targets only on request
        counts = counts && label != o.pad && (!o.loss_on_targets_only || target_label);
      lm[t] = counts ? 1.0f : 0.0f;
      // Segments 1, 2, ... then padding (0): padding becomes one last document of its own, so that the ids never
      // decrease along the row; no other token attends to it, and its loss is masked.
      const int64_t seg = segment[static_cast<size_t>(t)];
      doc[t] = seg == 0 ? stored + 1 : seg;
      pos[t] = t > 0 && doc[t] == doc[t - 1] ? pos[t - 1] + 1 : 0;
      pre[t] = non_causal && seg != 0 && is_inputs[static_cast<size_t>(t)] != 0;
    }
  }
  if (o.norm_target_loss) normalize_per_target(h.loss.data_ptr<float>(), b * s);
  return h.micro_batch(s, o.device, o.absolute_positions, /*prefixes=*/non_causal);
}

}  // namespace

model::MicroBatch make_prompt_micro_batch(const data::SampleDataset& ds, const std::vector<int64_t>& indices, int64_t s,
                                          const BatchOptions& o) {
  switch (o.objective) {
    case data::Objective::kPrefixLm:
      return prefix_lm_batch(ds, indices, s, o);
    case data::Objective::kPackedMtf:
    case data::Objective::kPackedMtfNonCausal:
      return packed_batch(ds, indices, s, o);
    case data::Objective::kCausalLm:
      break;
  }
  throw InternalError("make_prompt_micro_batch for the causal objective");
}

void normalize_per_target(float* mask, int64_t n) {
  for (int64_t start = 0; start < n;) {
    int64_t end = start + 1;
    while (end < n && mask[end] == mask[start]) ++end;
    const float len = static_cast<float>(end - start);
    for (int64_t k = start; k < end; ++k) mask[k] /= len;
    start = end;
  }
}

}  // namespace megaton::train
