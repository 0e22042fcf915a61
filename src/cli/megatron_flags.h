// Megatron-DeepSpeed's command line (pretrain_gpt.py's flags, which generate and eval scripts pass too), mapped onto
// the options structs of the subsystems they configure (train::TrainConfig). Flag names, defaults and meanings are
// Megatron's; a --no-X flag clears the positive field X. Flags that cannot change what megaton computes are accepted
// and named in --help as such.
//
//   cli::MegatronFlags f;                 // holds the parsed values; must not move once bound
//   po::options_description d;
//   f.bind(d);                            // every group, titled as `megaton train --help` lists them
//   cli::parse_args("train", ..., d, ...);
//   f.resolve();                          // --X / --no-X pairs -> f.config.kernels; contradictions are UsageErrors
#pragma once
#include <boost/program_options.hpp>
#include <string>

#include "train/train_config.h"

namespace megaton::cli {

/// The kernel flags as given, in their positive and negative spellings: resolve() turns them into KernelOptions and
/// refuses a flag given with its opposite.
struct KernelSwitches {
  bool gemm_epilogue_fusion = false, no_gemm_epilogue_fusion = false;
  bool fused_lm_head_loss = false, no_fused_lm_head_loss = false;
  bool dropout_layernorm_fusion = false, no_dropout_layernorm_fusion = false, no_bias_dropout_fusion = false;
  bool varlen_attention = false, no_varlen_attention = false;
  bool no_fused_layernorm = false, no_gemm_dgelu_epilogue = false, no_qkv_grad_fusion = false;
  bool no_alibi_fold = false, no_masked_softmax_fusion = false, no_gradient_accumulation_fusion = false;
};

/// Flags taken for compatibility that change nothing megaton computes, and DeepSpeed's launch flags.
struct CompatibilityFlags {
  bool deepspeed = false;                           // --deepspeed: read --deepspeed_config (cli/deepspeed_config.h)
  std::string deepspeed_config;                     // --deepspeed_config FILE
  bool deepspeed_activation_checkpointing = false;  // --checkpoint-activations is megaton's own recompute
  bool deepspeed_mpi = false;                       // megaton always starts through MPI
  bool accumulate_allreduce_grads_in_fp32 = false;  // main grads are always fp32
  bool fp16_lm_cross_entropy = false;               // the loss always reads the 16-bit logits (needs --fp16)
  bool abort_on_unmet_fused_kernel_constraints = false;
  int num_workers = 2, valid_num_workers = 2;  // samples are mmap reads: no loader threads
};

class MegatronFlags {
 public:
  MegatronFlags() = default;
  MegatronFlags(const MegatronFlags&) = delete;  // the options descriptions point into it
  MegatronFlags& operator=(const MegatronFlags&) = delete;

  /// Adds every group (model, kernels, parallelism, training, mixed precision, checkpointing, data and tokenizer,
  /// logging) to `d`, bound to this object's fields.
  void bind(boost::program_options::options_description& d);
  /// Only the model and kernels groups (what `megaton plan` reads of a training command line).
  void bind_model(boost::program_options::options_description& d);
  /// After parsing: the kernel switches into config.kernels; UsageError for contradicting pairs and for the
  /// compatibility flags' own rules (--fp16-lm-cross-entropy without --fp16).
  void resolve();
  /// --deepspeed / --deepspeed_config given together or not at all; with them, the JSON applied over config (after
  /// config.parallel.validate). Its notes go to config.notes.
  void apply_deepspeed();

  train::TrainConfig config;
  KernelSwitches switches;
  CompatibilityFlags compat;
};

}  // namespace megaton::cli
