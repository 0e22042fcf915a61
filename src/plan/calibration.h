// Measured iterations (the CSV written by perf/sweep/run_sweep.sh, one row per configuration) and the fit of the cost
// model's constants (plan::Calibration) to them: least squares on log(predicted / measured) with a weak pull toward
// the built-in defaults, so that a file with fewer points than constants still gives sensible values.
#pragma once
#include <string>
#include <vector>

#include "plan/cluster.h"
#include "plan/cost_model.h"

namespace megaton::plan {

struct MeasuredPoint {
  std::string label;  // "<machine> <config> TP1xPP1xDP1 mb8"
  ModelSpec spec;
  Layout layout;
  Cluster cluster;  // the machine it ran on: peak, GPUs per node, links
  double ms_per_iter = 0;
  double tflops_per_gpu = 0;  // as measured (0 when absent)
  double peak_mem_gib = 0;    // as measured (0 when absent)
};

/// Reads every row with status "ok" and a time. Throws DataError naming the file, line and column on malformed rows,
/// UsageError (naming `flag`) when the file cannot be opened or has no usable row.
std::vector<MeasuredPoint> read_measured_points(const std::string& path, const std::string& flag);

/// Fits eff_max, gemm_half_gflop, layer_overhead_ms, optimizer_ns_per_param and fixed_ms; dp_overlap is kept.
Calibration fit_calibration(const std::vector<MeasuredPoint>& points, const Calibration& start = Calibration());

/// Relative error (predicted - measured) / measured of one point under `cal`.
double relative_error(const MeasuredPoint& p, const Calibration& cal);

}  // namespace megaton::plan
