// Megatron-DeepSpeed launch lines pass `--deepspeed --deepspeed_config ds_config.json`: the JSON, not the Megatron
// flags, then decides the ZeRO stage, the fp16 loss scaler, gradient clipping and the batch sizes (DeepSpeed's engine
// owns them). apply_deepspeed_config reads such a file and sets the same things in megaton's flags, so a reference
// script runs unchanged (docs/training.md, "DeepSpeed configuration files").
#pragma once
#include <string>
#include <vector>

#include "train/train_config.h"

namespace megaton::cli {

/// Reads the DeepSpeed JSON at `path` and applies it over the parsed flags in `config` as DeepSpeed's engine would
/// (config.parallel validated: its data-parallel size is read):
///   zero_optimization.stage 0 | 1      -> --zero-stage (stage 0 with bf16, the JSON's or --bf16, -> 1: DeepSpeed's
///                                         bf16 optimizer shards its fp32 state over DP, a ZeRO-1); 2 and 3: errors
///   fp16 {enabled, loss_scale, initial_scale_power, loss_scale_window, hysteresis, min_loss_scale}
///                                      -> --fp16, --loss-scale (0 = dynamic), --initial-loss-scale 2^power, ... with
///                                         DeepSpeed's defaults (16, 1000, 2, 1) for absent keys; the Megatron scaler
///                                         flags are ignored, as under DeepSpeed
///   bf16.enabled                       -> --bf16
///   gradient_clipping                  -> --clip-grad (absent: 0, no clipping, as DeepSpeed)
///   train_micro_batch_size_per_gpu, train_batch_size, gradient_accumulation_steps
///                                      -> fill --micro-batch-size / --global-batch-size when not given, else must
///                                         agree with them (DeepSpeed asserts the same)
///   curriculum_learning {enabled, curriculum_type seqlen, min_difficulty, max_difficulty, schedule_type,
///                        schedule_config}
///                                      -> config.curriculum (train/curriculum.h)
/// Keys that only tune DeepSpeed's logging (steps_per_print, wall_clock_breakdown, ...) are ignored; sections that
/// would change training in ways megaton does not implement (optimizer, scheduler, ZeRO-2/3, any zero_optimization key
/// but stage, a curriculum other than seqlen, a contradictory precision) are UsageErrors naming the file and the key.
/// "auto" values count as absent.
/// Returns one line per setting taken or ignored, for the log.
std::vector<std::string> apply_deepspeed_config(const std::string& path, train::TrainConfig& config);

}  // namespace megaton::cli
