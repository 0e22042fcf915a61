// megaton plan's cost model (src/plan/): properties that break when the model is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "plan/calibration.h"
#include "plan/cluster.h"
#include "plan/cost_model.h"
#include "plan/search.h"

using namespace megaton::plan;

namespace {

ModelSpec gpt_1p3b(int global_batch = 8) {
  ModelSpec s;
  s.model.num_layers = 24, s.model.hidden_size = 2048, s.model.num_attention_heads = 16, s.model.seq_length = 2048;
  s.model.validate();
  s.vocab = 50257, s.padded_vocab = 50304, s.global_batch = global_batch, s.bf16 = true;
  return s;
}

Cluster node(int nodes = 1, int gpus = 8, double mem = 80) {
  Cluster c;
  c.nodes = nodes, c.gpus_per_node = gpus, c.gpu_memory_gib = mem;
  return c;
}

std::string source(const std::string& rel) {
  return std::string(MEGATON_SOURCE_DIR) + "/" + rel;
}

}  // namespace

TEST(Plan, FlopsFormulaMatchesHandComputationFor1p3B) {
  // 72 B s l h^2 (1 + s/6h + V/12lh) with B=8, s=2048, l=24, h=2048, V=50304:
  // 72*8*2048*24*2048^2 = 118747255799808; (1 + 1/6 + 50304/589824) = 1.2519531...; product 1.48665997983744e14.
  const ModelSpec s = gpt_1p3b();
  const StepPrediction p = predict(s, Layout{1, 1, 1, 8, false}, node(1, 1, 141), Calibration());
  EXPECT_DOUBLE_EQ(p.model_flops, 148665997983744.0);
  EXPECT_DOUBLE_EQ(p.hardware_flops, p.model_flops);
  const StepPrediction r = predict(s, Layout{1, 1, 1, 8, true}, node(1, 1, 141), Calibration());
  EXPECT_DOUBLE_EQ(r.hardware_flops, p.model_flops * 4.0 / 3.0);  // recompute runs the forward twice
  EXPECT_DOUBLE_EQ(r.model_flops, p.model_flops);                 // model FLOPs do not count it
  EXPECT_NEAR(r.compute_ms / p.compute_ms, 4.0 / 3.0, 1e-12);
  // TFLOP/s per GPU as the training log reports it: model FLOPs / (time x world).
  EXPECT_NEAR(p.tflops_per_gpu, p.model_flops / (p.total_ms * 1e-3) / 1e12, 1e-9);
}

TEST(Plan, TensorParallelHalvesWeightMemory) {
  const ModelSpec s = gpt_1p3b(16);
  const Cluster c = node();
  const StepPrediction a = predict(s, Layout{1, 1, 8, 2, false}, c, Calibration());
  const StepPrediction b = predict(s, Layout{2, 1, 4, 2, false}, c, Calibration());
  EXPECT_NEAR(b.memory.weights_gib, a.memory.weights_gib / 2, a.memory.weights_gib * 1e-3);
  EXPECT_NEAR(b.memory.optimizer_gib, a.memory.optimizer_gib / 2, a.memory.optimizer_gib * 1e-3);
  EXPECT_LT(b.memory.activations_gib, a.memory.activations_gib);
  EXPECT_GT(b.tp_comm_ms, 0.0);
  EXPECT_EQ(a.tp_comm_ms, 0.0);
  // ZeRO-1 divides the optimizer state by DP and nothing else.
  ModelSpec z = s;
  z.zero_stage = 1;
  const StepPrediction az = predict(z, Layout{1, 1, 8, 2, false}, c, Calibration());
  EXPECT_NEAR(az.memory.optimizer_gib, a.memory.optimizer_gib / 8, 1e-9);
  EXPECT_DOUBLE_EQ(az.memory.weights_gib, a.memory.weights_gib);
  EXPECT_GT(az.zero_gather_ms, 0.0);
}

