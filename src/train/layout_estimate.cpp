#include "train/layout_estimate.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "model/gpt_config.h"
#include "ops/alibi_fold.h"
#include "train/train_config.h"

namespace megaton::train {

ParamCounts count_parameters(const model::GptOptions& m, int64_t V) {
  const int64_t h = m.hidden_size, f = m.ffn_hidden_size,
                kv = static_cast<int64_t>(m.kv_channels) * m.num_attention_heads;
  const int64_t glu = m.glu_activation.empty() ? 1 : 2;
  ParamCounts c;
  c.embedding = V * h + (m.position_embedding_type == "absolute" ? int64_t(m.max_position_embeddings) * h : 0) +
                (m.embed_layernorm ? 2 * h : 0);
  c.per_layer = 2 * h                    // input LayerNorm
                + h * 3 * kv + 3 * kv    // fused QKV
                + kv * h + h             // attention output projection
                + 2 * h                  // post-attention LayerNorm
                + h * glu * f + glu * f  // MLP h -> ffn (x2 for GLU)
                + f * h + h;             // MLP ffn -> h
  c.final_norm = 2 * h;
  c.total =
      c.embedding + c.per_layer * m.num_layers + c.final_norm + (m.untie_embeddings_and_output_weights ? V * h : 0);
  return c;
}

std::vector<int> layers_per_stage(int num_layers, int pp) {
  std::vector<int> out(pp, num_layers / pp);
  for (int i = 0; i < num_layers % pp; ++i) out[i] += 1;
  return out;
}

double model_flops_per_iteration(const model::GptOptions& m, int64_t V, int64_t B) {
  const double s = m.seq_length, l = m.num_layers, h = m.hidden_size;
  return 72.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + double(V) / (12.0 * l * h));
}

MemoryEstimate estimate_memory(const model::GptOptions& m, const ops::KernelOptions& k,
                               const parallel::ParallelOptions& p, int micro_batch, int num_micro_batches,
                               const optim::PrecisionOptions& prec, int64_t V, bool eight_bit_moments) {
  const ParamCounts c = count_parameters(m, V);
  const int tp = p.tensor_model_parallel_size, pp = p.pipeline_model_parallel_size, dp = p.data_parallel_size;
  const int first_stage_layers = layers_per_stage(m.num_layers, pp).front();
  MemoryEstimate e;
  e.params_on_rank = (c.embedding + c.per_layer * first_stage_layers + (pp == 1 ? c.final_norm : 0)) / tp;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const double wbytes = (prec.fp16 || prec.bf16) ? 2.0 : 4.0;
  e.weights_gib = e.params_on_rank * wbytes / gib;
  e.grads_gib = e.params_on_rank * 4.0 / gib;
  // Adam's moments: 8 bytes per parameter, or bitsandbytes' 8-bit codes (2 bytes; the word embedding keeps fp32
  // moments); plus the fp32 master copy in mixed precision.
  const double embedding_on_rank = static_cast<double>(c.embedding) / tp;
  const double moment_bytes = eight_bit_moments ? 2.0 * (e.params_on_rank - embedding_on_rank) + 8.0 * embedding_on_rank
                                                : 8.0 * e.params_on_rank;
  const double master_bytes = (prec.fp16 || prec.bf16) ? 4.0 * e.params_on_rank : 0.0;
  e.optimizer_gib = (moment_bytes + master_bytes) / (p.zero_stage >= 1 ? dp : 1) / gib;
  // Activations per layer and micro-batch (Korthikanti et al. 2022, no sequence parallelism, fused attention so the
  // s^2 score term is not stored): s b h (10 + 24/t) bytes in 16-bit. Recomputation keeps only each layer's input
  // (2 s b h) and, while one layer is recomputed in backward, that layer's full set once.
  const double s = m.seq_length, b = micro_batch, h = m.hidden_size;
  // --fp32-residual-connection keeps the layer's two LayerNorm inputs (the residual sums) in fp32: 4 s b h more bytes
  // (measured on an H100: 1.3B +3.1 GB). ALiBi folded into the heads: SDPA keeps q', k' and v in one
  // [s, b, np/t, 3, d + 8] buffer (ops::fold_heads) in place of the QKV output, 3 x 8 more 16-bit columns a head
  // (measured on an H100: +288 / +215 MiB of activations at 1.3B / 124M, the position embedding's 72 / 13.5 MiB of
  // parameter state less).
  const bool half = prec.fp16 || prec.bf16;
  const double fp32_stream = m.fp32_residual_connection ? 4.0 * s * b * h : 0.0;
  const double alibi_fold = alibi_folds(m, k, half, prec.fp16) ? 48.0 * s * b * (m.num_attention_heads / tp) : 0.0;
  const double full_layer = s * b * h * (10.0 + 24.0 / tp) + fp32_stream + alibi_fold;
  const double per_layer = m.checkpoint_activations ? (m.fp32_residual_connection ? 4.0 : 2.0) * s * b * h : full_layer;
  const int micro = std::max(1, num_micro_batches);
  int layers_per_mb = first_stage_layers;  // layers of one micro-batch's stashed activations
  int in_flight = std::min(pp, micro);     // 1F1B: the first stage holds pp micro-batches
  if (p.num_layers_per_virtual_pipeline_stage > 0) {
    // Interleaved: the first stage runs (PP - 1) * 2 + (V - 1) * PP warmup forwards of N-layer chunks before its
    // first backward (all M * V when M == PP): L (1 + (PP - 1) / (PP V)) layer activations for M > PP.
    const int n = p.num_layers_per_virtual_pipeline_stage, v = m.num_layers / (pp * n);
    const int warmup = micro == pp ? micro * v : std::min((pp - 1) * 2 + (v - 1) * pp, micro * v);
    layers_per_mb = n;
    in_flight = std::min(warmup + 1, micro * v);
  }
  // The last stage's logits [s, b, V/tp] in the weights' dtype: the LM-head loss writes their gradient over them (one
  // buffer); --no-fused-lm-head-loss keeps a second one for the gradient.
  const double logits = s * b * double(V) / tp * wbytes * (k.fused_lm_head_loss ? 1.0 : 2.0);
  e.activations_gib =
      (per_layer * layers_per_mb * in_flight + (m.checkpoint_activations ? full_layer : 0.0)) * (wbytes / 2.0) / gib +
      logits / gib;
  return e;
}

