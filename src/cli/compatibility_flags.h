// Megatron-DeepSpeed's flags that megaton takes without a subsystem of its own behind them (docs/megatron-compat.md):
// aliases (--encoder-seq-length, DeepSpeed's --deepscale*), flags that cannot change what megaton computes (other
// models' and tasks' flags, DeepSpeed's memory options, launcher flags), and flags that would change the run in a way
// megaton does not implement, refused by name with the reason.
#pragma once
#include <boost/program_options.hpp>
#include <string>

namespace megaton::cli {

/// The values of the accepted flags that something reads (aliases, launcher values, choices to check).
struct CompatibilityFlags {
  bool deepspeed = false;                           // --deepspeed: read --deepspeed_config (cli/deepspeed_config.h)
  std::string deepspeed_config;                     // --deepspeed_config FILE
  std::string deepscale_config;                     // DeepSpeed's deprecated name of --deepspeed_config
  bool deepspeed_activation_checkpointing = false;  // --checkpoint-activations is megaton's own recompute
  bool deepspeed_mpi = false;                       // megaton always starts through MPI
  bool accumulate_allreduce_grads_in_fp32 = false;  // main grads are always fp32
  bool fp16_lm_cross_entropy = false;               // the loss always reads the 16-bit logits (needs --fp16)
  int fp8_interval = 1;                             // --fp8-interval: accepted, no effect (deprecated by TE)
  bool abort_on_unmet_fused_kernel_constraints = false;
  int num_workers = 2, valid_num_workers = 2;  // samples are mmap reads: no loader threads
  int encoder_seq_length = 0;                  // pretrain_gpt.py's alias of --seq-length
  std::string ddp_impl = "local";              // local | torch: both are megaton's bucketed all-reduce
  std::string remote_device = "none";          // ZeRO-3 parameter offload: only "none"
  bool inference = false;                      // refused by train: no optimizer state to train with
  std::string pp_partition_method;  // "" = the fork's default: type:transformer with --deepspeed, else uniform //
                                    // megaton's checkpoints load at any layout already
};

/// Adds the groups "aliases and launcher flags", "accepted, no effect in megaton" and "refused" to `d`.
void bind_compatibility_flags(boost::program_options::options_description& d, CompatibilityFlags& compat);

}  // namespace megaton::cli
