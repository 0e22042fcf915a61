#include "cli/arguments.h"

#include <cmath>

#include "core/error.h"

namespace megaton::cli {

namespace {

template <typename T>
po::typed_value<T>* val(T& field) {
  return po::value<T>(&field)->default_value(field);
}

po::typed_value<std::string>* sval(std::string& field) {
  return po::value<std::string>(&field)->default_value(field);
}

}  // namespace

// One flag a line, as `megaton train --help` lists them.
// clang-format off
void add_model_options(po::options_description& d, ModelArgs& a) {
  d.add_options()
      ("num-layers", val(a.num_layers), "number of transformer layers (required)")
      ("hidden-size", val(a.hidden_size), "transformer hidden size (required)")
      ("ffn-hidden-size", val(a.ffn_hidden_size), "MLP hidden size; 0 = 4 x hidden")
      ("num-attention-heads", val(a.num_attention_heads), "attention heads (required)")
      ("kv-channels", val(a.kv_channels), "per-head dimension; 0 = hidden / heads")
      ("max-position-embeddings", val(a.max_position_embeddings),
       "learned position table size (absolute/alibi); 0 = --seq-length")
      ("seq-length", val(a.seq_length), "sequence length (required for train)")
      ("make-vocab-size-divisible-by", val(a.make_vocab_size_divisible_by),
       "pad the vocabulary to a multiple of this x TP")
      ("pad-vocab-size-to", val(a.pad_vocab_size_to), "pad the vocabulary to exactly this size")
      ("layernorm-epsilon", val(a.layernorm_epsilon), "LayerNorm epsilon")
      ("position-embedding-type", sval(a.position_embedding_type), "absolute | rotary | alibi")
      ("embed-layernorm", po::bool_switch(&a.embed_layernorm), "LayerNorm after the word embedding (BLOOM)")
      ("glu-activation", sval(a.glu_activation), "geglu | swiglu | reglu | liglu (MLP becomes gated)")
      ("openai-gelu", po::bool_switch(&a.openai_gelu), "tanh-approximated GELU")
      ("apply-residual-connection-post-layernorm", po::bool_switch(&a.apply_residual_connection_post_layernorm),
       "residual taken after the LayerNorm (original BERT order)")
      ("hidden-dropout", val(a.hidden_dropout), "dropout after attention/MLP output")
      ("attention-dropout", val(a.attention_dropout), "dropout on attention probabilities")
      ("init-method-std", val(a.init_method_std), "std of the normal init; output layers use std/sqrt(2L)")
      ("init-method-xavier-uniform", po::bool_switch(&a.init_method_xavier_uniform), "xavier-uniform init")
      ("checkpoint-activations", po::bool_switch(&a.checkpoint_activations), "recompute layer activations in backward")
      ("checkpoint-num-layers", val(a.checkpoint_num_layers), "layers per recomputed chunk")
      ("no-bias-gelu-fusion", po::bool_switch(&a.no_bias_gelu_fusion), "accepted for compatibility (GLU needs it)")
      ("no-fused-layernorm", po::bool_switch(&a.no_fused_layernorm), "ATen's LayerNorm on CUDA, not megaton's kernel")
      ("no-gemm-epilogue-fusion", po::bool_switch(&a.no_gemm_epilogue_fusion),
       "CUDA: fc1's bias and GELU as separate ATen ops instead of in its GEMM's cuBLASLt epilogue (and no DGELU "
       "epilogue in the backward)")
      ("gemm-epilogue-fusion", po::bool_switch(&a.gemm_epilogue_fusion),
       "the default (fc1's bias and GELU in its GEMM's cuBLASLt epilogue on CUDA); given, warns where it cannot apply")
      ("no-gemm-dgelu-epilogue", po::bool_switch(&a.no_gemm_dgelu_epilogue),
       "CUDA: GELU backward + fc1's bias gradient in one kernel instead of the GELU derivative in fc2's input-gradient "
       "GEMM's cuBLASLt epilogue (DGELU) and the bias gradient after")
      ("no-qkv-grad-fusion", po::bool_switch(&a.no_qkv_grad_fusion),
       "the attention's QKV gradient assembled by ATen's stack and the QKV bias gradient by a separate column sum, "
       "instead of one pass for both")
      ("no-masked-softmax-fusion", po::bool_switch(&a.no_masked_softmax_fusion),
       "as Megatron: the attention's scores, mask and softmax as separate ops (the explicit path: baddbmm, masked "
       "fill, softmax) instead of a fused attention kernel")
      ("no-bias-dropout-fusion", po::bool_switch(&a.no_bias_dropout_fusion),
       "as Megatron: the hidden dropout and the residual add as separate ops (the same as "
       "--no-dropout-layernorm-fusion)")
      ("varlen-attention", po::bool_switch(&a.varlen_attention),
       "the default (CUDA, bf16/fp16, --reset-attention-mask): each document alone through ATen's variable-length "
       "flash kernel")
      ("no-varlen-attention", po::bool_switch(&a.no_varlen_attention),
       "--reset-attention-mask's documents as Megatron's [b, 1, s, s] mask through SDPA instead (docs/training.md)")
      ("no-alibi-fold", po::bool_switch(&a.no_alibi_fold),
       "ALiBi on a GPU in bf16/fp16: its bias as Megatron adds it, rounded to the model's dtype in a [heads, s, s] "
       "mask through SDPA, instead of folded into 8 extra head dimensions of causal SDPA (exact to ~2^-24, faster; "
       "docs/model.md)")
      ("no-dropout-layernorm-fusion", po::bool_switch(&a.no_dropout_layernorm_fusion),
       "CUDA, bf16/fp16: ATen's fused dropout before the residual add instead of the hidden dropout drawn inside the "
       "LayerNorm kernel that reads the add (one mask bit per element kept for the backward, whose kernel writes the "
       "dropped-out branch's gradient too); a different mask from the same seed")
      ("dropout-layernorm-fusion", po::bool_switch(&a.dropout_layernorm_fusion),
       "the default (the hidden dropout drawn in the LayerNorm kernels on CUDA)")
      ("no-fused-lm-head-loss", po::bool_switch(&a.no_fused_lm_head_loss),
       "the LM head's logits, then the vocabulary-parallel cross-entropy as separate ops, instead of one op that writes "
       "the logits' gradient over the logits in the forward (one pass over them less, a [tokens, V/tp] buffer less)")
      ("fused-lm-head-loss", po::bool_switch(&a.fused_lm_head_loss), "the default (the LM head and its loss as one op)")
      ("no-gradient-accumulation-fusion", po::bool_switch(&a.no_gradient_accumulation_fusion),
       "linear layers return weight gradients to autograd instead of adding them to the fp32 main grads")
      ("no-query-key-layer-scaling", po::bool_switch()->notifier([&a](bool v) {
         if (v) a.apply_query_key_layer_scaling = false;
       }),
       "do not scale Q.K by 1/layer_number")
      ("attention-softmax-in-fp32", po::bool_switch(&a.attention_softmax_in_fp32), "softmax in fp32")
      ("fp32-residual-connection", po::bool_switch(&a.fp32_residual_connection),
       "keep the residual stream (and pipeline activations) in fp32 with --fp16/--bf16 layers")
      ("untie-embeddings-and-output-weights", po::bool_switch(&a.untie_embeddings_and_output_weights),
       "separate output projection instead of the tied word embedding")
      ("abort-on-unmet-fused-kernel-constraints", po::bool_switch(&a.abort_on_unmet_fused_kernel_constraints),
       "accepted for compatibility: megaton's attention has no slower fallback path to abort on");
}
// clang-format on

// One flag a line, as `megaton train --help` lists them.
// clang-format off
void add_parallel_options(po::options_description& d, ParallelArgs& a) {
  d.add_options()
      ("tensor-model-parallel-size", val(a.tensor_model_parallel_size), "TP: ranks sharing each layer")
      ("pipeline-model-parallel-size", val(a.pipeline_model_parallel_size), "PP: pipeline stages")
      ("num-layers-per-virtual-pipeline-stage", val(a.num_layers_per_virtual_pipeline_stage),
       "interleaved 1F1B: layers per virtual stage (0 = not interleaved)")
      ("pp-partition-method", sval(a.pp_partition_method), "uniform | parameters | type:transformer")
      ("zero-stage", val(a.zero_stage), "0 = none, 1 = shard optimizer state over DP")
      ("distributed-backend", sval(a.distributed_backend), "nccl | mpi | auto")
      ("distributed-timeout-minutes", val(a.distributed_timeout_minutes),
       "abort the job when a collective waits longer than this")
      ("device", sval(a.device), "auto | cuda | cpu")
      ("dp-bucket-size-mb", val(a.dp_bucket_size_mb), "gradient all-reduce bucket size")
      ("sync-tp-duplicated-parameters", po::bool_switch(&a.sync_tp_duplicated_parameters),
       "average the TP-replicated parameters (LayerNorms, row-parallel biases) over TP every iteration");
}
// clang-format on

// One flag a line, as `megaton train --help` lists them.
// clang-format off
void add_training_options(po::options_description& d, TrainingArgs& a) {
  d.add_options()
      ("micro-batch-size", val(a.micro_batch_size), "samples per rank per micro-step (required)")
      ("global-batch-size", val(a.global_batch_size), "samples per iteration; 0 = micro x DP")
      ("rampup-batch-size", po::value<std::vector<int64_t>>(&a.rampup_batch_size)->multitoken(),
       "START INCR SAMPLES: batch-size ramp-up (sample-based training only)")
      ("train-iters", val(a.train_iters), "iterations to train (exclusive with --train-samples)")
      ("train-samples", val(a.train_samples), "samples to train (exclusive with --train-iters)")
      ("train-tokens", val(a.train_tokens), "also stop once this many tokens are consumed (over all runs)")
      ("deepspeed", po::bool_switch(&a.deepspeed), "take ZeRO, fp16 scaler, clipping, batch sizes from --deepspeed_config")
      ("deepspeed_config", sval(a.deepspeed_config), "DeepSpeed JSON (with --deepspeed; docs/training.md)")
      ("deepspeed-activation-checkpointing", po::bool_switch(&a.deepspeed_activation_checkpointing),
       "accepted: --checkpoint-activations recomputes with megaton's own checkpointing")
      ("deepspeed_mpi", po::bool_switch(&a.deepspeed_mpi), "accepted: megaton always starts through MPI")
      ("log-interval", val(a.log_interval), "iterations between log lines")
      ("exit-interval", val(a.exit_interval), "save and exit when iteration %% N == 0")
      ("exit-duration-in-mins", val(a.exit_duration_in_mins), "save and exit after this many minutes")
      ("kill-switch-path", sval(a.kill_switch_path), "save and exit when this file exists")
      ("skip-train-iteration-range", po::value<std::vector<std::string>>(&a.skip_train_iteration_range)->multitoken(),
       "A-B ...: skip the data of these iterations")
      ("eval-interval", val(a.eval_interval), "iterations between validation runs")
      ("eval-iters", val(a.eval_iters), "batches per validation run")
      ("eval-only", po::bool_switch(&a.eval_only), "only evaluate")
      ("seed", val(a.seed), "random seed")
      ("optimizer", sval(a.optimizer), "adam | sgd")
      ("lr", val(a.lr), "peak learning rate")
      ("min-lr", val(a.min_lr), "learning-rate floor")
      ("lr-decay-style", sval(a.lr_decay_style), "constant | linear | cosine")
      ("lr-decay-iters", val(a.lr_decay_iters), "decay span in iterations; 0 = --train-iters")
      ("lr-decay-samples", val(a.lr_decay_samples), "decay span in samples; 0 = --train-samples")
      ("lr-decay-tokens", val(a.lr_decay_tokens), "decay span in tokens")
      ("lr-warmup-fraction", val(a.lr_warmup_fraction), "warm-up as a fraction of the decay span")
      ("lr-warmup-iters", val(a.lr_warmup_iters), "warm-up iterations")
      ("lr-warmup-samples", val(a.lr_warmup_samples), "warm-up samples")
      ("override-lr-scheduler", po::bool_switch(&a.override_lr_scheduler), "ignore the checkpoint's LR schedule")
      ("use-checkpoint-lr-scheduler", po::bool_switch(&a.use_checkpoint_lr_scheduler),
       "take the LR schedule from the checkpoint")
      ("weight-decay", val(a.weight_decay), "decoupled weight decay (AdamW)")
      ("clip-grad", val(a.clip_grad), "clip the global gradient L2 norm to this; 0 = off")
      ("adam-beta1", val(a.adam_beta1), "Adam beta1")
      ("adam-beta2", val(a.adam_beta2), "Adam beta2")
      ("adam-eps", val(a.adam_eps), "Adam epsilon")
      ("sgd-momentum", val(a.sgd_momentum), "SGD momentum")
      ("no-fused-adam", po::bool_switch(&a.no_fused_adam),
       "CUDA: update with the unfused ATen ops instead of the one-pass fused Adam kernel")
      ("dry-run", po::bool_switch(&a.dry_run),
       "print the resolved parallel layout, memory per GPU and model FLOPs per iteration, then exit");
}
// clang-format on

// One flag a line, as `megaton train --help` lists them.
// clang-format off
void add_precision_options(po::options_description& d, PrecisionArgs& a) {
  d.add_options()
      ("fp16", po::bool_switch(&a.fp16), "fp16 weights and activations, fp32 master weights, loss scaling")
      ("bf16", po::bool_switch(&a.bf16), "bf16 weights and activations, fp32 master weights")
      ("loss-scale", val(a.loss_scale), "static loss scale; 0 = dynamic")
      ("initial-loss-scale", val(a.initial_loss_scale), "initial dynamic loss scale")
      ("min-loss-scale", val(a.min_loss_scale), "dynamic loss-scale floor")
      ("loss-scale-window", val(a.loss_scale_window), "clean steps before the scale doubles")
      ("hysteresis", val(a.hysteresis), "overflows tolerated before the scale halves")
      ("accumulate-allreduce-grads-in-fp32", po::bool_switch(&a.accumulate_allreduce_grads_in_fp32),
       "accepted: gradients always accumulate and all-reduce in fp32 main grads")
      ("fp16-lm-cross-entropy", po::bool_switch(&a.fp16_lm_cross_entropy),
       "accepted with --fp16: the cross-entropy always reads the fp16 logits, no fp32 copy");
}
// clang-format on

// One flag a line, as `megaton train --help` lists them.
// clang-format off
void add_checkpoint_options(po::options_description& d, CheckpointArgs& a) {
  d.add_options()
      ("save", sval(a.save), "checkpoint directory to save to")
      ("load", sval(a.load), "checkpoint directory to resume from")
      ("save-interval", val(a.save_interval), "iterations between checkpoints")
      ("no-save-optim", po::bool_switch(&a.no_save_optim), "do not save optimizer state")
      ("no-save-rng", po::bool_switch(&a.no_save_rng), "do not save RNG state")
      ("no-load-optim", po::bool_switch(&a.no_load_optim), "do not load optimizer state")
      ("no-load-rng", po::bool_switch(&a.no_load_rng), "do not load RNG state")
      ("finetune", po::bool_switch(&a.finetune), "load weights only and start at iteration 0")
      ("keep-last", val(a.keep_last), "keep only the newest K checkpoints; 0 = all");
}
// clang-format on

// One flag a line, as `megaton train --help` lists them.
// clang-format off
void add_data_options(po::options_description& d, DataArgs& a) {
  d.add_options()
      ("data-path", po::value<std::vector<std::string>>(&a.data_path)->multitoken(),
       "PREFIX, or W1 PREFIX1 W2 PREFIX2 ... to blend")
      ("split", sval(a.split), "train,valid,test proportions (default 969, 30, 1)")
      ("data-impl", sval(a.data_impl), "mmap (the only implementation; infer/lazy/cached are read as mmap)")
      ("tokenizer-type", sval(a.tokenizer_type), "GPT2BPETokenizer | PretrainedFromHF")
      ("tokenizer-name-or-path", sval(a.tokenizer_name_or_path), "directory holding tokenizer.json")
      ("vocab-file", sval(a.vocab_file), "GPT-2 vocab.json / encoder.json")
      ("merge-file", sval(a.merge_file), "GPT-2 merges.txt / vocab.bpe")
      ("data-cache-path", sval(a.data_cache_path), "where sample indices are cached (default: next to the data)")
      ("reset-position-ids", po::bool_switch(&a.reset_position_ids), "restart positions after each EOD")
      ("reset-attention-mask", po::bool_switch(&a.reset_attention_mask), "no attention across EOD")
      ("eod-mask-loss", po::bool_switch(&a.eod_mask_loss), "no loss on EOD tokens")
      ("num-workers", val(a.num_workers), "accepted for compatibility (samples are mmap reads; no loader threads)")
      ("valid-num-workers", val(a.valid_num_workers), "accepted for compatibility, as --num-workers")
      ("dataloader-type", sval(a.dataloader_type),
       "single (Megatron's in-order sampler, resumable at the consumed samples; the only one implemented)")
      ("train-weighted-split-paths", po::value<std::vector<std::string>>(&a.train_weighted_split_paths)->multitoken(),
       "mode 2: one group 'NAME: W1 S1:E1 P1, W2 S2:E2 P2' (START:END fractions of each dataset's documents)")
      ("valid-weighted-split-paths", po::value<std::vector<std::string>>(&a.valid_weighted_split_paths)->multitoken(),
       "mode 2: validation groups, each evaluated and logged under its NAME")
      ("test-weighted-split-paths", po::value<std::vector<std::string>>(&a.test_weighted_split_paths)->multitoken(),
       "mode 2: test groups")
      ("train-weighted-split-paths-path", sval(a.train_weighted_split_paths_path),
       "file holding the --train-weighted-split-paths groups, double-quoted")
      ("valid-weighted-split-paths-path", sval(a.valid_weighted_split_paths_path),
       "file holding the --valid-weighted-split-paths groups, double-quoted")
      ("test-weighted-split-paths-path", sval(a.test_weighted_split_paths_path),
       "file holding the --test-weighted-split-paths groups, double-quoted");
}
// clang-format on

// One flag a line, as `megaton train --help` lists them.
// clang-format off
void add_logging_options(po::options_description& d, LoggingArgs& a) {
  d.add_options()
      ("tensorboard-dir", sval(a.tensorboard_dir), "write TensorBoard event files here")
      ("tensorboard-log-interval", val(a.tensorboard_log_interval), "iterations between TensorBoard points")
      ("metrics-file", sval(a.metrics_file), "append one JSON line per logged iteration")
      ("log-level", sval(a.log_level), "debug | info | warning | error | critical | passive")
      ("log-timers-to-tensorboard", po::bool_switch(&a.log_timers_to_tensorboard), "timers to TensorBoard")
      ("log-validation-ppl-to-tensorboard", po::bool_switch(&a.log_validation_ppl_to_tensorboard),
       "validation perplexity to TensorBoard")
      ("log-batch-size-to-tensorboard", po::bool_switch(&a.log_batch_size_to_tensorboard), "batch size to TensorBoard")
      ("tensorboard-queue-size", val(a.tensorboard_queue_size), "records buffered before the events file is flushed")
      ("log-num-zeros-in-grad", po::bool_switch(&a.log_num_zeros_in_grad), "count the zeros of the gradient (log line)")
      ("log-params-norm", po::bool_switch(&a.log_params_norm), "the L2 norm of the weights (log line, TensorBoard)")
      ("no-log-loss-scale-to-tensorboard", po::bool_switch()->notifier([&a](bool v) {
         if (v) a.log_loss_scale_to_tensorboard = false;
       }), "no loss-scale scalar in TensorBoard")
      ("no-log-learnig-rate-to-tensorboard", po::bool_switch()->notifier([&a](bool v) {
         if (v) a.log_learning_rate_to_tensorboard = false;
       }), "no learning-rate scalar in TensorBoard (Megatron's spelling)")
      ("no-log-learning-rate-to-tensorboard", po::bool_switch()->notifier([&a](bool v) {
         if (v) a.log_learning_rate_to_tensorboard = false;
       }), "the same, spelled right")
      ("profile", po::bool_switch(&a.profile), "record iterations with LibTorch's profiler (trace + summary table)")
      ("profile-step-start", val(a.profile_step_start), "profile from after this iteration")
      ("profile-step-end", val(a.profile_step_end), "... up to and including this iteration")
      ("profile-ranks", po::value<std::vector<int64_t>>(&a.profile_ranks)->multitoken(), "global ranks to profile")
      ("profile-dir", sval(a.profile_dir), "where rank<R>.trace.json and rank<R>.summary.txt go (default: --tensorboard-dir)");
}
// clang-format on

void add_megatron_options(po::options_description& d, ModelArgs& model, ParallelArgs& parallel, TrainingArgs& training,
                          PrecisionArgs& precision, CheckpointArgs& checkpoint, DataArgs& data, LoggingArgs& logging) {
  po::options_description m("model"), p("parallelism"), t("training"), f("mixed precision"), c("checkpointing"),
      dt("data and tokenizer"), l("logging");
  add_model_options(m, model);
  add_parallel_options(p, parallel);
  add_training_options(t, training);
  add_precision_options(f, precision);
  add_checkpoint_options(c, checkpoint);
  add_data_options(dt, data);
  add_logging_options(l, logging);
  d.add(m).add(p).add(t).add(f).add(c).add(dt).add(l);
}

void validate_model(ModelArgs& m) {
  MEGATON_CHECK(m.num_layers > 0, UsageError, "--num-layers is required and must be > 0 (got ", m.num_layers, ")");
  MEGATON_CHECK(m.hidden_size > 0, UsageError, "--hidden-size is required and must be > 0 (got ", m.hidden_size, ")");
  MEGATON_CHECK(m.num_attention_heads > 0, UsageError, "--num-attention-heads is required and must be > 0 (got ",
                m.num_attention_heads, ")");
  if (m.kv_channels == 0) {
    MEGATON_CHECK(m.hidden_size % m.num_attention_heads == 0, UsageError, "--hidden-size (", m.hidden_size,
                  ") must be divisible by --num-attention-heads (", m.num_attention_heads, ")");
    m.kv_channels = m.hidden_size / m.num_attention_heads;
  }
  if (m.ffn_hidden_size == 0) m.ffn_hidden_size = 4 * m.hidden_size;
  MEGATON_CHECK(!(m.gemm_epilogue_fusion && m.no_gemm_epilogue_fusion), UsageError,
                "--gemm-epilogue-fusion and --no-gemm-epilogue-fusion contradict each other");
  MEGATON_CHECK(!(m.fused_lm_head_loss && m.no_fused_lm_head_loss), UsageError,
                "--fused-lm-head-loss and --no-fused-lm-head-loss contradict each other");
  if (m.no_bias_dropout_fusion) m.no_dropout_layernorm_fusion = true;  // Megatron's name for the same fusion
  MEGATON_CHECK(!(m.dropout_layernorm_fusion && m.no_dropout_layernorm_fusion), UsageError,
                "--dropout-layernorm-fusion and --no-dropout-layernorm-fusion contradict each other (",
                m.no_bias_dropout_fusion ? "--no-bias-dropout-fusion is Megatron's name for the second" : "both given",
                ")");
  MEGATON_CHECK(!(m.varlen_attention && m.no_varlen_attention), UsageError,
                "--varlen-attention and --no-varlen-attention contradict each other");
  MEGATON_CHECK(m.position_embedding_type == "absolute" || m.position_embedding_type == "rotary" ||
                    m.position_embedding_type == "alibi",
                UsageError, "--position-embedding-type: expected absolute|rotary|alibi, got '",
                m.position_embedding_type, "'");
  MEGATON_CHECK(m.glu_activation.empty() || m.glu_activation == "geglu" || m.glu_activation == "swiglu" ||
                    m.glu_activation == "reglu" || m.glu_activation == "liglu",
                UsageError, "--glu-activation: expected geglu|swiglu|reglu|liglu, got '", m.glu_activation, "'");
  MEGATON_CHECK(m.seq_length >= 0, UsageError, "--seq-length must be > 0 (got ", m.seq_length, ")");
  if (m.position_embedding_type == "absolute") {
    if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;
    MEGATON_CHECK(m.max_position_embeddings >= m.seq_length, UsageError, "--max-position-embeddings (",
                  m.max_position_embeddings, ") must be >= --seq-length (", m.seq_length, ")");
  }
  MEGATON_CHECK(m.hidden_dropout >= 0 && m.hidden_dropout < 1, UsageError, "--hidden-dropout must be in [0, 1), got ",
                m.hidden_dropout);
  MEGATON_CHECK(m.attention_dropout >= 0 && m.attention_dropout < 1, UsageError,
                "--attention-dropout must be in [0, 1), got ", m.attention_dropout);
  MEGATON_CHECK(m.make_vocab_size_divisible_by > 0, UsageError, "--make-vocab-size-divisible-by must be > 0");
  MEGATON_CHECK(m.checkpoint_num_layers >= 1, UsageError, "--checkpoint-num-layers must be >= 1");
}

void validate_parallel(ParallelArgs& p, const ModelArgs& m, int world_size) {
  const int tp = p.tensor_model_parallel_size, pp = p.pipeline_model_parallel_size;
  MEGATON_CHECK(tp >= 1 && pp >= 1, UsageError, "--tensor-model-parallel-size (", tp,
                ") and --pipeline-model-parallel-size (", pp, ") must be >= 1");
  MEGATON_CHECK(world_size % (tp * pp) == 0, UsageError, "world size (", world_size,
                ") must be divisible by --tensor-model-parallel-size x --pipeline-model-parallel-size (", tp, " x ", pp,
                ")");
  p.world_size = world_size;
  p.data_parallel_size = world_size / (tp * pp);
  MEGATON_CHECK(m.num_attention_heads % tp == 0, UsageError, "--num-attention-heads (", m.num_attention_heads,
                ") must be divisible by --tensor-model-parallel-size (", tp, ")");
  MEGATON_CHECK(m.ffn_hidden_size % tp == 0, UsageError, "--ffn-hidden-size (", m.ffn_hidden_size,
                ") must be divisible by --tensor-model-parallel-size (", tp, ")");
  MEGATON_CHECK(m.num_layers >= pp, UsageError, "--num-layers (", m.num_layers,
                ") must be >= --pipeline-model-parallel-size (", pp, ")");
  if (p.num_layers_per_virtual_pipeline_stage > 0) {
    // Megatron asks for PP > 2 because its batched 4-way p2p op mismatches messages between two ranks; ours keeps
    // the forward and backward rings apart, so PP = 2 works (src/parallel/pipeline/schedules.h).
    MEGATON_CHECK(pp >= 2, UsageError,
                  "--num-layers-per-virtual-pipeline-stage needs --pipeline-model-parallel-size >= 2 (got ", pp, ")");
    MEGATON_CHECK(m.num_layers % (pp * p.num_layers_per_virtual_pipeline_stage) == 0, UsageError, "--num-layers (",
                  m.num_layers,
                  ") must be divisible by --pipeline-model-parallel-size x "
                  "--num-layers-per-virtual-pipeline-stage (",
                  pp, " x ", p.num_layers_per_virtual_pipeline_stage, ")");
    MEGATON_CHECK(p.pp_partition_method != "parameters", UsageError,
                  "--pp-partition-method parameters cannot be combined with --num-layers-per-virtual-pipeline-stage "
                  "(every model chunk holds that many layers)");
  }
  MEGATON_CHECK(p.num_layers_per_virtual_pipeline_stage >= 0, UsageError,
                "--num-layers-per-virtual-pipeline-stage must be >= 0 (0 = not interleaved)");
  MEGATON_CHECK(p.pp_partition_method == "uniform" || p.pp_partition_method == "parameters" ||
                    p.pp_partition_method.rfind("type:", 0) == 0,
                UsageError, "--pp-partition-method: expected uniform|parameters|type:transformer, got '",
                p.pp_partition_method, "'");
  MEGATON_CHECK(p.zero_stage == 0 || p.zero_stage == 1, UsageError, "--zero-stage: supported stages are 0 and 1, got ",
                p.zero_stage);
  MEGATON_CHECK(p.distributed_timeout_minutes > 0, UsageError, "--distributed-timeout-minutes must be > 0");
}

void validate_training(TrainingArgs& t, const ParallelArgs& p) {
  const int dp = p.data_parallel_size;
  MEGATON_CHECK(t.micro_batch_size > 0, UsageError, "--micro-batch-size is required and must be > 0 (got ",
                t.micro_batch_size, ")");
  if (t.global_batch_size == 0) t.global_batch_size = t.micro_batch_size * dp;
  MEGATON_CHECK(t.global_batch_size > 0, UsageError, "--global-batch-size must be > 0");
  MEGATON_CHECK(t.global_batch_size % (t.micro_batch_size * dp) == 0, UsageError, "--global-batch-size (",
                t.global_batch_size, ") must be divisible by --micro-batch-size x data-parallel size (",
                t.micro_batch_size, " x ", dp, " = ", t.micro_batch_size * dp, ")");
  t.num_micro_batches = t.global_batch_size / (t.micro_batch_size * dp);
  MEGATON_CHECK(t.train_tokens >= 0, UsageError, "--train-tokens must be > 0, got ", t.train_tokens);
  MEGATON_CHECK(!(t.train_iters > 0 && t.train_samples > 0), UsageError,
                "--train-iters and --train-samples are exclusive");
  if (!t.dry_run || t.train_iters > 0 || t.train_samples > 0) {
    MEGATON_CHECK(t.train_iters > 0 || t.train_samples > 0 || t.eval_only, UsageError,
                  "one of --train-iters or --train-samples is required");
  }
  if (t.train_iters > 0) {
    MEGATON_CHECK(t.lr_decay_samples == 0, UsageError,
                  "--lr-decay-samples goes with --train-samples, not --train-iters");
    MEGATON_CHECK(t.lr_warmup_samples == 0, UsageError,
                  "--lr-warmup-samples goes with --train-samples, not --train-iters");
    MEGATON_CHECK(t.rampup_batch_size.empty(), UsageError,
                  "--rampup-batch-size is only supported with --train-samples (sample-based training)");
    MEGATON_CHECK(!(t.lr_warmup_fraction >= 0 && t.lr_warmup_iters > 0), UsageError,
                  "--lr-warmup-fraction and --lr-warmup-iters are exclusive");
  }
  if (t.train_samples > 0) {
    MEGATON_CHECK(t.lr_decay_iters == 0, UsageError, "--lr-decay-iters goes with --train-iters, not --train-samples");
    MEGATON_CHECK(t.lr_warmup_iters == 0, UsageError, "--lr-warmup-iters goes with --train-iters, not --train-samples");
    MEGATON_CHECK(!(t.lr_warmup_fraction >= 0 && t.lr_warmup_samples > 0), UsageError,
                  "--lr-warmup-fraction and --lr-warmup-samples are exclusive");
  }
  if (!t.rampup_batch_size.empty()) {
    MEGATON_CHECK(t.rampup_batch_size.size() == 3, UsageError,
                  "--rampup-batch-size expects 3 values (START INCR SAMPLES), got ", t.rampup_batch_size.size());
    const int64_t start = t.rampup_batch_size[0], incr = t.rampup_batch_size[1], samples = t.rampup_batch_size[2];
    MEGATON_CHECK(start > 0 && incr > 0 && samples >= 0, UsageError,
                  "--rampup-batch-size: START and INCR must be > 0 and SAMPLES >= 0");
    MEGATON_CHECK(t.global_batch_size >= start, UsageError, "--global-batch-size (", t.global_batch_size,
                  ") must be >= the ramp-up start batch (", start, ")");
    MEGATON_CHECK((t.global_batch_size - start) % incr == 0, UsageError, "--global-batch-size (", t.global_batch_size,
                  ") minus the ramp-up start (", start, ") must be divisible by the increment (", incr, ")");
    MEGATON_CHECK(start % (t.micro_batch_size * dp) == 0 && incr % (t.micro_batch_size * dp) == 0, UsageError,
                  "--rampup-batch-size START (", start, ") and INCR (", incr,
                  ") must be divisible by --micro-batch-size x data-parallel size (", t.micro_batch_size * dp, ")");
  }
  if (p.num_layers_per_virtual_pipeline_stage > 0) {
    // Megatron's interleaved schedule runs the micro-batches in groups of PP per model chunk.
    const int pp = p.pipeline_model_parallel_size;
    const int64_t per = int64_t(t.micro_batch_size) * dp;
    std::vector<int64_t> batches{t.global_batch_size};
    if (t.rampup_batch_size.size() == 3)
      batches.insert(batches.end(), {t.rampup_batch_size[0], t.rampup_batch_size[1]});
    for (int64_t b : batches)
      MEGATON_CHECK((b / per) % pp == 0, UsageError,
                    "--num-layers-per-virtual-pipeline-stage (interleaved schedule) needs the number of micro-batches "
                    "per iteration to be a multiple of --pipeline-model-parallel-size (",
                    pp, "): ", b == t.global_batch_size ? "--global-batch-size" : "--rampup-batch-size", " ", b,
                    " / (--micro-batch-size x data-parallel size = ", per, ") = ", b / per, " micro-batches");
  }
  if (t.lr >= 0) {
    MEGATON_CHECK(t.min_lr >= 0 && t.min_lr <= t.lr, UsageError, "--min-lr (", t.min_lr, ") must be in [0, --lr (",
                  t.lr, ")]");
  }
  MEGATON_CHECK(t.lr_decay_style == "constant" || t.lr_decay_style == "linear" || t.lr_decay_style == "cosine",
                UsageError, "--lr-decay-style: expected constant|linear|cosine, got '", t.lr_decay_style, "'");
  MEGATON_CHECK(t.lr_warmup_fraction < 0 || t.lr_warmup_fraction <= 1, UsageError,
                "--lr-warmup-fraction must be in [0, 1], got ", t.lr_warmup_fraction);
  MEGATON_CHECK(t.optimizer == "adam" || t.optimizer == "sgd", UsageError, "--optimizer: expected adam|sgd, got '",
                t.optimizer, "'");
  MEGATON_CHECK(t.log_interval > 0, UsageError, "--log-interval must be > 0");
  MEGATON_CHECK(t.eval_interval > 0, UsageError, "--eval-interval must be > 0");
  MEGATON_CHECK(t.clip_grad >= 0, UsageError, "--clip-grad must be >= 0");
  MEGATON_CHECK(t.adam_beta1 >= 0 && t.adam_beta1 < 1 && t.adam_beta2 >= 0 && t.adam_beta2 < 1, UsageError,
                "--adam-beta1/--adam-beta2 must be in [0, 1)");
}

void validate_precision(const PrecisionArgs& p, const ModelArgs& m) {
  MEGATON_CHECK(!(p.fp16 && p.bf16), UsageError, "--fp16 and --bf16 are exclusive");
  MEGATON_CHECK(!m.fp32_residual_connection || p.fp16 || p.bf16, UsageError,
                "--fp32-residual-connection needs --fp16 or --bf16 (the residual stream is already fp32 otherwise)");
  MEGATON_CHECK(!p.fp16_lm_cross_entropy || p.fp16, UsageError,
                "--fp16-lm-cross-entropy needs --fp16 (lm cross entropy in fp16 is only supported in fp16 mode)");
  MEGATON_CHECK(p.loss_scale >= 0, UsageError, "--loss-scale must be >= 0 (0 = dynamic)");
  MEGATON_CHECK(p.initial_loss_scale > 0 && p.min_loss_scale > 0, UsageError,
                "--initial-loss-scale and --min-loss-scale must be > 0");
  MEGATON_CHECK(p.loss_scale_window > 0 && p.hysteresis > 0, UsageError,
                "--loss-scale-window and --hysteresis must be > 0");
}

void validate_checkpoint(const CheckpointArgs& c) {
  MEGATON_CHECK(c.save.empty() || c.save_interval > 0, UsageError, "--save needs --save-interval > 0");
  MEGATON_CHECK(c.keep_last >= 0, UsageError, "--keep-last must be >= 0");
}

void validate_data(const DataArgs& d) {
  const bool mode2 = !d.train_weighted_split_paths.empty() || !d.train_weighted_split_paths_path.empty();
  const bool mode2_eval = !d.valid_weighted_split_paths.empty() || !d.valid_weighted_split_paths_path.empty() ||
                          !d.test_weighted_split_paths.empty() || !d.test_weighted_split_paths_path.empty();
  MEGATON_CHECK(!(mode2 && (!d.data_path.empty() || !d.split.empty())), UsageError,
                "--data-path/--split (mode 1) and --train-weighted-split-paths (mode 2) are exclusive");
  MEGATON_CHECK(mode2 || !mode2_eval, UsageError,
                "--valid/test-weighted-split-paths need --train-weighted-split-paths (mode 2), not --data-path");
  MEGATON_CHECK(d.train_weighted_split_paths.size() <= 1, UsageError,
                "--train-weighted-split-paths takes exactly one group (quote it: \"NAME: W S:E PREFIX, ...\"), got ",
                d.train_weighted_split_paths.size(), " values");
  MEGATON_CHECK(d.train_weighted_split_paths.empty() || d.train_weighted_split_paths_path.empty(), UsageError,
                "--train-weighted-split-paths and --train-weighted-split-paths-path are exclusive");
  MEGATON_CHECK(d.valid_weighted_split_paths.empty() || d.valid_weighted_split_paths_path.empty(), UsageError,
                "--valid-weighted-split-paths and --valid-weighted-split-paths-path are exclusive");
  MEGATON_CHECK(d.test_weighted_split_paths.empty() || d.test_weighted_split_paths_path.empty(), UsageError,
                "--test-weighted-split-paths and --test-weighted-split-paths-path are exclusive");
  MEGATON_CHECK(d.dataloader_type == "single", UsageError, "--dataloader-type: expected single, got '",
                d.dataloader_type,
                "' (cyclic, Megatron's per-epoch random sampler, is not implemented: the GPT dataset's shuffle index "
                "already orders the samples randomly)");
}

void validate_logging(LoggingArgs& l) {
  if (l.profile) {
    MEGATON_CHECK(l.profile_step_start >= 0 && l.profile_step_end > l.profile_step_start, UsageError,
                  "--profile-step-start (", l.profile_step_start, ") and --profile-step-end (", l.profile_step_end,
                  ") must satisfy 0 <= start < end");
    MEGATON_CHECK(!l.profile_ranks.empty(), UsageError, "--profile-ranks: expected at least one rank");
    for (const int64_t r : l.profile_ranks)
      MEGATON_CHECK(r >= 0, UsageError, "--profile-ranks: expected ranks >= 0, got ", r);
    if (l.profile_dir.empty()) l.profile_dir = l.tensorboard_dir;
    MEGATON_CHECK(!l.profile_dir.empty(), UsageError,
                  "--profile needs --profile-dir DIR (or --tensorboard-dir) for its trace and summary");
  }
  MEGATON_CHECK(l.tensorboard_queue_size > 0, UsageError, "--tensorboard-queue-size must be > 0 (got ",
                l.tensorboard_queue_size, ")");
  MEGATON_CHECK(l.tensorboard_log_interval > 0, UsageError, "--tensorboard-log-interval must be > 0 (got ",
                l.tensorboard_log_interval, ")");
}

int64_t padded_vocab_size(int64_t vocab, const ModelArgs& m, int tp) {
  if (m.pad_vocab_size_to > 0) {
    MEGATON_CHECK(m.pad_vocab_size_to >= vocab, UsageError, "--pad-vocab-size-to (", m.pad_vocab_size_to,
                  ") is smaller than the tokenizer's vocabulary (", vocab, ")");
    MEGATON_CHECK(m.pad_vocab_size_to % tp == 0, UsageError, "--pad-vocab-size-to (", m.pad_vocab_size_to,
                  ") is not divisible by --tensor-model-parallel-size (", tp, ")");
    return m.pad_vocab_size_to;
  }
  const int64_t multiple = static_cast<int64_t>(m.make_vocab_size_divisible_by) * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

}  // namespace megaton::cli
