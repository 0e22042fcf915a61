#include "infer/inference_model.h"

#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "dist/mpi_session.h"

namespace megaton::infer {

std::unique_ptr<InferenceModel> build_inference_model(const InferenceOptions& f, const dist::LaunchEnv& env,
                                                      Logger& log) {
  if (!f.notes.empty()) log.info0(f.notes);
  const auto& p = f.parallel;
  const torch::Device device(dist::select_device(f.dist.device, env.local_rank));
  auto m = std::make_unique<InferenceModel>(dist::build_process_groups(
      dist::RankGrid(env.size, p.tensor_model_parallel_size, p.pipeline_model_parallel_size),
      dist::parse_backend(f.dist.distributed_backend, device.is_cuda()), f.dist.distributed_timeout_minutes * 60.0));
  log.set_coords(m->groups.coords.tp, m->groups.coords.pp, m->groups.coords.dp);
  m->tokenizer = data::make_tokenizer(f.tokenizer);

  auto& c = m->config;
  c.model = f.model;
  c.kernels = f.kernels;
  c.model.hidden_dropout = 0.0;  // inference: no dropout anywhere
  c.model.attention_dropout = 0.0;
  c.model.checkpoint_activations = false;
  c.vocab_size = m->tokenizer->vocab_size();
  c.padded_vocab_size = f.model.padded_vocab_size(c.vocab_size, p.tensor_model_parallel_size);
  c.seed = static_cast<uint64_t>(f.seed);
  c.dtype = f.precision.dtype();
  c.device = device;
  c.pp_partition_method = p.pp_partition_method;
  model::validate_gpt_config(c, p.tensor_model_parallel_size, p.pipeline_model_parallel_size);
  m->stage = std::make_unique<model::GptStage>(c, m->groups);
  m->stage->set_training(false);
  log.info0(m->groups.grid.describe(), " on ", device.str(), ", vocabulary ", c.vocab_size, " (padded ",
            c.padded_vocab_size, ")");
  if (f.reset_position_ids || f.reset_attention_mask)
    log.warn0(
        "--reset-position-ids / --reset-attention-mask are training flags: generation and evaluation here use "
        "the plain causal mask and positions 0..s-1 (their inputs hold one document each)");

  if (f.load.empty()) {
    log.warn0("no --load: the model has the random initial weights of --seed ", f.seed);
    return m;
  }
  checkpoint::LoadOptions lo;
  lo.load_optim = false;
  lo.load_rng = false;
  lo.finetune = true;  // weights only
  lo.expected_model_config = model::architecture_json(c);
  parallel::ParamList params = m->stage->params();
  auto r = checkpoint::load_checkpoint(f.load, params, nullptr, nullptr, m->groups, lo, log);
  MEGATON_CHECK(r.has_value(), CheckpointError, "--load ", f.load,
                " holds no checkpoint (no latest_checkpointed_iteration.txt / latest file)");
  m->loaded_iteration = r->saved_iteration;
  log.info0("loaded ", r->path, " (iteration ", r->saved_iteration, ", saved at TP=", r->saved_layout.tp,
            " PP=", r->saved_layout.pp, ")");
  return m;
}

}  // namespace megaton::infer
