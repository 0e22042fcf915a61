// Batched autoregressive decoding as Megatron's sample_sequence_batch: contexts padded with EOD to --seq-length,
// decoding from the shortest prompt, rows with longer prompts keeping their own tokens until their prompt ends,
// a row finishing at its first generated EOS. With the KV cache (default) each step feeds only the new positions;
// with `recompute` every step runs the full prefix again (same tokens, slower).
//
// Collective over the model replica: every rank calls generate() with the same contexts; the last stage samples and
// the token is broadcast from (last stage, tp 0) to every rank, so all ranks end with the same tokens.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "infer/sampling.h"
#include "infer/stage_runner.h"

namespace megaton::infer {

struct GenerateOptions {
  SamplingOptions sampling;
  int64_t seq_length = 0;         // --seq-length: tokens per sequence, prompt included
  int64_t out_seq_length = 1024;  // --out-seq-length: at most this many positions after the shortest prompt
  bool recompute = false;         // --recompute: no KV cache
  int64_t eos_id = -1;            // the tokenizer's EOD
  int64_t pad_id = 0;             // fills positions after a prompt (Megatron: EOD)
};

struct GenerateResult {
  torch::Tensor tokens;          // [b, end] int64 CPU: prompts + generated tokens (+ EOS where a row finished)
  std::vector<int64_t> lengths;  // Megatron's lengths: the EOS position of a finished row, else maxlen
  std::vector<bool> finished;    // the row produced an EOS
  int64_t end = 0;               // positions filled (the final context length)
  int64_t steps = 0;             // forward steps run
};

/// Called after each step with the tokens so far [b, context_length] (for interactive partial output).
using StepCallback = std::function<void(const torch::Tensor& tokens, int64_t context_length)>;

/// Throws DataError for an empty context or one with >= seq_length tokens.
GenerateResult generate(StageRunner& runner, const std::vector<std::vector<int32_t>>& contexts,
                        const GenerateOptions& o, at::Generator& gen, const StepCallback& on_step = {});

/// The tokens of row `r` a reader sees: up to (excluding) the EOS of a finished row, else every filled position.
std::vector<int32_t> row_tokens(const GenerateResult& r, int64_t row);

}  // namespace megaton::infer