TEST(Plan, LmHeadLossKeepsOneLogitsBuffer) {
  ModelSpec s = gpt_1p3b();
  const Layout l{2, 1, 1, 8, false};
  const StepPrediction fused = predict(s, l, node(1, 2, 141), Calibration());
  s.kernels.fused_lm_head_loss = false;
  const StepPrediction separate = predict(s, l, node(1, 2, 141), Calibration());
  // bf16 logits [2048, 8, 50304 / 2]: one buffer with the one-pass loss, a second for their gradient without it.
  EXPECT_NEAR(separate.memory.activations_gib - fused.memory.activations_gib,
              2048.0 * 8 * (50304 / 2) * 2 / (1024.0 * 1024 * 1024), 1e-9);
  EXPECT_DOUBLE_EQ(separate.total_ms, fused.total_ms);  // the cost model does not time the difference
}

TEST(Plan, RecomputeTradesActivationMemoryForTime) {
  const ModelSpec s = gpt_1p3b();
  const StepPrediction off = predict(s, Layout{1, 1, 1, 8, false}, node(1, 1, 141), Calibration());
  const StepPrediction on = predict(s, Layout{1, 1, 1, 8, true}, node(1, 1, 141), Calibration());
  EXPECT_LT(on.memory.activations_gib, off.memory.activations_gib / 4);
  EXPECT_GT(on.total_ms, off.total_ms);
}

TEST(Plan, ElementwiseTermFollowsTheActivations) {
  // 1.3B: s b (h + f / TP) elements per layer and micro-batch, 24 layers, x 4/3 with recomputation.
  const ModelSpec s = gpt_1p3b(16);
  Calibration cal;
  cal.elementwise_ps_per_element = 10.0;
  const double per_sample = 2048.0 * (2048 + 8192) * 24 * 10.0 * 1e-9;  // ms
  const StepPrediction mb8 = predict(s, Layout{1, 1, 1, 8, false}, node(1, 1, 141), cal);
  EXPECT_NEAR(mb8.elementwise_ms, 16 * per_sample, 1e-9);  // 2 micro-batches of 8
  const StepPrediction tp2 = predict(s, Layout{2, 1, 1, 8, false}, node(1, 2, 141), cal);
  EXPECT_NEAR(tp2.elementwise_ms, 16 * 2048.0 * (2048 + 4096) * 24 * 10.0 * 1e-9, 1e-9);
  const StepPrediction rc = predict(s, Layout{1, 1, 1, 8, true}, node(1, 1, 141), cal);
  EXPECT_NEAR(rc.elementwise_ms, mb8.elementwise_ms * 4.0 / 3.0, 1e-9);
  Calibration none = cal;
  none.elementwise_ps_per_element = 0;
  EXPECT_NEAR(mb8.total_ms - predict(s, Layout{1, 1, 1, 8, false}, node(1, 1, 141), none).total_ms, mb8.elementwise_ms,
              1e-9);
}

