// Megatron-DeepSpeed's command line, typed. Each group is a plain struct whose fields keep Megatron's flag names
// (--num-layers -> num_layers) and defaults; add_*_options binds a group to Boost.Program_options, and validate_*
// applies Megatron's cross-argument rules (reference inventory §2.13), raising UsageError naming the flags and their
// values, before anything is allocated.
#pragma once
#include <boost/program_options.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megaton::cli {

namespace po = boost::program_options;

/// --num-layers ... (_add_network_size_args) and the BigScience variants.
struct ModelArgs {
  int num_layers = 0;
  int hidden_size = 0;
  int ffn_hidden_size = 0;  // 0 -> 4*hidden (2*ffn inputs for GLU are derived in the model)
  int num_attention_heads = 0;
  int kv_channels = 0;  // 0 -> hidden/heads
  int max_position_embeddings = 0;
  int seq_length = 0;
  int make_vocab_size_divisible_by = 128;
  int pad_vocab_size_to = 0;
  double layernorm_epsilon = 1e-5;
  std::string position_embedding_type = "absolute";  // absolute | rotary | alibi
  bool embed_layernorm = false;
  std::string glu_activation;  // "" | geglu | swiglu | reglu | liglu
  bool openai_gelu = false;
  bool apply_residual_connection_post_layernorm = false;
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  double init_method_std = 0.02;
  bool init_method_xavier_uniform = false;
  bool checkpoint_activations = false;
  int checkpoint_num_layers = 1;
  bool no_bias_gelu_fusion = false;
  bool no_fused_layernorm = false;    // ATen's LayerNorm on CUDA instead of kernels/layer_norm_kernels.cu (not saved)
  bool gemm_epilogue_fusion = false;  // asked for explicitly: warn where the epilogue cannot apply (not saved)
  bool no_gemm_epilogue_fusion = false;   // the MLP's fc1 GEMM without the GELU epilogue (not saved)
  bool no_gemm_dgelu_epilogue = false;    // GELU backward by the kernel, not fc2's input-gradient GEMM (not saved)
  bool no_qkv_grad_fusion = false;        // QKV gradient by stack, its bias gradient by a separate sum (not saved)
  bool varlen_attention = false;          // the default, asked for (checked against the next one)
  bool no_varlen_attention = false;       // documents through SDPA with their mask, not varlen flash (not saved)
  bool no_alibi_fold = false;             // ALiBi as a 16-bit [heads, s, s] mask, not folded into the heads (not saved)
  bool no_masked_softmax_fusion = false;  // Megatron's: the explicit attention path (scores, softmax; not saved)
  bool no_bias_dropout_fusion = false;    // Megatron's: sets no_dropout_layernorm_fusion (not saved)
  bool dropout_layernorm_fusion = false;  // the default, asked for (checked against the next one)
  bool no_dropout_layernorm_fusion = false;  // CUDA: ATen's dropout before the add, not in the LayerNorm (not saved)
  bool fused_lm_head_loss = false;           // asked for explicitly (the default; checked against the next one)
  bool no_fused_lm_head_loss = false;  // logits, then the cross-entropy, as separate ops (not saved; docs/model.md)
  bool no_gradient_accumulation_fusion = false;  // weight gradients via autograd + DataParallel's hook (not saved)
  bool apply_query_key_layer_scaling = true;     // --no-query-key-layer-scaling clears it
  bool attention_softmax_in_fp32 = false;
  bool fp32_residual_connection = false;  // 16-bit layers, fp32 residual stream (needs --fp16/--bf16; not saved)
  bool untie_embeddings_and_output_weights = false;
  bool abort_on_unmet_fused_kernel_constraints = false;  // accepted: no silent slow fallback exists (docs/model.md)
};

