// megaton plan: predict memory per GPU and time per iteration of every TP x PP x DP layout, micro-batch size and
// recomputation setting of a model on a cluster, rank them and recommend one (the cost model: src/plan/,
// docs/plan.md). `megaton plan --check FILE` predicts every measured point of a sweep CSV instead.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "cli/megatron_flags.h"
#include "cli/parser.h"
#include "core/error.h"
#include "plan/calibration.h"
#include "plan/search.h"
#include "tools/subcommands.h"
#include "train/train_config.h"

namespace megaton::tools {

namespace po = boost::program_options;

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

void print_calibration(const plan::Calibration& c, std::ostream& os) {
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "calibration (%s): GEMM efficiency %.3f x g / (g + %.3g GFLOP), layer overhead %.3g ms, "
                "elementwise %.3g ps/element, optimizer %.3g ns/param + %.3g ms, DP overlap %.2f; dropout (measured) "
                "hidden %.3g in the LayerNorm kernels (%.3g by ATen), attention %.3g ps/element; ALiBi (measured) "
                "%.3g ps/score folded (%.3g ps/score/head-dim masked), fp32 residual stream %.3g ps/element\n",
                c.source.c_str(), c.eff_max, c.gemm_half_gflop, c.layer_overhead_ms, c.elementwise_ps_per_element,
                c.optimizer_ns_per_param, c.fixed_ms, c.dp_overlap, c.hidden_dropout_fused_ps_per_element,
                c.hidden_dropout_ps_per_element, c.attention_dropout_ps_per_element, c.alibi_fold_ps_per_element,
                c.alibi_mask_ps_per_element_dim, c.fp32_residual_ps_per_element);
  os << buf;
}

void print_breakdown(const plan::StepPrediction& p, std::ostream& os) {
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "  time: compute %.1f ms (%.3g PFLOP/GPU at %.0f%% of peak, GEMM %.3g GFLOP) + layer overhead %.1f + "
                "elementwise %.1f + dropout %.1f + ALiBi %.1f + fp32 stream %.1f + TP all-reduce %.1f + PP bubble %.1f "
                "+ PP p2p %.1f + DP grads %.1f + "
                "ZeRO "
                "all-gather %.1f + embedding "
                "%.1f + optimizer %.1f = %.1f ms\n"
                "  memory: weights %.2f + grads %.2f + optimizer %.2f + activations %.2f = %.2f GiB of %.1f usable\n",
                p.compute_ms, p.hardware_flops / p.layout.world() / 1e15, 100 * p.efficiency, p.gemm_gflop,
                p.overhead_ms, p.elementwise_ms, p.dropout_ms, p.alibi_ms, p.fp32_residual_ms, p.tp_comm_ms,
                p.bubble_ms, p.pp_p2p_ms, p.dp_comm_ms, p.zero_gather_ms, p.embedding_ms, p.optimizer_ms, p.total_ms,
                p.memory.weights_gib, p.memory.grads_gib, p.memory.optimizer_gib, p.memory.activations_gib,
                p.memory.total_gib(), p.usable_gib);
  os << buf;
}

int run_check(const std::string& file, const plan::Calibration& given, bool have_given, std::ostream& os) {
  const auto points = plan::read_measured_points(file, "--check");
  const plan::Calibration cal = have_given ? given : plan::fit_calibration(points);
  print_calibration(cal, os);
  const bool loo = !have_given && points.size() >= 3;
  os << "predicted vs measured, " << points.size() << " point(s) of " << file
     << (have_given ? "" : " (calibration fitted to these same points; 'LOO': left out of the fit)") << "\n";
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%-44s %10s %10s %8s %10s %8s %9s %9s\n", "point", "measured", "predicted", "error",
                loo ? "LOO pred" : "", loo ? "LOO err" : "", "mem pred", "mem meas");
  os << buf;
  double sum = 0, worst = 0, loo_sum = 0, loo_worst = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    const plan::StepPrediction pr = plan::predict(p.spec, p.layout, p.cluster, cal);
    const double err = (pr.total_ms - p.ms_per_iter) / p.ms_per_iter;
    sum += std::fabs(err), worst = std::max(worst, std::fabs(err));
    std::string loo_pred, loo_err;
    if (loo) {
      std::vector<plan::MeasuredPoint> others(points);
      others.erase(others.begin() + long(i));
      const plan::Calibration c2 = plan::fit_calibration(others);
      const double ms = plan::predict(p.spec, p.layout, p.cluster, c2).total_ms;
      const double e2 = (ms - p.ms_per_iter) / p.ms_per_iter;
      loo_sum += std::fabs(e2), loo_worst = std::max(loo_worst, std::fabs(e2));
      loo_pred = fmt("%.1f", ms), loo_err = fmt("%+.1f%%", 100 * e2);
    }
    std::snprintf(buf, sizeof(buf), "%-44s %10.1f %10.1f %+7.1f%% %10s %8s %9.2f %9s\n", p.label.c_str(), p.ms_per_iter,
                  pr.total_ms, 100 * err, loo_pred.c_str(), loo_err.c_str(), pr.memory.total_gib(),
                  p.peak_mem_gib > 0 ? fmt("%.2f", p.peak_mem_gib).c_str() : "-");
    os << buf;
  }
  const double n = double(points.size());
  std::snprintf(buf, sizeof(buf), "time error: mean |error| %.1f%%, worst %.1f%% over %zu point(s)", 100 * sum / n,
                100 * worst, points.size());
  os << buf;
  if (loo) {
    std::snprintf(buf, sizeof(buf), "; leave-one-out mean |error| %.1f%%, worst %.1f%%", 100 * loo_sum / n,
                  100 * loo_worst);
    os << buf;
  }
  os << "\n(memory: predicted = megaton's estimate per GPU; measured = peak of the process, see the CSV's "
        "peak_mem_source)\n";
  return 0;
}

