#include "cli/megatron_flags.h"

#include <charconv>
#include <type_traits>

#include "cli/deepspeed_config.h"
#include "core/error.h"

namespace megaton::cli {

namespace po = boost::program_options;

namespace {

/// The default as --help shows it: floating-point values in their shortest round-trip form (0.9, not
/// 0.90000000000000002).
template <typename T>
po::typed_value<T>* val(T& field) {
  if constexpr (std::is_floating_point_v<T>) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, field);
    return po::value<T>(&field)->default_value(field, std::string(buf, r.ptr));
  } else {
    return po::value<T>(&field)->default_value(field);
  }
}

/// A flag whose Megatron default is None and whose 0 here means the same (unset): --help shows `(=None)` while the
/// field is 0, and the arguments dump prints None when it is not given (cli/parser.h).
template <typename T>
po::typed_value<T>* none_val(T& field) {
  if (field != T{0}) return val(field);
  return po::value<T>(&field)->default_value(field, "None");
}

po::typed_value<std::string>* sval(std::string& field) {
  return po::value<std::string>(&field)->default_value(field);
}

// A --no-X flag: given, it clears `field` (whose default is true).
po::typed_value<bool>* negative_switch(bool& field) {
  return po::bool_switch()->notifier([&field](bool given) {
    if (given) field = false;
  });
}

}  // namespace

