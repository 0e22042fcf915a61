// The choice among the algorithms a GEMM library offers for one GEMM shape, by timing each on its first call (as
// PyTorch's TunableOp does): cuBLASLt's heuristic ranks its algorithms by a model of the GPU, and at some training
// shapes an algorithm it ranks lower runs 14-40% faster in isolation on an H200 (perf/bench_gemm_algos.cpp;
// docs/gpu.md). ops/cublaslt_gemm asks the tuner for the MLP's epilogue GEMMs and the weight-gradient GEMMs into fp32
// main grads.
//
// Off by default (`--gemm-autotune` turns it on): on an H200 at its power cap the short timings misranked algorithms
// (a kept choice ran 7-13% slower than the baseline over longer windows at the 1.3B shapes) and no training A/B showed
// a gain beyond the ~1% spread between runs (docs/gpu.md, sixth 2026-12-03 session).
//
// A memo of measurements per process, like the GEMM libraries' own caches: the one process-wide instance
// (gemm_tuner()) is the deliberate exception to "no global mutable state" (docs/model.md, --gemm-autotune). The
// choice is made once per shape, on its first call (the first training iteration), and kept: within a run the same
// shape always runs the same algorithm; across runs the timing may pick differently among near-equal algorithms, so
// results can differ in the last bits between runs (a candidate replaces the baseline only when kMargin faster).
// Off, the baselines run (cuBLASLt's first choice, cublasGemmEx for the weight gradients), deterministic across runs.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace megaton::ops {

class GemmTuner {
 public:
  /// A candidate must be this much faster than the baseline (relative) to replace it.
  /// 10%: on an H200 at its power cap, timings of short windows misranked algorithms within ~10% of each other (at
  /// the 1.3B shapes a kept choice ran 7-13% slower than the baseline over longer windows: docs/gpu.md, sixth
  /// 2026-12-03 session), while the gains that held in every benchmark run were 1.14-1.46x.
  static constexpr double kMargin = 0.10;
  /// Measured rounds after one warm-up round; each round times every candidate once, in alternating order.
  static constexpr int kRounds = 4;

  /// Off (the default): choose returns the baseline without timing (and forgets nothing).
  void set_enabled(bool on);
  bool enabled() const;

  /// The candidate to run for the GEMM `key` (its kind, sizes, dtypes, alignments: whatever decides the algorithms on
  /// offer and their speed), among [baseline, last): on the first call for `key` the candidates are timed by
  /// seconds(c) (which runs c a few times and returns seconds per call) in 1 + kRounds rounds, each over all
  /// candidates, forwards then backwards in turn; the first round warms up and is dropped, the others are averaged
  /// (the GPU's clock drifts at its power cap: timing one candidate after another favoured whichever ran while the
  /// clock was high, and the alternating order cancels a steady drift). The fastest is kept, the baseline unless
  /// another is kMargin faster; later calls return the kept one. seconds(c) < 0 in any round: c failed and is
  /// skipped. label: how details() names the GEMM (e.g. "weight gradient 768x2304x32768").
  int choose(const std::vector<int64_t>& key, int baseline, int last, const std::function<double(int)>& seconds,
             const std::string& label = {});

  /// The kept choices so far (tests, benchmarks).
  std::map<std::vector<int64_t>, int> choices() const;

  /// One line on the choices so far for the log ("GEMM tuner: N shapes timed, K ran faster than the baseline: 1.37x
  /// ..."), or empty when nothing was timed.
  std::string summary() const;

  /// A line per timed GEMM, in key order: its label, every candidate's mean ms per call ("-" where it failed) and the
  /// one kept, e.g. "weight gradient 768x2304x32768: -1 0.240, 0 0.172, 1 0.181 ms; kept 0 (1.40x)" (what the log
  /// shows with --gemm-autotune, to compare with perf/bench_gemm_algos.cpp).
  std::vector<std::string> details() const;

  /// An opaque record kept for `key` (the library's own description of the algorithm to run), so that later calls
  /// launch it without asking the library again; record() is empty until keep_record.
  void keep_record(const std::vector<int64_t>& key, std::vector<uint64_t> record);
  std::vector<uint64_t> record(const std::vector<int64_t>& key) const;

 private:
  mutable std::mutex mu_;
  bool enabled_ = false;
  std::map<std::vector<int64_t>, int> chosen_;
  std::map<std::vector<int64_t>, double> gains_;  // baseline's seconds over the kept one's, where timed
  std::map<std::vector<int64_t>, std::vector<uint64_t>> records_;
  std::map<std::vector<int64_t>, std::string> details_;  // details()' line per timed key
};

/// The process-wide tuner.
GemmTuner& gemm_tuner();

}  // namespace megaton::ops