TEST(Plan, DropoutTermFollowsTheMeasuredKernels) {
  // With Megatron's default dropout (0.1 / 0.1, the flags' defaults) profiles on an H200 measured, per step: 1.3B mb8
  // ATen's hidden dropout 4.87 ms + the attention's dropout in cuDNN 12.47 ms; 124M mb32 1.87 + 3.84 ms. The hidden
  // dropout drawn inside the LayerNorm kernels (the default) adds, per call, forward + fused backward, 17.0 + 14.8 us
  // at the 1.3B shape and 9.4 + 14.9 us at the 124M one over the plain kernels (BM_DropoutAddLayerNormKernels): 48 and
  // 24 calls a step. The term predicts each within 10% from per-element constants, picks ATen's with
  // --no-dropout-layernorm-fusion, --no-fused-layernorm or fp32, is absent without dropout, counts only this rank's
  // heads under TP and grows by 4/3 with recomputation.
  const Cluster h200 = node(1, 1, 141);
  const ModelSpec big = gpt_1p3b(8);
  ASSERT_GT(big.model.hidden_dropout, 0.0);
  ASSERT_GT(big.model.attention_dropout, 0.0);
  ASSERT_TRUE(hidden_dropout_in_kernels(big));
  ModelSpec big_aten = big;
  big_aten.kernels.dropout_layernorm_fusion = false;
  ASSERT_FALSE(hidden_dropout_in_kernels(big_aten));
  const StepPrediction a = predict(big_aten, Layout{1, 1, 1, 8, false}, h200, Calibration());
  EXPECT_FALSE(a.hidden_dropout_in_kernels);
  EXPECT_NEAR(a.dropout_ms, 4.87 + 12.47, 0.10 * (4.87 + 12.47));
  const double elements = 2.0 * 2048 * 8 * 2048 * 24 * 1e-9;
  const double hidden_aten = 2.97 * elements, hidden = 0.96 * elements,
               attention = 1.77 * 8 * 16 * 2048.0 * 2048 / 2 * 24 * 1e-9;
  EXPECT_NEAR(a.dropout_ms, hidden_aten + attention, 1e-9);
  const StepPrediction p = predict(big, Layout{1, 1, 1, 8, false}, h200, Calibration());
  EXPECT_TRUE(p.hidden_dropout_in_kernels);
  EXPECT_NEAR(p.dropout_ms, hidden + attention, 1e-9);
  EXPECT_NEAR(hidden, 48 * (17.0 + 14.8) * 1e-3, 0.10 * 48 * (17.0 + 14.8) * 1e-3);
  ModelSpec fp32 = big;  // fp32 takes the composite
  fp32.bf16 = false;
  EXPECT_NEAR(predict(fp32, Layout{1, 1, 1, 8, false}, h200, Calibration()).dropout_ms, a.dropout_ms, 1e-9);
  ModelSpec unfused = big;
  unfused.kernels.fused_layernorm = false;
  EXPECT_NEAR(predict(unfused, Layout{1, 1, 1, 8, false}, h200, Calibration()).dropout_ms, a.dropout_ms, 1e-9);
  ModelSpec none = big;
  none.model.hidden_dropout = 0.0, none.model.attention_dropout = 0.0;
  const StepPrediction q = predict(none, Layout{1, 1, 1, 8, false}, h200, Calibration());
  EXPECT_EQ(q.dropout_ms, 0.0);
  EXPECT_NEAR(p.total_ms - q.total_ms, p.dropout_ms, 1e-9);
  ModelSpec hidden_only = big;
  hidden_only.model.attention_dropout = 0.0;
  EXPECT_NEAR(predict(hidden_only, Layout{1, 1, 1, 8, false}, h200, Calibration()).dropout_ms, hidden, 1e-9);
  EXPECT_NEAR(predict(big, Layout{2, 1, 1, 8, false}, node(1, 2, 141), Calibration()).dropout_ms,
              hidden + attention / 2, 1e-9);
  EXPECT_NEAR(predict(big, Layout{1, 1, 1, 8, true}, h200, Calibration()).dropout_ms, p.dropout_ms * 4.0 / 3.0, 1e-9);
  ModelSpec small;
  small.model.num_layers = 12, small.model.hidden_size = 768, small.model.num_attention_heads = 12;
  small.model.seq_length = 1024;
  small.model.validate();
  small.global_batch = 32;
  ModelSpec small_aten = small;
  small_aten.kernels.dropout_layernorm_fusion = false;
  EXPECT_NEAR(predict(small_aten, Layout{1, 1, 1, 32, false}, h200, Calibration()).dropout_ms, 1.87 + 3.84,
              0.10 * (1.87 + 3.84));
  hidden_only = small;
  hidden_only.model.attention_dropout = 0.0;
  EXPECT_NEAR(predict(hidden_only, Layout{1, 1, 1, 32, false}, h200, Calibration()).dropout_ms,
              24 * (9.4 + 14.9) * 1e-3, 0.10 * 24 * (9.4 + 14.9) * 1e-3);
}