bool alibi_folds(const model::GptOptions& m, const ops::KernelOptions& k, bool half_precision, bool fp16) {
  return m.position_embedding_type == "alibi" && half_precision && k.alibi_fold && k.masked_softmax_fusion &&
         ops::alibi_fold_fits(fp16, m.seq_length, m.kv_channels);
}

std::string describe_layout(const TrainConfig& config, int64_t vocab, int64_t V) {
  const model::GptOptions& m = config.model;
  const parallel::ParallelOptions& p = config.parallel;
  const LoopOptions& t = config.loop;
  const ParamCounts c = count_parameters(m, V);
  const MemoryEstimate e = estimate_memory(m, config.kernels, p, t.micro_batch_size, t.num_micro_batches,
                                           config.precision, V, config.optimizer.use_bnb);
  const double flops = model_flops_per_iteration(m, V, t.global_batch_size);
  std::ostringstream os;
  char buf[512];
  os << "parallel layout: TP=" << p.tensor_model_parallel_size << " x PP=" << p.pipeline_model_parallel_size
     << " x DP=" << p.data_parallel_size << " = " << p.world_size << " ranks"
     << (p.zero_stage ? ", ZeRO-1 over DP" : "") << "\n";
  model::GptConfig g;  // what the model's partition reads
  g.model = m;
  g.vocab_size = vocab;
  g.padded_vocab_size = V;
  g.dtype = config.precision.dtype();
  g.pp_partition_method = p.pp_partition_method;
  const auto stages = model::partition_layers(g, p.pipeline_model_parallel_size);
  os << "layers per stage:";
  for (int n : stages) os << " " << n;
  if (p.num_layers_per_virtual_pipeline_stage > 0) {
    const int n = p.num_layers_per_virtual_pipeline_stage, pp = p.pipeline_model_parallel_size;
    os << " (interleaved: " << m.num_layers / (pp * n) << " model chunks of " << n
       << " layers per stage; chunk k of stage p holds layers [(k*" << pp << "+p)*" << n << ", +" << n << "))";
  }
  os << "\n";
  std::snprintf(buf, sizeof(buf),
                "model: %d layers, hidden %d, %d heads, ffn %d, seq %d, vocab %lld (padded %lld), %s positions%s%s\n",
                m.num_layers, m.hidden_size, m.num_attention_heads, m.ffn_hidden_size, m.seq_length,
                static_cast<long long>(vocab), static_cast<long long>(V), m.position_embedding_type.c_str(),
                m.embed_layernorm ? ", embedding LayerNorm" : "",
                m.glu_activation.empty() ? "" : (", " + m.glu_activation).c_str());
  os << buf;
  std::snprintf(buf, sizeof(buf), "parameters: %.3f B total (%.3f B in layers, %.3f B embedding)\n", c.total / 1e9,
                c.per_layer * double(m.num_layers) / 1e9, c.embedding / 1e9);
  os << buf;
  std::snprintf(buf, sizeof(buf), "batch: micro %d, global %d, %d micro-batches per iteration per pipeline%s\n",
                t.micro_batch_size, t.global_batch_size, t.num_micro_batches,
                t.rampup_batch_size.empty() ? "" : " (at full batch; ramp-up on)");
  os << buf;
  std::snprintf(buf, sizeof(buf),
                "memory per GPU (busiest rank, %lld params): weights %.2f GiB + grads %.2f GiB + optimizer %.2f GiB + "
                "activations %.2f GiB = %.2f GiB\n",
                static_cast<long long>(e.params_on_rank), e.weights_gib, e.grads_gib, e.optimizer_gib,
                e.activations_gib, e.total_gib());
  os << buf;
  if (config.checkpoint.async_save) {
    std::snprintf(buf, sizeof(buf), "--async-save: %.2f GiB of host memory per rank for the state's copy\n",
                  e.weights_gib + e.optimizer_gib);
    os << buf;
  }
  std::snprintf(buf, sizeof(buf), "model FLOPs per iteration: %.4g (%.2f PFLOP), %.4g per GPU\n", flops, flops / 1e15,
                flops / p.world_size);
  os << buf;
  return os.str();
}

}  // namespace megaton::train
