// Everything `megaton train` is configured by, one options struct per subsystem, validated together before anything
// is allocated or any collective runs. cli/ fills it from Megatron-DeepSpeed's flags (and a DeepSpeed JSON).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_options.h"
#include "data/data_options.h"
#include "data/tokenizer_options.h"
#include "dist/dist_options.h"
#include "model/gpt_options.h"
#include "ops/fp8/fp8_scaling.h"
#include "ops/kernel_options.h"
#include "optim/lr_schedule_options.h"
#include "optim/optimizer_options.h"
#include "optim/precision_options.h"
#include "parallel/parallel_options.h"
#include "train/codecarbon_options.h"
#include "train/curriculum.h"
#include "train/logging_options.h"
#include "train/loop_options.h"

namespace megaton::train {

struct TrainConfig {
  model::GptOptions model;
  ops::KernelOptions kernels;
  parallel::ParallelOptions parallel;
  dist::DistOptions dist;
  optim::OptimizerOptions optimizer;
  optim::LrScheduleOptions lr;
  optim::PrecisionOptions precision;
  ops::fp8::Fp8Options fp8;  // --fp8-format and its recipe
  checkpoint::CheckpointOptions checkpoint;
  data::DataOptions data;
  data::TokenizerOptions tokenizer;
  int64_t vocab_size = 0;  // --vocab-size: the vocabulary when no tokenizer is given (pre-tokenized data, dry runs)
  LoopOptions loop;
  CurriculumOptions curriculum;  // the DeepSpeed config's curriculum_learning (sequence length)
  LoggingOptions logging;
  CodecarbonOptions codecarbon;  // --codecarbon-dir
  std::vector<std::string>
      arguments;                   // "  name ..... value" lines of every flag, printed at start (Megatron's listing)
  std::vector<std::string> notes;  // lines for the log when training starts (what a DeepSpeed JSON set or ignored)

  /// Every subsystem's validate(), then the rules across them, for a job of `world` ranks. Idempotent.
  void validate(int world);
};

}  // namespace megaton::train