/// --tensor-model-parallel-size ... (_add_distributed_args), plus ZeRO.
struct ParallelArgs {
  int tensor_model_parallel_size = 1;
  int pipeline_model_parallel_size = 1;
  int num_layers_per_virtual_pipeline_stage = 0;
  std::string pp_partition_method = "uniform";  // uniform | parameters | type:transformer (accepted as uniform)
  int zero_stage = 0;
  std::string distributed_backend = "auto";  // nccl | mpi | gloo (= mpi) | auto
  double distributed_timeout_minutes = 10.0;
  std::string device = "auto";  // auto | cuda | cpu
  int64_t dp_bucket_size_mb = 25;
  bool sync_tp_duplicated_parameters = false;  // average TP-replicated params over TP every iteration (BigScience)
  // Derived by validate_parallel():
  int data_parallel_size = 1;
  int world_size = 1;
};

/// --micro-batch-size ... (_add_training_args, _add_learning_rate_args, _add_regularization_args).
struct TrainingArgs {
  int micro_batch_size = 0;
  int global_batch_size = 0;               // 0 -> micro * DP
  std::vector<int64_t> rampup_batch_size;  // START INCR SAMPLES
  int64_t train_iters = 0;
  int64_t train_samples = 0;
  int64_t train_tokens = 0;      // --train-tokens: also stop once this many tokens are consumed (0: no token budget)
  bool deepspeed = false;        // --deepspeed: read --deepspeed_config (cli/deepspeed_config.h)
  std::string deepspeed_config;  // --deepspeed_config FILE
  bool deepspeed_activation_checkpointing = false;  // accepted: --checkpoint-activations is megaton's own recompute
  bool deepspeed_mpi = false;                       // accepted: megaton always starts through MPI
  int log_interval = 100;
  int64_t exit_interval = 0;
  double exit_duration_in_mins = 0;  // Megatron takes an int; fractions are accepted too (tests use seconds)
  std::string kill_switch_path;
  std::vector<std::string> skip_train_iteration_range;
  int64_t eval_interval = 1000;
  int64_t eval_iters = 100;
  bool eval_only = false;
  int64_t seed = 1234;
  std::string optimizer = "adam";
  double lr = -1.0;  // < 0: unset
  double min_lr = 0.0;
  std::string lr_decay_style = "linear";
  int64_t lr_decay_iters = 0;
  int64_t lr_decay_samples = 0;
  int64_t lr_decay_tokens = 0;
  double lr_warmup_fraction = -1.0;  // < 0: unset
  int64_t lr_warmup_iters = 0;
  int64_t lr_warmup_samples = 0;
  bool override_lr_scheduler = false;
  bool use_checkpoint_lr_scheduler = false;
  double weight_decay = 0.01;
  double clip_grad = 1.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double sgd_momentum = 0.9;
  bool no_fused_adam = false;           // CUDA: the ATen Adam path instead of kernels/adam_kernels.cu
  bool dry_run = false;
  // Derived:
  int num_micro_batches = 1;  // at full global batch
};

/// --fp16 / --bf16 and the loss scaler (_add_mixed_precision_args).
struct PrecisionArgs {
  bool fp16 = false;
  bool bf16 = false;
  double loss_scale = 0.0;  // 0: dynamic
  double initial_loss_scale = 4294967296.0;
  double min_loss_scale = 1.0;
  int loss_scale_window = 1000;
  int hysteresis = 2;
  bool accumulate_allreduce_grads_in_fp32 = false;  // accepted: megaton's main grads are always fp32 (docs/optim.md)
  bool fp16_lm_cross_entropy = false;  // accepted with --fp16: the loss always reads the fp16 logits (docs/model.md)
};

/// --save/--load (_add_checkpointing_args).
struct CheckpointArgs {
  std::string save;
  std::string load;
  int64_t save_interval = 0;
  bool no_save_optim = false;
  bool no_save_rng = false;
  bool no_load_optim = false;
  bool no_load_rng = false;
  bool finetune = false;
  int keep_last = 0;  // 0: keep every checkpoint
};