// One flag a line, as `megaton train --help` lists them.
// clang-format off
void MegatronFlags::bind_model_groups(po::options_description& model, po::options_description& kernels) {
  model::GptOptions& m = config.model;
  KernelSwitches& k = switches;
  model.add_options()
      ("num-layers", none_val(m.num_layers), "number of transformer layers (required)")
      ("hidden-size", none_val(m.hidden_size), "transformer hidden size (required)")
      ("ffn-hidden-size", none_val(m.ffn_hidden_size), "MLP hidden size; 0 = 4 x hidden")
      ("num-attention-heads", none_val(m.num_attention_heads), "attention heads (required)")
      ("kv-channels", none_val(m.kv_channels), "per-head dimension; 0 = hidden / heads")
      ("max-position-embeddings", none_val(m.max_position_embeddings),
       "learned position table size (absolute/alibi); 0 = --seq-length")
      ("seq-length", none_val(m.seq_length), "sequence length (required for train)")
      ("make-vocab-size-divisible-by", val(m.make_vocab_size_divisible_by),
       "pad the vocabulary to a multiple of this x TP")
      ("pad-vocab-size-to", none_val(m.pad_vocab_size_to), "pad the vocabulary to exactly this size")
      ("layernorm-epsilon", val(m.layernorm_epsilon), "LayerNorm epsilon")
      ("position-embedding-type", sval(m.position_embedding_type), "absolute | rotary | alibi")
      ("embed-layernorm", po::bool_switch(&m.embed_layernorm), "LayerNorm after the word embedding (BLOOM)")
      ("mup", po::bool_switch(&m.mup), "muP parametrisation (init, multipliers, per-weight Adam learning rates)")
      ("mup-input-mult", val(m.mup_input_mult), "muP: multiplies the embeddings")
      ("mup-output-mult", val(m.mup_output_mult), "muP: multiplies the final LayerNorm's output, over the hidden size")
      ("mup-attn-mult", val(m.mup_attn_mult), "muP: attention scores q.k x this / head size")
      ("mup-base-hidden-size", val(m.mup_base_hidden_size), "muP: width multipliers count from 2x this hidden size")
      ("mup-base-ffn-hidden-size", val(m.mup_base_ffn_hidden_size),
       "muP: width multipliers of the MLP's output weight count from 2x this ffn size")
      ("glu-activation", sval(m.glu_activation), "geglu | swiglu | reglu | liglu (MLP becomes gated)")
      ("openai-gelu", po::bool_switch(&m.openai_gelu), "tanh-approximated GELU")
      ("apply-residual-connection-post-layernorm", po::bool_switch(&m.apply_residual_connection_post_layernorm),
       "residual taken after the LayerNorm (original BERT order)")
      ("hidden-dropout", val(m.hidden_dropout), "dropout after attention/MLP output")
      ("attention-dropout", val(m.attention_dropout), "dropout on attention probabilities")
      ("init-method-std", val(m.init_method_std), "std of the normal init; output layers use std/sqrt(2L)")
      ("init-method-xavier-uniform", po::bool_switch(&m.init_method_xavier_uniform), "xavier-uniform init")
      ("checkpoint-activations", po::bool_switch(&m.checkpoint_activations), "recompute layer activations in backward")
      ("checkpoint-num-layers", val(m.checkpoint_num_layers), "layers per recomputed chunk")
      ("no-bias-gelu-fusion", negative_switch(m.bias_gelu_fusion),
       "the exact (erf) GELU, as Megatron's unfused path (its fused bias-GELU is the tanh approximation)")
      ("no-query-key-layer-scaling", negative_switch(m.apply_query_key_layer_scaling),
       "do not scale Q.K by 1/layer_number")
      ("attention-softmax-in-fp32", po::bool_switch(&m.attention_softmax_in_fp32), "softmax in fp32")
      ("fp32-residual-connection", po::bool_switch(&m.fp32_residual_connection),
       "keep the residual stream (and pipeline activations) in fp32 with --fp16/--bf16 layers")
      ("untie-embeddings-and-output-weights", po::bool_switch(&m.untie_embeddings_and_output_weights),
       "separate output projection instead of the tied word embedding");
  kernels.add_options()
      ("no-fused-layernorm", po::bool_switch(&k.no_fused_layernorm), "ATen's LayerNorm on CUDA, not megaton's kernel")
      ("no-gemm-epilogue-fusion", po::bool_switch(&k.no_gemm_epilogue_fusion),
       "CUDA: fc1's bias and GELU as separate ATen ops instead of in its GEMM's cuBLASLt epilogue (and no DGELU "
       "epilogue in the backward)")
      ("gemm-epilogue-fusion", po::bool_switch(&k.gemm_epilogue_fusion),
       "the default (fc1's bias and GELU in its GEMM's cuBLASLt epilogue on CUDA); given, warns where it cannot apply")
      ("no-gemm-dgelu-epilogue", po::bool_switch(&k.no_gemm_dgelu_epilogue),
       "CUDA: GELU backward + fc1's bias gradient in one kernel instead of the GELU derivative in fc2's input-gradient "
       "GEMM's cuBLASLt epilogue (DGELU) and the bias gradient after")
      ("no-qkv-grad-fusion", po::bool_switch(&k.no_qkv_grad_fusion),
       "the attention's QKV gradient assembled by ATen's stack and the QKV bias gradient by a separate column sum, "
       "instead of one pass for both")
      ("no-masked-softmax-fusion", po::bool_switch(&k.no_masked_softmax_fusion),
       "as Megatron: the attention's scores, mask and softmax as separate ops (the explicit path: baddbmm, masked "
       "fill, softmax) instead of a fused attention kernel")
      ("no-bias-dropout-fusion", po::bool_switch(&k.no_bias_dropout_fusion),
       "as Megatron: the hidden dropout and the residual add as separate ops (the same as "
       "--no-dropout-layernorm-fusion)")
      ("varlen-attention", po::bool_switch(&k.varlen_attention),
       "the default (CUDA, bf16/fp16, --reset-attention-mask): each document alone through ATen's variable-length "
       "flash kernel")
      ("no-varlen-attention", po::bool_switch(&k.no_varlen_attention),
       "--reset-attention-mask's documents as Megatron's [b, 1, s, s] mask through SDPA instead (docs/training.md)")
      ("no-alibi-fold", po::bool_switch(&k.no_alibi_fold),
       "ALiBi on a GPU in bf16/fp16: its bias as Megatron adds it, rounded to the model's dtype in a [heads, s, s] "
       "mask through SDPA, instead of folded into 8 extra head dimensions of causal SDPA (exact to ~2^-24, faster; "
       "docs/model.md)")
      ("no-dropout-layernorm-fusion", po::bool_switch(&k.no_dropout_layernorm_fusion),
       "CUDA, bf16/fp16: ATen's fused dropout before the residual add instead of the hidden dropout drawn inside the "
       "LayerNorm kernel that reads the add (one mask bit per element kept for the backward, whose kernel writes the "
       "dropped-out branch's gradient too); a different mask from the same seed")
      ("dropout-layernorm-fusion", po::bool_switch(&k.dropout_layernorm_fusion),
       "the default (the hidden dropout drawn in the LayerNorm kernels on CUDA)")
      ("no-fused-lm-head-loss", po::bool_switch(&k.no_fused_lm_head_loss),
       "the LM head's logits, then the vocabulary-parallel cross-entropy as separate ops, instead of one op that writes "
       "the logits' gradient over the logits in the forward (one pass over them less, a [tokens, V/tp] buffer less)")
      ("fused-lm-head-loss", po::bool_switch(&k.fused_lm_head_loss), "the default (the LM head and its loss as one op)")
      ("no-gradient-accumulation-fusion", po::bool_switch(&k.no_gradient_accumulation_fusion),
       "linear layers return weight gradients to autograd instead of adding them to the fp32 main grads")
      ("abort-on-unmet-fused-kernel-constraints", po::bool_switch(&compat.abort_on_unmet_fused_kernel_constraints),
       "accepted for compatibility: megaton's attention has no slower fallback path to abort on");
}