TEST(Plan, AlibiAndFp32ResidualTermsFollowTheMeasuredRuns) {
  // A/Bs on an H100 (30 iterations, medians, no dropout), each flag's step minus the defaults': ALiBi folded 1.3B
  // 271.8 - 257.8, 124M 63.2 - 58.8 ms; through the mask (--no-alibi-fold) 305.2 - 252.7 and 69.6 - 57.6,
  // --fp32-residual-connection 259.1 - 253.7 and 60.2 - 58.4.
  // The terms reproduce them (the fold within 10%, the stream 12%, the mask 15%: one constant for both head sizes),
  // count only this rank's heads under TP, grow by 4/3 with recomputation, and are absent without the flags.
  const Cluster h100 = node(1, 1, 80);
  ModelSpec big = gpt_1p3b(8), small;
  small.model.num_layers = 12, small.model.hidden_size = 768, small.model.num_attention_heads = 12;
  small.model.seq_length = 1024;
  small.model.validate();
  small.global_batch = 32;
  for (ModelSpec* m : {&big, &small}) m->model.hidden_dropout = 0.0, m->model.attention_dropout = 0.0;
  struct Case {
    ModelSpec spec;
    int mb;
    double fold, mask, stream;  // measured ms
  };
  for (const Case& c : {Case{big, 8, 271.8 - 257.8, 305.2 - 252.7, 259.1 - 253.7},
                        Case{small, 32, 63.2 - 58.8, 69.6 - 57.6, 60.2 - 58.4}}) {
    const Layout l{1, 1, 1, c.mb, false};
    const StepPrediction plain = predict(c.spec, l, h100, Calibration());
    EXPECT_EQ(plain.alibi_ms, 0.0);
    EXPECT_EQ(plain.fp32_residual_ms, 0.0);
    ModelSpec alibi = c.spec;
    alibi.model.position_embedding_type = "alibi";
    const StepPrediction fold = predict(alibi, l, h100, Calibration());
    EXPECT_TRUE(fold.alibi_folded);
    EXPECT_NEAR(fold.alibi_ms, c.fold, 0.10 * c.fold);
    // ALiBi has no learned positions: the optimizer steps fewer parameters.
    EXPECT_NEAR(fold.total_ms - plain.total_ms, fold.alibi_ms + fold.optimizer_ms - plain.optimizer_ms, 1e-9);
    ModelSpec masked = alibi;
    masked.kernels.alibi_fold = false;
    const StepPrediction mask = predict(masked, l, h100, Calibration());
    EXPECT_FALSE(mask.alibi_folded);
    EXPECT_NEAR(mask.alibi_ms, c.mask, 0.15 * c.mask);
    ModelSpec fp32 = alibi;  // fp32 has no fold
    fp32.bf16 = false;
    EXPECT_FALSE(predict(fp32, l, h100, Calibration()).alibi_folded);
    ModelSpec stream = c.spec;
    stream.model.fp32_residual_connection = true;
    EXPECT_NEAR(predict(stream, l, h100, Calibration()).fp32_residual_ms, c.stream, 0.12 * c.stream);
    // Memory: the fold keeps q', k', v with 8 more columns each in place of the QKV output (measured: the peak
    // allocated above the defaults' 216.1 / 201.7 MiB at 1.3B / 124M, plus the learned position embedding's parameter
    // state ALiBi does not have, 2 + 4 + 12 bytes for s h parameters: 72.0 / 13.5 MiB), the fp32 stream its two
    // LayerNorm inputs at 4 bytes (measured: 1.3B 3136 MiB, 124M 1200 MiB).
    const double fold_gib = fold.memory.activations_gib - plain.memory.activations_gib;
    const double stream_gib =
        predict(stream, l, h100, Calibration()).memory.activations_gib - plain.memory.activations_gib;
    const double want_fold = (c.mb == 8 ? 216.1 + 72.0 : 201.7 + 13.5) / 1024;
    const double want_stream = (c.mb == 8 ? 3136.0 : 1200.0) / 1024;
    EXPECT_NEAR(fold_gib, want_fold, 0.08 * want_fold);
    EXPECT_NEAR(stream_gib, want_stream, 0.08 * want_stream);
  }
  ModelSpec alibi = big;
  alibi.model.position_embedding_type = "alibi";
  const StepPrediction one = predict(alibi, Layout{1, 1, 1, 8, false}, h100, Calibration());
  EXPECT_NEAR(predict(alibi, Layout{2, 1, 1, 8, false}, node(1, 2, 80), Calibration()).alibi_ms, one.alibi_ms / 2,
              1e-9);
  EXPECT_NEAR(predict(alibi, Layout{1, 1, 1, 8, true}, h100, Calibration()).alibi_ms, one.alibi_ms * 4.0 / 3.0, 1e-9);
  ModelSpec fp16 = alibi;  // fp16 folds only while s sqrt(d) < 32768: 2048 sqrt(128) = 23170
  fp16.bf16 = false, fp16.fp16 = true;
  EXPECT_TRUE(predict(fp16, Layout{1, 1, 1, 8, false}, h100, Calibration()).alibi_folded);
  fp16.model.seq_length = 4096;
  EXPECT_FALSE(predict(fp16, Layout{1, 1, 1, 8, false}, h100, Calibration()).alibi_folded);
}

