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

#include "cli/compatibility_flags.h"
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

class MegatronFlags {
 public:
  MegatronFlags() = default;
  MegatronFlags(const MegatronFlags&) = delete;  // the options descriptions point into it
  MegatronFlags& operator=(const MegatronFlags&) = delete;

  /// Adds every group to `d`, bound to this object's fields, as `--help` lists them: Megatron's (network size,
  /// training, mixed precision, distributed, checkpointing, data and dataloader, logging), then kernels, then the
  /// compatibility groups (aliases, accepted without effect, refused).
  void bind(boost::program_options::options_description& d);
  /// Only the network size and kernels groups (what `megaton plan` reads of a training command line).
  void bind_model(boost::program_options::options_description& d);
  /// After parsing: the kernel switches into config.kernels; the aliases (--encoder-seq-length, --deepscale_config);
  /// UsageError for contradicting pairs and for the compatibility flags' own rules.
  void resolve();
  /// pretrain_gpt.py's default --tokenizer-type, GPT2BPETokenizer, unless a tokenizer is given or --vocab-size
  /// stands in for one (after the checkpoint's settings are taken: cli/checkpoint_args.h).
  void default_tokenizer();
  /// --deepspeed / --deepspeed_config given together or not at all; with them, the JSON applied over config (after
  /// config.parallel.validate). Its notes go to config.notes.
  void apply_deepspeed();

  train::TrainConfig config;
  KernelSwitches switches;
  CompatibilityFlags compat;

 private:
  void bind_model_groups(boost::program_options::options_description& model,
                         boost::program_options::options_description& kernels);
};

}  // namespace megaton::cli