// The flags of argv (--name or --name=value) that are in `names`, in order, each once.
std::vector<std::string> given_flags(int argc, const char* const* argv, const std::set<std::string>& names) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0) continue;
    const std::string name = a.substr(2, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 2);
    if (names.count(name) && std::find(out.begin(), out.end(), "--" + name) == out.end()) out.push_back("--" + name);
  }
  return out;
}

}  // namespace

int run_plan(int argc, const char* const* argv) {
  cli::MegatronFlags flags;
  model::GptOptions& model = flags.config.model;
  plan::ModelSpec spec;
  plan::Cluster cluster;
  plan::Calibration cal;
  plan::SearchLimits lim;
  std::string calibration_file, check_file, recompute = "both";
  int top = 15;
  bool bf16 = false, fp16 = false;
  po::options_description d;
  flags.bind_model(d);
  // clang-format off
  d.add_options()
      ("vocab-size", po::value(&spec.vocab)->default_value(spec.vocab), "tokenizer vocabulary, padded per TP as "
       "Megatron does (--make-vocab-size-divisible-by x TP)")
      ("padded-vocab", po::value(&spec.padded_vocab)->default_value(0), "the padded vocabulary exactly (overrides "
       "--vocab-size)")
      ("global-batch-size", po::value(&spec.global_batch)->default_value(0), "samples per iteration (required)")
      ("bf16", po::bool_switch(&bf16), "bf16 training (weights and activations 2 bytes, fp32 masters)")
      ("fp16", po::bool_switch(&fp16), "fp16 training (as --bf16 for memory and time)")
      ("zero-stage", po::value(&spec.zero_stage)->default_value(0), "0 or 1 (ZeRO-1: optimizer state over DP)")
      ("nodes", po::value(&cluster.nodes)->default_value(cluster.nodes), "nodes")
      ("gpus-per-node", po::value(&cluster.gpus_per_node)->default_value(cluster.gpus_per_node), "GPUs per node")
      ("gpu-memory-gib", po::value(&cluster.gpu_memory_gib)->default_value(cluster.gpu_memory_gib),
       "memory of one GPU, GiB")
      ("memory-reserve-gib", po::value(&cluster.memory_reserve_gib)->default_value(cluster.memory_reserve_gib),
       "GiB per GPU not available to the model (CUDA context, workspaces, fragmentation)")
      ("peak-tflops", po::value(&cluster.peak_tflops)->default_value(cluster.peak_tflops),
       "dense peak TFLOP/s of one GPU in the training dtype (H100/H200 SXM bf16: 989)")
      ("intra-node-gbps", po::value(&cluster.intra_node_gbps)->default_value(cluster.intra_node_gbps),
       "all-reduce bus bandwidth inside a node, GB/s (bytes) per GPU")
      ("inter-node-gbps", po::value(&cluster.inter_node_gbps)->default_value(cluster.inter_node_gbps),
       "bus bandwidth between nodes, GB/s (bytes) per GPU: 400 Gbit/s per GPU = 50")
      ("dp-overlap", po::value(&cal.dp_overlap)->default_value(cal.dp_overlap),
       "fraction of the DP gradient reduction that may hide behind the last backward")
      ("calibration", po::value(&calibration_file), "CSV of measured iterations (perf/sweep/run_sweep.sh's sweep.csv) to fit "
       "the model's constants to")
      ("check", po::value(&check_file), "predict every measured point of this CSV and print the errors")
      ("tensor-model-parallel-size", po::value(&lim.tp)->default_value(0), "only this TP (0 = all)")
      ("pipeline-model-parallel-size", po::value(&lim.pp)->default_value(0), "only this PP (0 = all)")
      ("micro-batch-size", po::value(&lim.micro_batch)->default_value(0), "only this micro-batch size (0 = all)")
      ("max-micro-batch-size", po::value(&lim.max_micro_batch)->default_value(lim.max_micro_batch),
       "largest micro-batch size tried")
      ("recompute", po::value(&recompute)->default_value(recompute), "both | on | off: activation recomputation")
      ("top", po::value(&top)->default_value(top), "rows of the table (0 = all)");
  // clang-format on
  // A `megaton train` line pasted whole: the train flags the plan does not depend on (data, tokenizer, checkpoints,
  // logging, the schedule's numbers) are accepted, their values dropped, and named on the output.
  cli::MegatronFlags unused;
  po::options_description train_flags;
  unused.bind(train_flags);
  train_flags.add_options()("world-size", po::value<int>(), "")("vocab-size", po::value<int64_t>(), "");
  po::options_description accepted;
  std::set<std::string> accepted_names;
  for (const auto& o : train_flags.options()) {
    if (d.find_nothrow(o->long_name(), false) != nullptr || o->long_name() == "help") continue;
    accepted.add(o);
    accepted_names.insert(o->long_name());
  }
  if (!cli::parse_args("plan",
                       "megaton plan: predict memory per GPU and time per iteration of parallel layouts\n"
                       "  megaton plan --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 "
                       "--global-batch-size 512 --bf16 --nodes 4 --gpus-per-node 8\n"
                       "  megaton plan --check src/plan/calibration_h200.csv",
                       argc, argv, d, std::cout, "", &accepted))
    return 0;
  const std::vector<std::string> ignored = given_flags(argc, argv, accepted_names);
  if (!ignored.empty()) {
    std::string line;
    for (const std::string& f : ignored) line += (line.empty() ? "" : ", ") + f;
    std::cout << "ignored (megaton train flags the plan does not depend on): " << line << "\n";
  }

  MEGATON_CHECK(!(bf16 && fp16), UsageError, "--fp16 and --bf16 are exclusive");
  spec.bf16 = bf16, spec.fp16 = fp16;
  validate_cluster(cluster);
  MEGATON_CHECK(cal.dp_overlap >= 0 && cal.dp_overlap <= 1, UsageError, "--dp-overlap must be in [0, 1] (got ",
                cal.dp_overlap, ")");
  if (!calibration_file.empty()) {
    const plan::Calibration start = cal;
    cal = plan::fit_calibration(plan::read_measured_points(calibration_file, "--calibration"), start);
    cal.source += " of " + calibration_file;
  }
  if (!check_file.empty()) return run_check(check_file, cal, !calibration_file.empty(), std::cout);

  flags.resolve();
  model.validate();
  MEGATON_CHECK(model.seq_length > 0, UsageError, "--seq-length is required and must be > 0");
  MEGATON_CHECK(spec.global_batch > 0, UsageError, "--global-batch-size is required and must be > 0 (got ",
                spec.global_batch, ")");
  MEGATON_CHECK(spec.vocab > 0, UsageError, "--vocab-size must be > 0 (got ", spec.vocab, ")");
  MEGATON_CHECK(spec.padded_vocab >= 0, UsageError, "--padded-vocab must be >= 0 (got ", spec.padded_vocab, ")");
  MEGATON_CHECK(spec.zero_stage == 0 || spec.zero_stage == 1, UsageError, "--zero-stage: 0 or 1, got ",
                spec.zero_stage);
  MEGATON_CHECK(recompute == "both" || recompute == "on" || recompute == "off", UsageError,
                "--recompute: expected both|on|off, got '", recompute, "'");
  lim.recompute = recompute == "both" ? (model.checkpoint_activations ? 1 : -1) : recompute == "on" ? 1 : 0;
  MEGATON_CHECK(lim.tp >= 0 && lim.pp >= 0 && lim.micro_batch >= 0 && lim.max_micro_batch >= 1, UsageError,
                "--tensor-model-parallel-size, --pipeline-model-parallel-size and --micro-batch-size must be >= 0, "
                "--max-micro-batch-size >= 1");
  MEGATON_CHECK(lim.tp == 0 || cluster.gpus_per_node % lim.tp == 0, UsageError, "--tensor-model-parallel-size (",
                lim.tp, ") must divide --gpus-per-node (", cluster.gpus_per_node, "): TP stays inside a node");
  MEGATON_CHECK(lim.pp == 0 || model.num_layers % lim.pp == 0, UsageError, "--num-layers (", model.num_layers,
                ") must be divisible by --pipeline-model-parallel-size (", lim.pp, ")");
  MEGATON_CHECK(lim.tp == 0 || model.num_attention_heads % lim.tp == 0, UsageError, "--num-attention-heads (",
                model.num_attention_heads, ") must be divisible by --tensor-model-parallel-size (", lim.tp, ")");
  MEGATON_CHECK(spec.global_batch >= 1, UsageError, "--global-batch-size must be >= 1");
  spec.model = model;
  spec.kernels = flags.config.kernels;

  const auto ranked = plan::rank_layouts(spec, cluster, cal, lim);
  MEGATON_CHECK(!ranked.empty(), UsageError, "no layout of ", cluster.world(), " GPUs (--nodes ", cluster.nodes,
                " x --gpus-per-node ", cluster.gpus_per_node, ") satisfies --num-layers (", model.num_layers,
                ") % PP, --num-attention-heads (", model.num_attention_heads, ") % TP and --global-batch-size (",
                spec.global_batch, ") % (micro-batch x DP) with the given limits");
  std::ostream& os = std::cout;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "model: %d layers, hidden %d, %d heads, ffn %d, seq %d, vocab %lld, global batch %d, %s, ZeRO-%d\n"
                "cluster: %d node(s) x %d GPU(s), %.0f GiB each (%.1f reserved), peak %.0f TFLOP/s, links %.0f / %.0f "
                "GB/s inside / between nodes\n",
                model.num_layers, model.hidden_size, model.num_attention_heads, model.ffn_hidden_size, model.seq_length,
                static_cast<long long>(spec.padded_vocab > 0 ? spec.padded_vocab : spec.vocab), spec.global_batch,
                bf16   ? "bf16"
                : fp16 ? "fp16"
                       : "fp32",
                spec.zero_stage, cluster.nodes, cluster.gpus_per_node, cluster.gpu_memory_gib,
                cluster.memory_reserve_gib, cluster.peak_tflops, cluster.intra_node_gbps, cluster.inter_node_gbps);
  os << buf;
  print_calibration(cal, os);
  std::snprintf(buf, sizeof(buf), "%4s  %-16s %4s %5s %3s %10s %5s %11s %11s %6s\n", "rank", "layout", "mb", "M", "rc",
                "mem GiB", "fits", "ms/iter", "TFLOP/s/GPU", "eff");
  os << buf;
  int shown = 0;
  for (const auto& p : ranked) {
    if (top > 0 && shown >= top) break;
    ++shown;
    std::snprintf(buf, sizeof(buf), "%4d  %-16s %4d %5d %3s %10.2f %5s %11.1f %11.1f %5.0f%%\n", shown,
                  p.layout.name().c_str(), p.layout.micro_batch, p.num_micro_batches, p.layout.recompute ? "on" : "off",
                  p.memory.total_gib(), p.fits ? "yes" : "NO", p.total_ms, p.tflops_per_gpu, 100 * p.efficiency);
    os << buf;
  }
  int fitting = 0;
  for (const auto& p : ranked) fitting += p.fits;
  os << "(" << ranked.size() << " layouts considered, " << fitting << " fit"
     << (shown < int(ranked.size()) ? "; --top 0 lists all" : "") << ")\n";
  const auto best = plan::recommend(ranked);
  if (!best) {
    std::snprintf(buf, sizeof(buf),
                  "recommendation: none — no layout fits in %.1f GiB per GPU (the smallest needs %.2f GiB): add GPUs, "
                  "turn on --zero-stage 1, or use GPUs with more memory\n",
                  ranked.front().usable_gib, ranked.front().memory.total_gib());
    os << buf;
    return 0;
  }
  std::snprintf(buf, sizeof(buf),
                "recommendation: --tensor-model-parallel-size %d --pipeline-model-parallel-size %d (DP %d) "
                "--micro-batch-size %d%s: %.1f ms/iter, %.1f TFLOP/s/GPU, %.0f tokens/s, %.2f GiB/GPU\n",
                best->layout.tp, best->layout.pp, best->layout.dp, best->layout.micro_batch,
                best->layout.recompute ? " --checkpoint-activations" : "", best->total_ms, best->tflops_per_gpu,
                best->tokens_per_s, best->memory.total_gib());
  os << buf;
  print_breakdown(*best, os);
  return 0;
}

}  // namespace megaton::tools