TEST(Plan, MeasuredPointsCarryTheirDropout) {
  // The sweep's dropout columns reach the prediction; a CSV without them (sweeps without dropout) reads as dropout 0,
  // not as the flags' defaults of 0.1.
  const std::string path = testing::TempDir() + "plan_dropout.csv";
  std::ofstream(path) << "num_layers,hidden_size,num_attention_heads,seq_length,global_batch_size,micro_batch_size,tp,"
                         "pp,dp,ms_per_iter,peak_tflops,hidden_dropout,attention_dropout,extra_args\n"
                         "24,2048,16,2048,8,8,1,1,1,250,989,0.1,0.1,\n24,2048,16,2048,8,8,1,1,1,240,989,0,0.1,\n"
                         "24,2048,16,2048,8,8,1,1,1,255,989,0.1,0.1,--seed 7 --no-dropout-layernorm-fusion\n";
  const auto pts = read_measured_points(path, "--check");
  ASSERT_EQ(pts.size(), 3u);
  EXPECT_DOUBLE_EQ(pts[0].spec.model.hidden_dropout, 0.1);
  EXPECT_DOUBLE_EQ(pts[1].spec.model.hidden_dropout, 0.0);
  EXPECT_DOUBLE_EQ(pts[1].spec.model.attention_dropout, 0.1);
  // A run given --no-dropout-layernorm-fusion (sweep.py's `extra`) is predicted with ATen's hidden dropout.
  EXPECT_TRUE(hidden_dropout_in_kernels(pts[0].spec));
  EXPECT_FALSE(hidden_dropout_in_kernels(pts[2].spec));
  const Calibration cal;
  EXPECT_GT(predict(pts[2].spec, pts[2].layout, pts[2].cluster, cal).dropout_ms,
            predict(pts[0].spec, pts[0].layout, pts[0].cluster, cal).dropout_ms + 2.0);
  const auto old = read_measured_points(source("src/plan/calibration_h200.csv"), "--check");
  for (const auto& p : old) {
    EXPECT_EQ(p.spec.model.hidden_dropout, 0.0) << p.label;
    EXPECT_EQ(p.spec.model.attention_dropout, 0.0) << p.label;
  }
}

TEST(Plan, MeasuredPointsCarryTheirPositionsAndStream) {
  // A sweep row's extra_args with ALiBi (either spelling), --no-alibi-fold or --fp32-residual-connection reach the
  // prediction's terms; an unknown position type is refused naming the file and line.
  const std::string path = testing::TempDir() + "plan_alibi.csv";
  std::ofstream(path) << "num_layers,hidden_size,num_attention_heads,seq_length,global_batch_size,micro_batch_size,tp,"
                         "pp,dp,ms_per_iter,peak_tflops,extra_args\n"
                         "24,2048,16,2048,8,8,1,1,1,278,989,--position-embedding-type alibi\n"
                         "24,2048,16,2048,8,8,1,1,1,305,989,--position-embedding-type=alibi --no-alibi-fold\n"
                         "24,2048,16,2048,8,8,1,1,1,259,989,--fp32-residual-connection\n";
  const auto pts = read_measured_points(path, "--check");
  ASSERT_EQ(pts.size(), 3u);
  const Calibration cal;
  const StepPrediction fold = predict(pts[0].spec, pts[0].layout, pts[0].cluster, cal),
                       mask = predict(pts[1].spec, pts[1].layout, pts[1].cluster, cal),
                       stream = predict(pts[2].spec, pts[2].layout, pts[2].cluster, cal);
  EXPECT_TRUE(fold.alibi_folded);
  EXPECT_GT(fold.alibi_ms, 0.0);
  EXPECT_FALSE(mask.alibi_folded);
  EXPECT_GT(mask.alibi_ms, fold.alibi_ms);
  EXPECT_EQ(stream.alibi_ms, 0.0);
  EXPECT_GT(stream.fp32_residual_ms, 0.0);
  const std::string bad = testing::TempDir() + "plan_bad_positions.csv";
  std::ofstream(bad) << "num_layers,hidden_size,num_attention_heads,seq_length,global_batch_size,micro_batch_size,tp,"
                        "pp,dp,ms_per_iter,peak_tflops,extra_args\n"
                        "24,2048,16,2048,8,8,1,1,1,278,989,--position-embedding-type sinusoidal\n";
  try {
    read_measured_points(bad, "--check");
    ADD_FAILURE() << "an unknown position type was accepted";
  } catch (const megaton::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("plan_bad_positions.csv:2"), std::string::npos) << e.what();
  }
}

