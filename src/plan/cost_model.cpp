#include "plan/cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace megaton::plan {

int64_t ModelSpec::padded_vocab_for(int tp) const {
  return padded_vocab > 0 ? padded_vocab : model.padded_vocab_size(vocab, tp);
}

std::string Layout::name() const {
  return "TP" + std::to_string(tp) + "xPP" + std::to_string(pp) + "xDP" + std::to_string(dp);
}

double Calibration::efficiency(double g) const {
  return eff_max * g / (g + gemm_half_gflop);
}

std::string layout_problem(const ModelSpec& s, const Layout& l) {
  const model::GptOptions& m = s.model;
  if (l.tp < 1 || l.pp < 1 || l.dp < 1 || l.micro_batch < 1) return "sizes must be >= 1";
  if (m.num_attention_heads % l.tp) return "heads not divisible by TP";
  if (m.ffn_hidden_size % l.tp) return "ffn not divisible by TP";
  if (m.num_layers % l.pp) return "layers not divisible by PP";
  if (s.global_batch % (l.micro_batch * l.dp)) return "global batch not divisible by micro-batch x DP";
  if (s.padded_vocab > 0 && s.padded_vocab % l.tp) return "padded vocab not divisible by TP";
  return "";
}

double ring_allreduce_ms(double bytes, int g, double gbps) {
  return g <= 1 ? 0.0 : 2.0 * (g - 1) / g * bytes / (gbps * 1e9) * 1e3;
}

double ring_gather_ms(double bytes, int g, double gbps) {
  return g <= 1 ? 0.0 : double(g - 1) / g * bytes / (gbps * 1e9) * 1e3;
}

bool hidden_dropout_in_kernels(const ModelSpec& spec) {
  return (spec.bf16 || spec.fp16) && spec.kernels.fused_layernorm && spec.kernels.dropout_layernorm_fusion;
}

