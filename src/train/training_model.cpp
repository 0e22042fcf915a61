#include "train/training_model.h"

#include "parallel/pipeline/schedules.h"

namespace megaton::train {

TrainingModel::TrainingModel(model::GptConfig config, const dist::ProcessGroups& groups, int layers_per_virtual_stage,
                             const Logger& log)
    : config_(std::move(config)), groups_(groups) {
  if (layers_per_virtual_stage > 0) {
    const int pp = groups_.grid.pp_size(), n = layers_per_virtual_stage;
    const int chunks = config_.model.num_layers / (pp * n);
    std::shared_ptr<parallel::RngTracker> rng;  // one dropout RNG for the rank, shared by its chunks
    for (int k = 0; k < chunks; ++k) {
      chunks_.push_back(std::make_unique<model::GptStage>(
          config_, groups_, model::virtual_stage_part(config_, pp, groups_.coords.pp, k, n), rng));
      rng = chunks_.back()->shared_rng();
    }
    log.info0("interleaved pipeline: ", chunks, " model chunks of ", n, " layers per rank");
  } else {
    chunks_.push_back(std::make_unique<model::GptStage>(config_, groups_));
  }
  for (const auto& c : chunks_) params_.insert(params_.end(), c->params().begin(), c->params().end());
}

void TrainingModel::set_training(bool on) {
  for (auto& c : chunks_) c->set_training(on);
}

void TrainingModel::update_fp8_scaling() {
  for (auto& c : chunks_) {
    ops::fp8::ScalingTable* table = c->fp8_table();
    if (table == nullptr) continue;
    table->reduce_amax([this](torch::Tensor& amax) {  // [slots] fp32
      if (groups_.tp->size() > 1) groups_.tp->all_reduce(amax, dist::ReduceOp::kMax);
      if (groups_.dp->size() > 1) groups_.dp->all_reduce(amax, dist::ReduceOp::kMax);
    });
    table->update();
  }
}

nlohmann::json TrainingModel::fp8_state() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& c : chunks_)
    if (const ops::fp8::ScalingTable* table = c->fp8_table()) out.update(table->to_json());
  return out;
}

void TrainingModel::load_fp8_state(const nlohmann::json& state) {
  for (auto& c : chunks_)
    if (ops::fp8::ScalingTable* table = c->fp8_table()) table->load_json(state);
}

void TrainingModel::set_before_use(const model::GptStage::BeforeUse& fn) {
  size_t offset = 0;  // chunk k's parameters follow those of chunks 0..k-1 in params_
  for (auto& c : chunks_) {
    c->set_before_use(fn ? model::GptStage::BeforeUse([fn, offset](size_t b, size_t e) { fn(offset + b, offset + e); })
                         : model::GptStage::BeforeUse());
    offset += c->params().size();
  }
}

torch::Tensor TrainingModel::forward_step(int chunk, const model::MicroBatch& b, const torch::Tensor& input) {
  model::GptStage& stage = *chunks_[static_cast<size_t>(chunk)];
  const torch::Tensor& in = stage.is_first_stage() ? b.tokens : input;
  const ops::Documents docs = b.documents.per_forward();  // its mask (where one is built) freed with this forward
  if (!stage.is_last_stage()) return stage.forward(in, b.position_ids, docs);  // [s, b, h]
  return model::GptStage::masked_mean(stage.forward_losses(in, b.labels, b.position_ids, docs), b.loss_mask);  // []
}

void TrainingModel::run_schedule(int m, int micro_batch_size, int seq_length, const Forward& forward,
                                 const BeforeBackward& before_backward, bool forward_only) {
  namespace pl = parallel::pipeline;
  pl::P2p p2p(*groups_.pp, {seq_length, micro_batch_size, config_.hidden()},
              torch::TensorOptions().dtype(config_.residual_dtype()).device(config_.device));
  pl::ChunkedStep step;
  step.forward = forward;
  step.before_backward = before_backward;
  pl::run_schedule(m, num_chunks(), p2p, step, forward_only);
}

}  // namespace megaton::train