TEST(Plan, BubbleGrowsWithPipelineAndShrinksWithMicroBatches) {
  const Cluster c = node(1, 8, 1000);
  const Calibration cal;
  double last = -1;
  for (int pp : {1, 2, 4, 8}) {  // same M = 8 micro-batches of 1
    const ModelSpec s = gpt_1p3b(8);
    const StepPrediction p = predict(s, Layout{1, pp, 1, 1, false}, c, cal);
    const double busy = p.compute_ms + p.overhead_ms + p.elementwise_ms + p.dropout_ms + p.tp_comm_ms;
    EXPECT_NEAR(p.bubble_ms / busy, (pp - 1) / 8.0, 1e-12);
    EXPECT_GT(p.bubble_ms, last);
    last = p.bubble_ms;
  }
  last = 1e300;
  for (int gb : {4, 8, 16, 64}) {  // PP 4, micro-batch 1: M = gb; the bubble's share of the busy time falls as 3/M
    const StepPrediction p = predict(gpt_1p3b(gb), Layout{1, 4, 1, 1, false}, c, cal);
    const double share = p.bubble_ms / (p.compute_ms + p.overhead_ms + p.elementwise_ms + p.dropout_ms + p.tp_comm_ms);
    EXPECT_NEAR(share, 3.0 / gb, 1e-12);
    EXPECT_LT(share, last);
    last = share;
  }
}

TEST(Plan, DataParallelRingVolume) {
  EXPECT_DOUBLE_EQ(ring_allreduce_ms(1e9, 1, 100), 0.0);
  EXPECT_NEAR(ring_allreduce_ms(1e9, 2, 100), 10.0, 1e-9);  // 2 (1/2) 1 GB / 100 GB/s = 10 ms
  EXPECT_NEAR(ring_allreduce_ms(1e9, 8, 100), 17.5, 1e-9);  // 2 (7/8) ...
  EXPECT_NEAR(ring_gather_ms(1e9, 8, 100), 8.75, 1e-9);
  // Across nodes the DP reduction takes the slower link.
  const ModelSpec s = gpt_1p3b(64);
  Calibration cal;
  cal.dp_overlap = 0;
  const StepPrediction one = predict(s, Layout{1, 1, 8, 8, false}, node(1, 8), cal);
  const StepPrediction two = predict(s, Layout{1, 1, 16, 4, false}, node(2, 8), cal);
  EXPECT_GT(two.dp_comm_ms, one.dp_comm_ms * 3);
}

TEST(Plan, EnumerationFollowsMegatronRules) {
  ModelSpec s = gpt_1p3b(96);
  s.model.num_attention_heads = 12;  // TP 8 impossible
  s.model.num_layers = 18;           // PP 4 and 8 impossible
  const Cluster c = node(2, 8);
  const auto layouts = enumerate_layouts(s, c, SearchLimits());
  ASSERT_FALSE(layouts.empty());
  bool saw_tp4 = false, saw_pp2 = false;
  for (const Layout& l : layouts) {
    EXPECT_EQ(l.world(), 16);
    EXPECT_LE(l.tp, 8);
    EXPECT_EQ(12 % l.tp, 0);
    EXPECT_EQ(18 % l.pp, 0);
    EXPECT_EQ(96 % (l.micro_batch * l.dp), 0);
    saw_tp4 |= l.tp == 4, saw_pp2 |= l.pp == 2;
  }
  EXPECT_TRUE(saw_tp4 && saw_pp2);
  EXPECT_EQ(layout_problem(s, Layout{8, 1, 2, 1, false}), "heads not divisible by TP");
  EXPECT_EQ(layout_problem(s, Layout{1, 4, 4, 1, false}), "layers not divisible by PP");
  EXPECT_EQ(layout_problem(s, Layout{1, 1, 16, 4, false}), "global batch not divisible by micro-batch x DP");
}