/// --data-path ... (_add_data_args): the dataset and the tokenizer.
struct DataArgs {
  std::vector<std::string> data_path;
  std::string split;  // "" -> "969, 30, 1"
  std::string data_impl = "mmap";
  std::string tokenizer_type;
  std::string tokenizer_name_or_path;
  std::string vocab_file;
  std::string merge_file;
  std::string data_cache_path;
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  bool eod_mask_loss = false;
  int num_workers = 2;
  int valid_num_workers = 2;
  std::string dataloader_type = "single";  // Megatron's sampler names; only "single" (in-order) is implemented
  // "Mode 2" (BigScience): groups "NAME: W1 S1:E1 P1, W2 S2:E2 P2" (data/weighted_split_paths.h); exclusive with
  // --data-path/--split. The *_path variants name a file holding the groups as double-quoted strings.
  std::vector<std::string> train_weighted_split_paths, valid_weighted_split_paths, test_weighted_split_paths;
  std::string train_weighted_split_paths_path, valid_weighted_split_paths_path, test_weighted_split_paths_path;
};

/// --tensorboard-dir ... (_add_logging_args).
struct LoggingArgs {
  std::string tensorboard_dir;
  int tensorboard_log_interval = 1;
  std::string metrics_file;  // JSONL of every logged iteration
  std::string log_level = "info";
  bool log_timers_to_tensorboard = false;
  bool log_validation_ppl_to_tensorboard = false;
  bool log_batch_size_to_tensorboard = false;
  int tensorboard_queue_size = 1000;             // records buffered before the events file is flushed
  bool log_num_zeros_in_grad = false;            // "num zeros" of the (clipped) gradient in the log line
  bool log_params_norm = false;                  // "params norm" of the fp32 masters in the log line
  bool log_loss_scale_to_tensorboard = true;     // --no-log-loss-scale-to-tensorboard clears it
  bool log_learning_rate_to_tensorboard = true;  // --no-log-learnig-rate-to-tensorboard (Megatron's spelling) clears it
  // --profile: LibTorch's (Kineto) profiler over iterations profile_step_start+1 .. profile_step_end on these ranks
  bool profile = false;
  int64_t profile_step_start = 10;
  int64_t profile_step_end = 12;
  std::vector<int64_t> profile_ranks{0};
  std::string profile_dir;  // default: tensorboard_dir
};

void add_model_options(po::options_description& d, ModelArgs& a);
void add_parallel_options(po::options_description& d, ParallelArgs& a);
void add_training_options(po::options_description& d, TrainingArgs& a);
void add_precision_options(po::options_description& d, PrecisionArgs& a);
void add_checkpoint_options(po::options_description& d, CheckpointArgs& a);
void add_data_options(po::options_description& d, DataArgs& a);
void add_logging_options(po::options_description& d, LoggingArgs& a);

/// All seven groups above, each as a titled section of `d` (the flags of `megaton train`, `generate` and `eval`).
void add_megatron_options(po::options_description& d, ModelArgs& model, ParallelArgs& parallel, TrainingArgs& training,
                          PrecisionArgs& precision, CheckpointArgs& checkpoint, DataArgs& data, LoggingArgs& logging);

/// Fills derived fields and checks the model group alone (heads divide hidden, positions vs seq length, ...).
void validate_model(ModelArgs& m);
/// Fills data_parallel_size from the world; checks divisibility of heads/layers by TP/PP.
void validate_parallel(ParallelArgs& p, const ModelArgs& m, int world_size);
/// Global batch, micro-batches, ramp-up, iteration vs sample mode, LR schedule flags (Megatron §2.13 and §7.2).
void validate_training(TrainingArgs& t, const ParallelArgs& p);
/// --fp16/--bf16 and the loss scaler; the model's precision flags (--fp32-residual-connection) against them.
void validate_precision(const PrecisionArgs& p, const ModelArgs& m);
void validate_checkpoint(const CheckpointArgs& c);
/// Mode 1 (--data-path/--split) vs mode 2 (--*-weighted-split-paths) exclusivity; group files are read later.
void validate_data(const DataArgs& d);
/// Also fills profile_dir from tensorboard_dir.
void validate_logging(LoggingArgs& l);

/// The padded vocabulary: smallest multiple of make_vocab_size_divisible_by*TP >= vocab (or --pad-vocab-size-to).
int64_t padded_vocab_size(int64_t vocab, const ModelArgs& m, int tp);

}  // namespace megaton::cli