void MegatronFlags::bind_model(po::options_description& d) {
  po::options_description model("network size"), kernels("kernels");
  bind_model_groups(model, kernels);
  d.add(model).add(kernels);
}

void MegatronFlags::bind(po::options_description& d) {
  po::options_description model("network size"), kernels("kernels");
  bind_model_groups(model, kernels);
  parallel::ParallelOptions& p = config.parallel;
  dist::DistOptions& dist = config.dist;
  train::LoopOptions& t = config.loop;
  optim::LrScheduleOptions& lr = config.lr;
  optim::OptimizerOptions& o = config.optimizer;
  optim::PrecisionOptions& f = config.precision;
  checkpoint::CheckpointOptions& c = config.checkpoint;
  data::DataOptions& dd = config.data;
  data::TokenizerOptions& tok = config.tokenizer;
  train::LoggingOptions& l = config.logging;
  train::CodecarbonOptions& cc = config.codecarbon;
  po::options_description parallel("distributed"), training("training"), precision("mixed precision"),
      checkpointing("checkpointing"), data("data and dataloader"), logging("logging");
  parallel.add_options()
      ("tensor-model-parallel-size", val(p.tensor_model_parallel_size), "TP: ranks sharing each layer")
      ("pipeline-model-parallel-size", val(p.pipeline_model_parallel_size), "PP: pipeline stages")
      ("num-layers-per-virtual-pipeline-stage", none_val(p.num_layers_per_virtual_pipeline_stage),
       "interleaved 1F1B: layers per virtual stage (0 = not interleaved)")
      ("pp-partition-method", sval(compat.pp_partition_method),
       "uniform | parameters | type:REGEX (DeepSpeed's, e.g. 'type:transformer|embedding'); default uniform, "
       "type:transformer with --deepspeed (the fork's GPTModelPipe)")
      ("zero-stage", val(p.zero_stage), "0 = none, 1 = shard optimizer state over DP")
      ("distributed-backend", sval(dist.distributed_backend), "nccl | mpi | auto")
      ("distributed-timeout-minutes", val(dist.distributed_timeout_minutes),
       "abort the job when a collective waits longer than this")
      ("device", sval(dist.device), "auto | cuda | cpu")
      ("dp-bucket-size-mb", val(p.dp_bucket_size_mb), "gradient all-reduce bucket size")
      ("overlap-grad-reduce", po::bool_switch(),
       "accepted (Megatron-Core's flag): each gradient bucket's reduction starts during backward by default")
      ("no-overlap-grad-reduce", negative_switch(p.overlap_grad_reduce),
       "reduce the data-parallel gradients after backward instead of overlapped with it")
      ("overlap-param-gather", po::bool_switch(),
       "accepted (Megatron-Core's flag): under ZeRO-1 the updated parameters' all-gather overlaps the next forward by "
       "default")
      ("no-overlap-param-gather", negative_switch(p.overlap_param_gather),
       "under ZeRO-1, all-gather the updated parameters at the end of the optimizer step instead")
      ("sync-tp-duplicated-parameters", po::bool_switch(&p.sync_tp_duplicated_parameters),
       "average the TP-replicated parameters (LayerNorms, row-parallel biases) over TP every iteration");
  training.add_options()
      ("micro-batch-size", none_val(t.micro_batch_size), "samples per rank per micro-step (required)")
      ("global-batch-size", none_val(t.global_batch_size), "samples per iteration; 0 = micro x DP")
      ("rampup-batch-size", po::value<std::vector<int64_t>>(&t.rampup_batch_size)->multitoken(),
       "START INCR SAMPLES: batch-size ramp-up (sample-based training only)")
      ("train-iters", none_val(t.train_iters), "iterations to train (exclusive with --train-samples)")
      ("train-samples", none_val(t.train_samples), "samples to train (exclusive with --train-iters)")
      ("train-tokens", none_val(t.train_tokens), "also stop once this many tokens are consumed (over all runs)")
      ("deepspeed", po::bool_switch(&compat.deepspeed), "take ZeRO, fp16 scaler, clipping, batch sizes from --deepspeed_config")
      ("deepspeed_config", sval(compat.deepspeed_config), "DeepSpeed JSON (with --deepspeed; docs/training.md)")
      ("deepspeed-activation-checkpointing", po::bool_switch(&compat.deepspeed_activation_checkpointing),
       "accepted: --checkpoint-activations recomputes with megaton's own checkpointing")
      ("deepspeed_mpi", po::bool_switch(&compat.deepspeed_mpi), "accepted: megaton always starts through MPI")
      ("log-interval", val(t.log_interval), "iterations between log lines")
      ("exit-interval", none_val(t.exit_interval), "save and exit when iteration % N == 0")
      ("exit-duration-in-mins", none_val(t.exit_duration_in_mins),
       "save and exit after this many minutes since the job's processes started")
      ("kill-switch-path", sval(t.kill_switch_path), "save and exit when this file exists")
      ("max-nan-iterations", val(t.max_nan_iterations),
       "bf16/fp32: stop with an error after N iterations in a row whose gradients hold NaN or inf (their updates are "
       "skipped); 0 never stops")
      ("skip-train-iteration-range", po::value<std::vector<std::string>>(&t.skip_train_iteration_range)->multitoken(),
       "A-B ...: skip the data of these iterations")
      ("eval-interval", val(t.eval_interval), "iterations between validation runs")
      ("eval-iters", val(t.eval_iters), "batches per validation run")
      ("eval-only", po::bool_switch(&t.eval_only), "only evaluate")
      ("seed", val(t.seed), "random seed")
      ("optimizer", sval(o.kind), "adam | sgd")
      ("lr", po::value<double>(&lr.lr), "peak learning rate (required for training)")
      ("min-lr", val(lr.min_lr), "learning-rate floor")
      ("lr-decay-style", sval(lr.lr_decay_style), "constant | linear | cosine")
      ("lr-decay-iters", none_val(lr.lr_decay_iters), "decay span in iterations; 0 = --train-iters")
      ("lr-decay-samples", none_val(lr.lr_decay_samples), "decay span in samples; 0 = --train-samples")
      ("lr-decay-tokens", none_val(lr.lr_decay_tokens), "decay span in tokens")
      ("lr-warmup-fraction", val(lr.lr_warmup_fraction), "warm-up as a fraction of the decay span")
      ("lr-warmup-iters", val(lr.lr_warmup_iters), "warm-up iterations")
      ("lr-warmup-samples", val(lr.lr_warmup_samples), "warm-up samples")
      ("override-lr-scheduler", po::bool_switch(&lr.override_lr_scheduler), "ignore the checkpoint's LR schedule")
      ("use-checkpoint-lr-scheduler", po::bool_switch(&lr.use_checkpoint_lr_scheduler),
       "take the LR schedule from the checkpoint")
      ("weight-decay", val(o.weight_decay), "decoupled weight decay (AdamW)")
      ("clip-grad", val(o.clip_grad), "clip the global gradient L2 norm to this; 0 = off")
      ("adam-beta1", val(o.adam_beta1), "Adam beta1")
      ("adam-beta2", val(o.adam_beta2), "Adam beta2")
      ("adam-eps", val(o.adam_eps), "Adam epsilon")
      ("sgd-momentum", val(o.sgd_momentum), "SGD momentum")
      ("no-check-for-nan-in-loss-and-grad", negative_switch(o.skip_nonfinite),
       "bf16/fp32: apply updates whose gradients hold NaN or inf instead of skipping them (Megatron-LM's name); "
       "saves the host read of the grad norm each step")
      ("use-bnb-optimizer", po::bool_switch(&o.use_bnb),
       "bitsandbytes' blockwise 8-bit Adam states (2 bytes per parameter instead of 8); as in the fork, also adds "
       "the embedding LayerNorm and a xavier-uniform word-embedding init")
      ("no-fused-adam", negative_switch(o.use_fused_adam),
       "CUDA: update with the unfused ATen ops instead of the one-pass fused Adam kernel")
      ("dry-run", po::bool_switch(&t.dry_run),
       "print the resolved parallel layout, memory per GPU and model FLOPs per iteration, then exit");
  precision.add_options()
      ("fp16", po::bool_switch(&f.fp16), "fp16 weights and activations, fp32 master weights, loss scaling")
      ("bf16", po::bool_switch(&f.bf16), "bf16 weights and activations, fp32 master weights")
      ("loss-scale", none_val(f.loss_scale), "static loss scale; 0 = dynamic")
      ("initial-loss-scale", val(f.initial_loss_scale), "initial dynamic loss scale")
      ("min-loss-scale", val(f.min_loss_scale), "dynamic loss-scale floor")
      ("loss-scale-window", val(f.loss_scale_window), "clean steps before the scale doubles")
      ("hysteresis", val(f.hysteresis), "overflows tolerated before the scale halves")
      ("accumulate-allreduce-grads-in-fp32", po::bool_switch(&compat.accumulate_allreduce_grads_in_fp32),
       "accepted: gradients always accumulate and all-reduce in fp32 main grads")
      ("fp16-lm-cross-entropy", po::bool_switch(&compat.fp16_lm_cross_entropy),
       "accepted with --fp16: the cross-entropy always reads the fp16 logits, no fp32 copy")
      ("fp8-format", sval(config.fp8.format),
       "e4m3 | hybrid (e5m2 output gradients): the transformer layers' linear GEMMs in FP8")
      ("fp8-recipe", sval(config.fp8.recipe), "delayed (amax history) | tensorwise (current scaling)")
      ("fp8-margin", val(config.fp8.margin), "scale = FP8 maximum / 2^margin / amax")
      ("fp8-amax-history-len", val(config.fp8.amax_history_len), "iterations of amax history (delayed recipe)")
      ("fp8-amax-compute-algo", sval(config.fp8.amax_compute_algo),
       "most_recent | max: the amax the delayed scale is computed from")
      ("fp8-interval", val(compat.fp8_interval), "accepted, no effect (deprecated by Transformer Engine)")
      ("no-fp8-wgrad", negative_switch(config.fp8.wgrad), "the weight-gradient GEMMs in 16 bits, not FP8")
      ("no-fp8-cast-fusion", negative_switch(config.fp8.fused_casts),
       "CUDA: each FP8 cast a pass of its own (the MLP's activation written in 16 bits and then cast; the output "
       "gradients cast after their bias-gradient and GELU kernels) instead of inside the kernels that make them");
  checkpointing.add_options()
      ("save", sval(c.save), "checkpoint directory to save to")
      ("load", sval(c.load), "checkpoint directory to resume from")
      ("save-interval", none_val(c.save_interval), "iterations between checkpoints")
      ("no-save-optim", negative_switch(c.save_optim), "do not save optimizer state")
      ("no-save-rng", negative_switch(c.save_rng), "do not save RNG state")
      ("no-load-optim", negative_switch(c.load_optim), "do not load optimizer state")
      ("no-load-rng", negative_switch(c.load_rng), "do not load RNG state")
      ("finetune", po::bool_switch(&c.finetune), "load weights only and start at iteration 0")
      ("reset-progress", po::bool_switch(&c.reset_progress),
       "start at iteration 0 with no samples consumed, loading weights (and the optimizer and RNG states unless "
       "--no-load-optim / --no-load-rng)")
      ("keep-last", val(c.keep_last), "keep only the newest K checkpoints; 0 = all")
      ("async-save", po::bool_switch(&c.async_save),
       "training waits only while the state is copied to host memory; the checkpoint is written on a thread of its "
       "own, as atomically as a synchronous save, and waited for before the next save and at the end")
      ("universal-checkpoint", po::bool_switch(),
       "accepted: megaton's checkpoints load at any TP/PP/DP layout without conversion");
  data.add_options()
      ("data-path", po::value<std::vector<std::string>>(&dd.data_path)->multitoken(),
       "PREFIX, or W1 PREFIX1 W2 PREFIX2 ... to blend")
      ("split", sval(dd.split), "train,valid,test proportions (default 969, 30, 1)")
      ("data-impl", sval(dd.data_impl), "mmap (the only implementation; infer/lazy/cached are read as mmap)")
      ("tokenizer-type", sval(tok.tokenizer_type), "GPT2BPETokenizer | PretrainedFromHF")
      ("tokenizer-name-or-path", sval(tok.tokenizer_name_or_path), "directory holding tokenizer.json, or a hub name (org/name) in the Hugging Face cache (HF_HOME)")
      ("vocab-file", sval(tok.vocab_file), "GPT-2 vocab.json / encoder.json")
      ("merge-file", sval(tok.merge_file), "GPT-2 merges.txt / vocab.bpe")
      ("data-cache-path", sval(dd.data_cache_path), "where sample indices are cached (default: next to the data)")
      ("reset-position-ids", po::bool_switch(&dd.reset_position_ids), "restart positions after each EOD")
      ("reset-attention-mask", po::bool_switch(&dd.reset_attention_mask), "no attention across EOD")
      ("eod-mask-loss", po::bool_switch(&dd.eod_mask_loss), "no loss on EOD tokens")
      ("loss-on-targets-only", po::bool_switch(&dd.loss_on_targets_only),
       "pretrain-prefix-lm: no loss on each prefix; finetune-t0: no loss on the inputs (no effect in train, whose "
       "causal samples have no prefix, as in pretrain_gpt.py)")
      ("reweight-loss-based-on-position-frequency", po::bool_switch(&dd.reweight_loss),
       "pretrain-prefix-lm: weigh the loss at position i by 2 (s - i) / (s + 1) (no effect in the other commands)")
      ("norm-target-loss", po::bool_switch(&dd.norm_target_loss),
       "finetune-t0: each target's tokens weigh 1 in total, so short and long targets count alike")
      ("mmap-warmup", po::bool_switch(&dd.mmap_warmup), "read the datasets' files once before training")
      ("num-workers", val(compat.num_workers), "accepted for compatibility (samples are mmap reads; no loader threads)")
      ("valid-num-workers", val(compat.valid_num_workers), "accepted for compatibility, as --num-workers")
      ("dataloader-type", sval(dd.dataloader_type),
       "single (Megatron's in-order sampler, resumable at the consumed samples; the only one implemented)")
      ("train-weighted-split-paths", po::value<std::vector<std::string>>(&dd.train_weighted_split_paths)->multitoken(),
       "mode 2: one group 'NAME: W1 S1:E1 P1, W2 S2:E2 P2' (START:END fractions of each dataset's documents)")
      ("valid-weighted-split-paths", po::value<std::vector<std::string>>(&dd.valid_weighted_split_paths)->multitoken(),
       "mode 2: validation groups, each evaluated and logged under its NAME")
      ("test-weighted-split-paths", po::value<std::vector<std::string>>(&dd.test_weighted_split_paths)->multitoken(),
       "mode 2: test groups")
      ("train-weighted-split-paths-path", sval(dd.train_weighted_split_paths_path),
       "file holding the --train-weighted-split-paths groups, double-quoted")
      ("valid-weighted-split-paths-path", sval(dd.valid_weighted_split_paths_path),
       "file holding the --valid-weighted-split-paths groups, double-quoted")
      ("test-weighted-split-paths-path", sval(dd.test_weighted_split_paths_path),
       "file holding the --test-weighted-split-paths groups, double-quoted");
  logging.add_options()
      ("tensorboard-dir", sval(l.tensorboard_dir), "write TensorBoard event files here")
      ("tensorboard-log-interval", val(l.tensorboard_log_interval), "iterations between TensorBoard points")
      ("metrics-file", sval(l.metrics_file), "append one JSON line per logged iteration")
      ("log-level", sval(l.log_level), "rank 0's level: debug | info | warning | error | critical | passive")
      ("log-level-replica", sval(l.log_level_replica), "the other ranks' level (default: --log-level)")
      ("log-path", sval(l.log_path), "also write the resolved arguments to DIR/args_<time>.txt")
      ("codecarbon-dir", sval(cc.dir),
       "write energy and emissions as CodeCarbon's CSV: DIR/emissions-RRR.csv per rank, DIR/emissions.csv for the job "
       "(GPU energy from NVML, CPU from RAPL where readable)")
      ("codecarbon-country-iso-code", sval(cc.country_iso_code), "the grid's country in the CodeCarbon log")
      ("codecarbon-carbon-intensity", po::value<double>(&cc.carbon_intensity),
       "g CO2eq per kWh of the grid (default: 55, CodeCarbon's figure for FRA)")
      ("codecarbon-measure-power-secs", val(cc.measure_power_secs),
       "seconds between reads of the energy counters")
      ("log-timers-to-tensorboard", po::bool_switch(&l.log_timers_to_tensorboard), "timers to TensorBoard")
      ("log-validation-ppl-to-tensorboard", po::bool_switch(&l.log_validation_ppl_to_tensorboard),
       "validation perplexity to TensorBoard")
      ("log-batch-size-to-tensorboard", po::bool_switch(&l.log_batch_size_to_tensorboard), "batch size to TensorBoard")
      ("tensorboard-queue-size", val(l.tensorboard_queue_size), "records buffered before the events file is flushed")
      ("log-num-zeros-in-grad", po::bool_switch(&o.log_num_zeros_in_grad), "count the zeros of the gradient (log line)")
      ("log-params-norm", po::bool_switch(&l.log_params_norm), "the L2 norm of the weights (log line, TensorBoard)")
      ("no-log-loss-scale-to-tensorboard", negative_switch(l.log_loss_scale_to_tensorboard), "no loss-scale scalar in TensorBoard")
      ("no-log-learnig-rate-to-tensorboard", negative_switch(l.log_learning_rate_to_tensorboard), "no learning-rate scalar in TensorBoard (Megatron's spelling)")
      ("no-log-learning-rate-to-tensorboard", negative_switch(l.log_learning_rate_to_tensorboard), "the same, spelled right")
      ("profile", po::bool_switch(&l.profile), "record iterations with LibTorch's profiler (trace + summary table)")
      ("profile-step-start", val(l.profile_step_start), "profile from after this iteration")
      ("profile-step-end", val(l.profile_step_end), "... up to and including this iteration")
      ("profile-ranks", po::value<std::vector<int64_t>>(&l.profile_ranks)->multitoken(), "global ranks to profile")
      ("profile-dir", sval(l.profile_dir), "where rank<R>.trace.json and rank<R>.summary.txt go (default: --tensorboard-dir)");
  // Megatron's order (network size, training, mixed precision, distributed, checkpointing, data, logging), then
  // megaton's own kernel switches, then the compatibility groups.
  d.add(model).add(training).add(precision).add(parallel).add(checkpointing).add(data).add(logging).add(kernels);
  bind_compatibility_flags(d, compat);
}
// clang-format on