TEST(Plan, RecommendationAlwaysFits) {
  const Calibration cal;
  for (double mem : {12.0, 20.0, 40.0, 80.0}) {
    const auto ranked = rank_layouts(gpt_1p3b(64), node(1, 8, mem), cal, SearchLimits());
    const auto best = recommend(ranked);
    double fastest_fitting = 1e300;
    for (const auto& p : ranked)
      if (p.fits) fastest_fitting = std::min(fastest_fitting, p.total_ms);
    if (!best) {
      EXPECT_EQ(fastest_fitting, 1e300) << mem;
      continue;
    }
    EXPECT_TRUE(best->fits) << mem;
    EXPECT_LE(best->memory.total_gib(), mem - node().memory_reserve_gib);
    EXPECT_DOUBLE_EQ(best->total_ms, fastest_fitting) << mem;
  }
  EXPECT_FALSE(recommend(rank_layouts(gpt_1p3b(64), node(1, 8, 3), cal, SearchLimits())));  // nothing fits in 3 GiB
}

TEST(Plan, FitRecoversSyntheticPoints) {
  // "Measurements" made by the model itself with other constants: the fit must reproduce them closely.
  Calibration truth;
  truth.eff_max = 0.6, truth.gemm_half_gflop = 50, truth.layer_overhead_ms = 0.2, truth.optimizer_ns_per_param = 0.3;
  truth.fixed_ms = 5;
  std::vector<MeasuredPoint> pts;
  for (int mb : {1, 2, 4, 8})
    for (int tp : {1, 2}) {
      MeasuredPoint p;
      p.spec = gpt_1p3b(8 * mb);
      p.layout = Layout{tp, 1, 8 / tp, mb, false};
      p.cluster = node(1, 8, 1000);
      p.ms_per_iter = predict(p.spec, p.layout, p.cluster, truth).total_ms;
      pts.push_back(p);
    }
  const Calibration fit = fit_calibration(pts);
  for (const auto& p : pts)
    EXPECT_LT(std::fabs(relative_error(p, fit)), 0.02) << p.layout.name() << " mb" << p.layout.micro_batch;
}

TEST(Plan, CalibrationReproducesMeasuredH200Points) {
  // src/plan/calibration_h200.csv: the built-in calibration's 7 single-H200 points at the sustained clock (124M,
  // 350M, 1.3B at several micro-batch sizes, with recomputation). Stated tolerances: in-sample 4% per point and 2% on
  // average (measured: fit 1.3% / 0.7%, built-in 1.5% / 0.9%); leave-one-out 5% per point and 3% on average
  // (measured 2.0% / 1.3%). Without the elementwise term and the multi-start search the same points give 8.9% / 4.6%
  // in-sample and 42% / 11% left out.
  const auto pts = read_measured_points(source("src/plan/calibration_h200.csv"), "--check");
  ASSERT_EQ(pts.size(), 7u);
  EXPECT_NEAR(pts[4].ms_per_iter, 247.5, 1.0) << pts[4].label;
  auto check = [&](const Calibration& cal, const char* what) {
    double sum = 0;
    for (const auto& p : pts) {
      const double e = std::fabs(relative_error(p, cal));
      sum += e;
      EXPECT_LT(e, 0.04) << what << ": " << p.label;
    }
    EXPECT_LT(sum / pts.size(), 0.02) << what;
  };
  check(fit_calibration(pts), "fit");
  // The built-in defaults are a fit of this file (rounded); a refit from them moves the weakly determined
  // per-parameter cost (docs/plan.md), so only the errors are compared.
  check(Calibration(), "built-in");
  double loo_sum = 0;
  for (size_t i = 0; i < pts.size(); ++i) {
    std::vector<MeasuredPoint> others(pts);
    others.erase(others.begin() + long(i));
    const double e = std::fabs(relative_error(pts[i], fit_calibration(others)));
    EXPECT_LT(e, 0.05) << "left out: " << pts[i].label;
    loo_sum += e;
  }
  EXPECT_LT(loo_sum / pts.size(), 0.03);
}