StepPrediction predict(const ModelSpec& spec, const Layout& l, const Cluster& c, const Calibration& cal) {
  const std::string problem = layout_problem(spec, l);
  MEGATON_ASSERT(problem.empty(), "plan::predict on an invalid layout ", l.name(), ": ", problem);
  const model::GptOptions& m = spec.model;
  const int64_t V = spec.padded_vocab_for(l.tp);
  StepPrediction p;
  p.layout = l;
  p.num_micro_batches = l.num_micro_batches(spec.global_batch);
  const double M = p.num_micro_batches;

  // Memory: the same estimate as `megaton train --dry-run`.
  model::GptOptions mm = m;
  mm.checkpoint_activations = l.recompute;
  parallel::ParallelOptions par;
  par.tensor_model_parallel_size = l.tp, par.pipeline_model_parallel_size = l.pp, par.data_parallel_size = l.dp;
  par.world_size = l.world(), par.zero_stage = spec.zero_stage;
  optim::PrecisionOptions prec;
  prec.bf16 = spec.bf16, prec.fp16 = spec.fp16;
  p.memory = train::estimate_memory(mm, spec.kernels, par, l.micro_batch, p.num_micro_batches, prec, V);
  p.usable_gib = c.gpu_memory_gib - c.memory_reserve_gib;
  p.fits = p.memory.total_gib() <= p.usable_gib;

  // Compute: Megatron's model FLOPs, x 4/3 when the forward runs twice, spread evenly over the world.
  const double s = m.seq_length, b = l.micro_batch, h = m.hidden_size, f = m.ffn_hidden_size;
  const double recompute_factor = l.recompute ? 4.0 / 3.0 : 1.0;
  p.model_flops = train::model_flops_per_iteration(m, V, spec.global_batch);
  p.hardware_flops = p.model_flops * recompute_factor;
  p.gemm_gflop = 2.0 * b * s * h * (f / l.tp) / 1e9;
  p.efficiency = cal.efficiency(p.gemm_gflop);
  p.compute_ms = p.hardware_flops / l.world() / (p.efficiency * c.peak_tflops * 1e12) * 1e3;
  const int layers = train::layers_per_stage(m.num_layers, l.pp).front();
  p.overhead_ms = cal.layer_overhead_ms * layers * M * recompute_factor;
  p.elementwise_ms = cal.elementwise_ps_per_element * s * b * (h + f / l.tp) * layers * M * recompute_factor * 1e-9;
  // Dropout: on the attention's and the MLP's outputs ([s, b, h] on every TP rank) and on this rank's causal attention
  // scores; a recomputed forward draws again (the 4/3 of the FLOPs, as an approximation).
  const double hidden_elements = m.hidden_dropout > 0.0 ? 2.0 * s * b * h : 0.0;
  const double score_elements = m.attention_dropout > 0.0 ? b * (m.num_attention_heads / l.tp) * s * s / 2.0 : 0.0;
  p.hidden_dropout_in_kernels = hidden_dropout_in_kernels(spec);
  const double hidden_ps =
      p.hidden_dropout_in_kernels ? cal.hidden_dropout_fused_ps_per_element : cal.hidden_dropout_ps_per_element;
  p.dropout_ms = (hidden_ps * hidden_elements + cal.attention_dropout_ps_per_element * score_elements) * layers * M *
                 recompute_factor * 1e-9;
  // ALiBi over this rank's causal scores, and --fp32-residual-connection over the [s, b, h] stream (both measured as
  // whole-step differences: they hold every kernel the flag changes).
  if (m.position_embedding_type == "alibi") {
    p.alibi_folded = train::alibi_folds(m, spec.kernels, spec.bf16 || spec.fp16, spec.fp16);
    const double ps =
        p.alibi_folded ? cal.alibi_fold_ps_per_element : cal.alibi_mask_ps_per_element_dim * m.kv_channels;
    p.alibi_ms = ps * b * (m.num_attention_heads / l.tp) * s * s / 2.0 * layers * M * recompute_factor * 1e-9;
  }
  if (m.fp32_residual_connection)
    p.fp32_residual_ms = cal.fp32_residual_ps_per_element * s * b * h * layers * M * recompute_factor * 1e-9;

  // Links: TP inside a node; DP and PP groups cross nodes when their ranks do (Megatron order: TP, DP, PP).
  const bool one_node = l.world() <= c.gpus_per_node;
  const double tp_bw = l.tp <= c.gpus_per_node ? c.intra_node_gbps : c.inter_node_gbps;
  const double dp_bw = (one_node || l.tp * l.dp <= c.gpus_per_node) ? c.intra_node_gbps : c.inter_node_gbps;
  const double pp_bw = one_node ? c.intra_node_gbps : c.inter_node_gbps;
  const double act_bytes = s * b * h * ((spec.bf16 || spec.fp16) ? 2.0 : 4.0);  // one [s, b, h] activation

  // TP: two all-reduces per layer in forward, two in backward, two more when the forward is recomputed.
  const double tp_calls = l.recompute ? 6.0 : 4.0;
  p.tp_comm_ms = ring_allreduce_ms(act_bytes, l.tp, tp_bw) * tp_calls * layers * M;

  // PP: 1F1B runs M + PP - 1 slots; the bubble is (PP - 1) / M of the busy time of a stage.
  const double per_stage_busy =
      p.compute_ms + p.overhead_ms + p.elementwise_ms + p.dropout_ms + p.alibi_ms + p.fp32_residual_ms + p.tp_comm_ms;
  p.bubble_ms = (l.pp - 1) / M * per_stage_busy;
  if (l.pp > 1) p.pp_p2p_ms = 2.0 * (M + l.pp - 2) * act_bytes / (pp_bw * 1e9) * 1e3;

  // DP: fp32 main grads, reduced in buckets from the last micro-batch's backward; only what does not fit behind that
  // backward (2/3 of a micro-batch's compute) is exposed. ZeRO-1 reduce-scatters, then all-gathers 16-bit params,
  // bucket by bucket ahead of the first micro-batch's forward (1/3 of a micro-batch's compute), hiding the same way.
  const double params = double(p.memory.params_on_rank);
  const double grad_bytes = params * 4.0, param_bytes = params * ((spec.bf16 || spec.fp16) ? 2.0 : 4.0);
  double dp_total =
      spec.zero_stage >= 1 ? ring_gather_ms(grad_bytes, l.dp, dp_bw) : ring_allreduce_ms(grad_bytes, l.dp, dp_bw);
  const double last_backward = per_stage_busy / M * 2.0 / 3.0;
  p.dp_comm_ms = dp_total - std::min(cal.dp_overlap * dp_total, last_backward);
  if (spec.zero_stage >= 1) {
    const double gather_total = ring_gather_ms(param_bytes, l.dp, dp_bw);
    const double first_forward = per_stage_busy / M / 3.0;
    p.zero_gather_ms = gather_total - std::min(cal.dp_overlap * gather_total, first_forward);
  }
  if (l.pp > 1 && !m.untie_embeddings_and_output_weights)
    p.embedding_ms = ring_allreduce_ms(double(V) / l.tp * h * 4.0, 2, pp_bw);

  // The optimizer step: per-parameter work (sharded over DP under ZeRO-1) and a constant.
  p.optimizer_ms = cal.optimizer_ns_per_param * params / (spec.zero_stage >= 1 ? l.dp : 1) * 1e-6 + cal.fixed_ms;

  p.total_ms = p.compute_ms + p.overhead_ms + p.elementwise_ms + p.dropout_ms + p.alibi_ms + p.fp32_residual_ms +
               p.tp_comm_ms + p.bubble_ms + p.pp_p2p_ms + p.dp_comm_ms + p.zero_gather_ms + p.embedding_ms +
               p.optimizer_ms;
  p.tflops_per_gpu = p.model_flops / (p.total_ms * 1e-3 * l.world()) / 1e12;
  p.tokens_per_s = double(spec.global_batch) * s / (p.total_ms * 1e-3);
  return p;
}

}  // namespace megaton::plan