void MegatronFlags::resolve() {
  const KernelSwitches& k = switches;
  MEGATON_CHECK(!(k.gemm_epilogue_fusion && k.no_gemm_epilogue_fusion), UsageError,
                "--gemm-epilogue-fusion and --no-gemm-epilogue-fusion contradict each other");
  MEGATON_CHECK(!(k.fused_lm_head_loss && k.no_fused_lm_head_loss), UsageError,
                "--fused-lm-head-loss and --no-fused-lm-head-loss contradict each other");
  // --no-bias-dropout-fusion is Megatron's name for the same fusion.
  const bool no_dropout_fusion = k.no_dropout_layernorm_fusion || k.no_bias_dropout_fusion;
  MEGATON_CHECK(!(k.dropout_layernorm_fusion && no_dropout_fusion), UsageError,
                "--dropout-layernorm-fusion and --no-dropout-layernorm-fusion contradict each other (",
                k.no_bias_dropout_fusion ? "--no-bias-dropout-fusion is Megatron's name for the second" : "both given",
                ")");
  MEGATON_CHECK(!(k.varlen_attention && k.no_varlen_attention), UsageError,
                "--varlen-attention and --no-varlen-attention contradict each other");
  ops::KernelOptions& o = config.kernels;
  o.fused_layernorm = !k.no_fused_layernorm;
  o.gemm_epilogue = !k.no_gemm_epilogue_fusion;
  o.gemm_epilogue_asked = k.gemm_epilogue_fusion;
  o.gemm_dgelu_epilogue = !k.no_gemm_dgelu_epilogue;
  o.qkv_grad_fusion = !k.no_qkv_grad_fusion;
  o.masked_softmax_fusion = !k.no_masked_softmax_fusion;
  o.varlen_attention = !k.no_varlen_attention;
  o.alibi_fold = !k.no_alibi_fold;
  o.dropout_layernorm_fusion = !no_dropout_fusion;
  o.fused_lm_head_loss = !k.no_fused_lm_head_loss;
  o.gradient_accumulation_fusion = !k.no_gradient_accumulation_fusion;
  if (compat.encoder_seq_length > 0) {
    MEGATON_CHECK(config.model.seq_length == 0, UsageError,
                  "--encoder-seq-length is pretrain_gpt.py's other name for --seq-length; give one of them");
    config.model.seq_length = compat.encoder_seq_length;
  }
  if (!compat.deepscale_config.empty()) {
    MEGATON_CHECK(compat.deepspeed_config.empty(), UsageError,
                  "--deepscale_config and --deepspeed_config given together (DeepSpeed refuses both too)");
    compat.deepspeed_config = compat.deepscale_config;
  }
  MEGATON_CHECK(compat.ddp_impl == "local" || compat.ddp_impl == "torch", UsageError, "--DDP-impl '", compat.ddp_impl,
                "': expected local or torch");
  MEGATON_CHECK(compat.remote_device == "none", UsageError, "--remote-device ", compat.remote_device,
                ": ZeRO-3 parameter offload is not supported (megaton implements ZeRO stages 0 and 1); use none");
  config.parallel.pp_partition_method = !compat.pp_partition_method.empty() ? compat.pp_partition_method
                                        : compat.deepspeed                  ? "type:transformer"
                                                                            : "uniform";
  if (config.optimizer.use_bnb) {  // the fork's VocabParallelEmbedding under --use-bnb-optimizer
    config.model.embed_layernorm = true;
    config.model.xavier_word_embedding = true;
  }
  MEGATON_CHECK(!compat.fp16_lm_cross_entropy || config.precision.fp16, UsageError,
                "--fp16-lm-cross-entropy needs --fp16 (lm cross entropy in fp16 is only supported in fp16 mode)");
}

void MegatronFlags::default_tokenizer() {
  data::TokenizerOptions& tok = config.tokenizer;
  if (tok.tokenizer_type.empty() && config.vocab_size == 0) tok.tokenizer_type = "GPT2BPETokenizer";
}

void MegatronFlags::apply_deepspeed() {
  if (!compat.deepspeed && compat.deepspeed_config.empty()) return;
  MEGATON_CHECK(compat.deepspeed && !compat.deepspeed_config.empty(), UsageError,
                compat.deepspeed ? "--deepspeed needs --deepspeed_config FILE (the DeepSpeed JSON)"
                                 : "--deepspeed_config is read only with --deepspeed (as in Megatron-DeepSpeed)");
  for (std::string& note : apply_deepspeed_config(compat.deepspeed_config, config))
    config.notes.push_back("--deepspeed_config " + compat.deepspeed_config + ": " + note);
}

}  // namespace megaton::cli