TEST(Plan, CalibrationReproducesMeasuredCpuPoints) {
  // Tiny GPTs on a shared 2-core machine; timing noise there is large,
  // so the stated tolerance is 40% per point and 20% on average.
  const auto pts = read_measured_points(source("tests/plan/data/sweep_cpu_2core.csv"), "--check");
  ASSERT_GE(pts.size(), 5u);
  const Calibration fit = fit_calibration(pts);
  double sum = 0;
  for (const auto& p : pts) {
    const double e = std::fabs(relative_error(p, fit));
    sum += e;
    EXPECT_LT(e, 0.40) << p.label;
  }
  EXPECT_LT(sum / pts.size(), 0.20);
}

TEST(Plan, BadInputsAreRefusedNamingTheFlag) {
  auto message = [](auto fn) -> std::string {
    try {
      fn();
    } catch (const megaton::UsageError& e) {
      return e.what();
    }
    return "";
  };
  Cluster c;
  c.nodes = 0;
  EXPECT_NE(message([&] { validate_cluster(c); }).find("--nodes"), std::string::npos);
  c = Cluster(), c.peak_tflops = 0;
  EXPECT_NE(message([&] { validate_cluster(c); }).find("--peak-tflops"), std::string::npos);
  c = Cluster(), c.inter_node_gbps = -1;
  EXPECT_NE(message([&] { validate_cluster(c); }).find("--inter-node-gbps"), std::string::npos);
  EXPECT_NE(message([] { read_measured_points("/nonexistent.csv", "--calibration"); }).find("--calibration"),
            std::string::npos);
  const std::string bad = testing::TempDir() + "plan_bad.csv";
  std::ofstream(bad) << "num_layers,hidden_size,num_attention_heads,seq_length,global_batch_size,micro_batch_size,tp,"
                        "pp,dp,ms_per_iter,peak_tflops\n4,64,4,32,8,2,1,1,1,abc,1\n";
  try {
    read_measured_points(bad, "--check");
    ADD_FAILURE() << "malformed row accepted";
  } catch (const megaton::DataError& e) {
    EXPECT_NE(std::string(e.what()).find(":2: column 'ms_per_iter'"), std::string::npos) << e.what();
  }
}

TEST(Plan, CliRefusesBadFlags) {
  const std::string bin = MEGATON_BINARY;
  if (!std::ifstream(bin).good()) GTEST_SKIP() << "no " << bin;
  auto run = [&](const std::string& args, std::string& out) {
    FILE* f = popen((bin + " plan " + args + " 2>&1").c_str(), "r");
    char buf[4096];
    out.clear();
    while (fgets(buf, sizeof(buf), f)) out += buf;
    const int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  const std::string model = "--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 ";
  std::string out;
  EXPECT_EQ(run(model + "--global-batch-size 64 --tensor-model-parallel-size 3", out), 2);
  EXPECT_NE(out.find("--tensor-model-parallel-size"), std::string::npos) << out;
  EXPECT_EQ(run(model + "--global-batch-size 0", out), 2);
  EXPECT_NE(out.find("--global-batch-size"), std::string::npos) << out;
  EXPECT_EQ(run(model + "--global-batch-size 64 --gpus-per-node 0", out), 2);
  EXPECT_NE(out.find("--gpus-per-node"), std::string::npos) << out;
  EXPECT_EQ(run(model + "--global-batch-size 64 --bf16 --fp16", out), 2);
  EXPECT_NE(out.find("--fp16"), std::string::npos) << out;
  EXPECT_EQ(run(model + "--global-batch-size 64 --gpus-per-nod 8", out), 2);
  EXPECT_NE(out.find("did you mean --gpus-per-node"), std::string::npos) << out;
  EXPECT_EQ(run(model + "--global-batch-size 64 --bf16", out), 0);
  EXPECT_NE(out.find("recommendation: --tensor-model-parallel-size"), std::string::npos) << out;
}
