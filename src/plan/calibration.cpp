#include "plan/calibration.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/parse.h"

namespace megaton::plan {

namespace {

// The calibration files are megaton's own: numbers and plain names, no quoting, so a line splits at its commas (Debian
// packages no C++ CSV library; a quoted cell would fail the column's number parse with the file and line).
std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream is(line);
  while (std::getline(is, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

class Row {
 public:
  Row(const std::map<std::string, size_t>& cols, std::vector<std::string> cells, std::string where)
      : cols_(cols), cells_(std::move(cells)), where_(std::move(where)) {}
  std::string text(const std::string& name, const std::string& dflt = "") const {
    auto it = cols_.find(name);
    if (it == cols_.end() || it->second >= cells_.size()) return dflt;
    return cells_[it->second];
  }
  double num(const std::string& name, double dflt = NAN) const {
    const std::string t = text(name);
    if (t.empty()) {
      MEGATON_CHECK(!std::isnan(dflt), DataError, where_, ": column '", name, "' is empty or missing");
      return dflt;
    }
    if (const auto v = parse_double(t)) return *v;
    throw DataError(str(where_, ": column '", name, "': '", t, "' is not a number"));
  }

 private:
  const std::map<std::string, size_t>& cols_;
  std::vector<std::string> cells_;
  std::string where_;
};

// The fitted constants in log space.
constexpr int kParams = 6;
// Keeps a point of the search inside eff_max <= 1 (x[0] = log eff_max).
void cap_eff_max(double* x) {
  x[0] = std::min(x[0], 0.0);
}
void to_vec(const Calibration& c, double* x) {
  x[0] = std::log(c.eff_max), x[1] = std::log(c.gemm_half_gflop), x[2] = std::log(c.layer_overhead_ms);
  x[3] = std::log(c.optimizer_ns_per_param), x[4] = std::log(c.fixed_ms);
  x[5] = std::log(c.elementwise_ps_per_element);
}
Calibration from_vec(const double* x, const Calibration& base) {
  Calibration c = base;
  c.eff_max = std::min(1.0, std::exp(x[0]));
  c.gemm_half_gflop = std::exp(x[1]), c.layer_overhead_ms = std::exp(x[2]);
  c.optimizer_ns_per_param = std::exp(x[3]), c.fixed_ms = std::exp(x[4]);
  c.elementwise_ps_per_element = std::exp(x[5]);
  return c;
}

}  // namespace

std::vector<MeasuredPoint> read_measured_points(const std::string& path, const std::string& flag) {
  std::ifstream in(path);
  MEGATON_CHECK(in.good(), UsageError, flag, ": cannot open '", path, "'");
  std::string line;
  int lineno = 0;
  bool got_header = false;
  while (!got_header && std::getline(in, line)) {  // '#' lines before the header describe the file
    ++lineno;
    got_header = !line.empty() && line[0] != '#';
  }
  MEGATON_CHECK(got_header, UsageError, flag, ": '", path, "' has no header line");
  std::map<std::string, size_t> cols;
  const auto header = split_csv_line(line);
  for (size_t i = 0; i < header.size(); ++i) cols[header[i]] = i;
  for (const char* need : {"num_layers", "hidden_size", "num_attention_heads", "seq_length", "global_batch_size",
                           "micro_batch_size", "tp", "pp", "dp", "ms_per_iter", "peak_tflops"})
    MEGATON_CHECK(cols.count(need), UsageError, flag, ": '", path, "' has no column '", need,
                  "' (expected the CSV of perf/sweep/run_sweep.sh)");
  std::vector<MeasuredPoint> out;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    Row r(cols, split_csv_line(line), str(path, ":", lineno));
    if (r.text("status", "ok") != "ok" || r.text("ms_per_iter").empty()) continue;
    MeasuredPoint p;
    model::GptOptions& m = p.spec.model;
    ops::KernelOptions& k = p.spec.kernels;
    m.num_layers = int(r.num("num_layers")), m.hidden_size = int(r.num("hidden_size"));
    m.num_attention_heads = int(r.num("num_attention_heads")), m.seq_length = int(r.num("seq_length"));
    m.ffn_hidden_size = int(r.num("ffn_hidden_size", 0));
    // Sweeps before these columns existed ran without dropout (perf/sweep/sweep.py passed 0 for both).
    m.hidden_dropout = r.num("hidden_dropout", 0.0), m.attention_dropout = r.num("attention_dropout", 0.0);
    // The flags the run was given beyond the configuration's keys (sweep.py's `extra`): those the cost model reads.
    std::istringstream extra(r.text("extra_args", ""));
    const std::string positions = "--position-embedding-type";
    for (std::string flag; extra >> flag;) {
      if (flag == "--no-dropout-layernorm-fusion") k.dropout_layernorm_fusion = false;
      if (flag == "--no-fused-layernorm") k.fused_layernorm = false;
      if (flag == "--no-alibi-fold") k.alibi_fold = false;
      if (flag == "--fp32-residual-connection") m.fp32_residual_connection = true;
      if (flag == positions) extra >> m.position_embedding_type;  // "--position-embedding-type alibi"
      if (flag.rfind(positions + "=", 0) == 0) m.position_embedding_type = flag.substr(positions.size() + 1);
    }
    try {
      m.validate();
    } catch (const UsageError& e) {
      throw DataError(str(path, ":", lineno, ": ", e.what()));
    }
    p.spec.vocab = int64_t(r.num("vocab_size", 50257));
    p.spec.padded_vocab = int64_t(r.num("padded_vocab", 0));
    p.spec.global_batch = int(r.num("global_batch_size"));
    const std::string precision = r.text("precision", "bf16");
    p.spec.bf16 = precision == "bf16", p.spec.fp16 = precision == "fp16";
    p.spec.zero_stage = int(r.num("zero_stage", 0));
    p.layout.tp = int(r.num("tp")), p.layout.pp = int(r.num("pp")), p.layout.dp = int(r.num("dp"));
    p.layout.micro_batch = int(r.num("micro_batch_size"));
    const std::string rc = r.text("recompute", "0");
    p.layout.recompute = rc == "1" || rc == "on" || rc == "true";
    const std::string problem = layout_problem(p.spec, p.layout);
    MEGATON_CHECK(problem.empty(), DataError, path, ":", lineno, ": ", p.layout.name(), " mb", p.layout.micro_batch,
                  ": ", problem);
    p.cluster.peak_tflops = r.num("peak_tflops");
    p.cluster.gpus_per_node = int(r.num("gpus_per_node", p.layout.world()));
    p.cluster.nodes = int(r.num("nodes", 1));
    p.cluster.intra_node_gbps = r.num("intra_node_gbps", 360.0);
    p.cluster.inter_node_gbps = r.num("inter_node_gbps", 50.0);
    p.cluster.gpu_memory_gib = r.num("gpu_memory_gib", 1e6);
    p.ms_per_iter = r.num("ms_per_iter");
    MEGATON_CHECK(p.ms_per_iter > 0, DataError, path, ":", lineno, ": ms_per_iter must be > 0");
    p.tflops_per_gpu = r.num("model_tflops_per_gpu", 0);
    p.peak_mem_gib = r.num("peak_mem_mib", 0) / 1024.0;
    p.label = str(r.text("machine", "?"), " ", r.text("config", "?"), " ", p.layout.name(), " mb", p.layout.micro_batch,
                  p.layout.recompute ? " rc" : "");
    out.push_back(std::move(p));
  }
  MEGATON_CHECK(!out.empty(), UsageError, flag, ": '", path, "' has no measured row (status ok with ms_per_iter)");
  return out;
}

double relative_error(const MeasuredPoint& p, const Calibration& cal) {
  const StepPrediction pr = predict(p.spec, p.layout, p.cluster, cal);
  return (pr.total_ms - p.ms_per_iter) / p.ms_per_iter;
}

namespace {

// Pattern search in log space from x (updated in place): try +-step on each constant, move to the best improvement,
// halve the step when none helps. Returns the loss reached.
template <typename Loss>
double pattern_search(double (&x)[kParams], const Loss& loss) {
  double best = loss(x);
  for (double step = 2.0; step > 1e-4;) {
    double move[kParams];
    double move_loss = best;
    for (int i = 0; i < kParams; ++i) {
      for (double dir : {1.0, -1.0}) {
        double y[kParams];
        std::copy(x, x + kParams, y);
        y[i] += dir * step;
        if (i == 0) cap_eff_max(y);
        const double l = loss(y);
        if (l < move_loss - 1e-15) move_loss = l, std::copy(y, y + kParams, move);
      }
    }
    if (move_loss < best) {
      best = move_loss, std::copy(move, move + kParams, x);
    } else {
      step /= 2;
    }
  }
  return best;
}

}  // namespace

Calibration fit_calibration(const std::vector<MeasuredPoint>& points, const Calibration& start) {
  MEGATON_ASSERT(!points.empty(), "fit_calibration needs points");
  double x0[kParams];
  to_vec(start, x0);
  const double prior = 1e-3;  // weak: only decides among fits that are equally good
  auto loss = [&](const double* v) {
    const Calibration c = from_vec(v, start);
    double sum = 0;
    for (const auto& p : points) {
      const double r = std::log(predict(p.spec, p.layout, p.cluster, c).total_ms / p.ms_per_iter);
      sum += r * r;
    }
    for (int i = 0; i < kParams; ++i) sum += prior * (v[i] - x0[i]) * (v[i] - x0[i]);
    return sum;
  };
  // The search is local: it starts from `start` and from `start` with each constant in turn e^3 and e^7 times larger
  // and smaller (a machine whose times are 1000x the built-in's, such as a CPU, is found that way), keeping the best.
  double best_x[kParams];
  std::copy(x0, x0 + kParams, best_x);
  double best = pattern_search(best_x, loss);
  for (int i = 0; i < kParams; ++i) {
    for (double dir : {3.0, -3.0, 7.0, -7.0}) {
      double x[kParams];
      std::copy(x0, x0 + kParams, x);
      x[i] += dir;
      if (i == 0) cap_eff_max(x);
      const double l = pattern_search(x, loss);
      if (l < best) best = l, std::copy(x, x + kParams, best_x);
    }
  }
  Calibration c = from_vec(best_x, start);
  c.source = str("fitted to ", points.size(), " measured point", points.size() == 1 ? "" : "s");
  return c;
}

}  // namespace megaton::plan
