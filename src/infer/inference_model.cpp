#include "infer/inference_model.h"

#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "dist/mpi_session.h"
#include "train/training_state.h"

namespace megaton::infer {

namespace po = boost::program_options;

void add_model_flags(po::options_description& d, ModelFlags& f) {
  cli::add_megatron_options(d, f.model, f.parallel, f.training, f.precision, f.checkpoint, f.data, f.logging);
}

void validate_model_flags(ModelFlags& f, int world_size, const std::string& command) {
  cli::validate_model(f.model);
  MEGATON_CHECK(f.model.seq_length > 0, UsageError, "--seq-length is required for megaton ", command);
  cli::validate_parallel(f.parallel, f.model, world_size);
  MEGATON_CHECK(f.parallel.num_layers_per_virtual_pipeline_stage == 0, UsageError,
                "--num-layers-per-virtual-pipeline-stage: the interleaved pipeline is not supported by megaton ",
                command);
  cli::validate_precision(f.precision, f.model);
  MEGATON_CHECK(!f.data.tokenizer_type.empty(), UsageError, "megaton ", command,
                " needs --tokenizer-type (GPT2BPETokenizer with --vocab-file/--merge-file, or PretrainedFromHF with "
                "--tokenizer-name-or-path)");
  if (f.training.micro_batch_size == 0) f.training.micro_batch_size = 1;
  MEGATON_CHECK(f.training.micro_batch_size > 0, UsageError, "--micro-batch-size must be > 0, got ",
                f.training.micro_batch_size);
}

torch::ScalarType params_dtype(const cli::PrecisionArgs& p) {
  if (p.fp16) return torch::kFloat16;
  if (p.bf16) return torch::kBFloat16;
  return torch::kFloat32;
}

std::unique_ptr<InferenceModel> build_inference_model(const ModelFlags& f, const dist::LaunchEnv& env, Logger& log) {
  const auto& p = f.parallel;
  const torch::Device device(dist::select_device(p.device, env.local_rank));
  auto m = std::make_unique<InferenceModel>(dist::build_process_groups(
      dist::RankGrid(env.size, p.tensor_model_parallel_size, p.pipeline_model_parallel_size),
      dist::parse_backend(p.distributed_backend, device.is_cuda()), p.distributed_timeout_minutes * 60.0));
  log.set_coords(m->groups.coords.tp, m->groups.coords.pp, m->groups.coords.dp);
  m->tokenizer = data::make_tokenizer(f.data);

  auto& c = m->config;
  c.model = f.model;
  c.model.hidden_dropout = 0.0;  // inference: no dropout anywhere
  c.model.attention_dropout = 0.0;
  c.model.checkpoint_activations = false;
  c.vocab_size = m->tokenizer->vocab_size();
  c.padded_vocab_size = cli::padded_vocab_size(c.vocab_size, f.model, p.tensor_model_parallel_size);
  c.seed = static_cast<uint64_t>(f.training.seed);
  c.dtype = params_dtype(f.precision);
  c.device = device;
  c.pp_partition_method = p.pp_partition_method;
  model::validate_gpt_config(c, p.tensor_model_parallel_size, p.pipeline_model_parallel_size);
  m->stage = std::make_unique<model::GptStage>(c, m->groups);
  m->stage->set_training(false);
  log.info0(m->groups.grid.describe(), " on ", device.str(), ", vocabulary ", c.vocab_size, " (padded ",
            c.padded_vocab_size, ")");
  if (f.data.reset_position_ids || f.data.reset_attention_mask)
    log.warn0(
        "--reset-position-ids / --reset-attention-mask are training flags: generation and evaluation here use "
        "the plain causal mask and positions 0..s-1 (their inputs hold one document each)");

  if (f.checkpoint.load.empty()) {
    log.warn0("no --load: the model has the random initial weights of --seed ", f.training.seed);
    return m;
  }
  checkpoint::LoadOptions lo;
  lo.load_optim = false;
  lo.load_rng = false;
  lo.finetune = true;  // weights only
  lo.expected_model_config = train::model_config_json(c);
  parallel::ParamList params = m->stage->params();
  auto r = checkpoint::load_checkpoint(f.checkpoint.load, params, nullptr, nullptr, m->groups, lo, log);
  MEGATON_CHECK(r.has_value(), CheckpointError, "--load ", f.checkpoint.load,
                " holds no checkpoint (no latest_checkpointed_iteration.txt / latest file)");
  m->loaded_iteration = r->saved_iteration;
  log.info0("loaded ", r->path, " (iteration ", r->saved_iteration, ", saved at TP=", r->saved_layout.tp,
            " PP=", r->saved_layout.pp, ")");
  return m;
}

}  // namespace megaton::infer
