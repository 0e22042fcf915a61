// The choice among the algorithms a GEMM library offers for one GEMM shape, by timing them inside training (as
// PyTorch's TunableOp chooses by timing, but in place): cuBLASLt's heuristic ranks its algorithms by a model of the
// GPU, and at some training shapes an algorithm it ranks lower runs 14-46% faster in isolation on an H200
// (perf/bench_gemm_algos.cpp; docs/gpu.md). ops/cublaslt_gemm asks the tuner for the MLP's epilogue GEMMs and the
// weight-gradient GEMMs into fp32 main grads.
//
// Off by default (`--gemm-autotune` turns it on after two warm-up iterations). Its first version timed each shape's
// candidates in short bursts of back-to-back calls on the shape's first call; on an H200 at its 700 W cap those bursts
// misranked algorithms (a kept choice ran 7-13% slower than the baseline over longer windows at the 1.3B shapes) and
// no training A/B showed a gain (docs/gpu.md, sixth 2026-12-03 session). This version times the calls training makes
// anyway: a shape's calls take the candidates in turn (round-robin, alternating direction) until each has kSamples
// calls, every call between two device marks (CUDA events, read once the trial is over), so that each candidate runs
// in the same sustained state as the step it belongs to; the median per candidate decides. Until then the training
// step runs slower candidates on some calls: a few iterations' cost, once per run.
//
// A memo of measurements per process, like the GEMM libraries' own caches: the one process-wide instance
// (gemm_tuner()) is the deliberate exception to "no global mutable state" (docs/model.md, --gemm-autotune). Within a
// run a shape keeps one algorithm once its trial is over; across runs the timing may pick differently among
// near-equal algorithms, so results can differ in the last bits between runs. Off, the baselines run (cuBLASLt's
// first choice, cublasGemmEx for the weight gradients), deterministic across runs.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/timer.h"

namespace megaton::ops {

class GemmTuner {
 public:
  /// A candidate's median must be this much below the baseline's (relative) to replace it.
  static constexpr double kMargin = 0.03;
  /// Timed calls per candidate (even: with the alternating turns a steady drift of the clock moves every candidate's
  /// median alike).
  static constexpr int kSamples = 6;

  /// Off (the default): next() returns the baseline and nothing is timed (what was decided is kept).
  void set_enabled(bool on);
  bool enabled() const;

  /// What next() hands out: the candidate to run for this call; timed: run it between two device marks and report
  /// them (add_sample, or failed); final: the candidate stays for this key (the choice, or the baseline when off or
  /// with one candidate): keep its record.
  struct Turn {
    int candidate = 0;
    bool timed = false, final = false;
  };

  /// The candidate for this call of the GEMM `key` (its kind, sizes, dtypes, alignments: whatever decides the
  /// algorithms on offer and their speed), among [baseline, last): the kept one once decided; the baseline when off
  /// or with one candidate; else the key's trial begins or goes on, and the candidates take the calls in turn
  /// (forwards, then backwards, ...), skipping failed ones. label names the GEMM in details().
  Turn next(const std::vector<int64_t>& key, int baseline, int last, const std::string& label = {});

  /// The device marks before and after the call of candidate c that next() gave for key. When every candidate that
  /// did not fail has kSamples, the trial ends: the marks are read (waiting for the last), the candidate with the
  /// lowest median is kept — the baseline unless another is kMargin faster — and decided(key) becomes true.
  void add_sample(const std::vector<int64_t>& key, int c, std::unique_ptr<DeviceMark> start,
                  std::unique_ptr<DeviceMark> end);

  /// Candidate c could not run (cuBLAS refused it): it takes no further turns. A failed baseline: the fastest of the
  /// others is kept (no margin).
  void failed(const std::vector<int64_t>& key, int c);

  /// Whether key's trial is over (its choice kept), and the choice.
  bool decided(const std::vector<int64_t>& key) const;
  int choice(const std::vector<int64_t>& key) const;

  /// How many keys are under trial (begun, not decided).
  size_t trials_in_progress() const;

  /// The kept choices so far (tests, benchmarks).
  std::map<std::vector<int64_t>, int> choices() const;

  /// One line on the choices so far for the log ("GEMM tuner: N shapes timed, K ran faster than the baseline: 1.37x
  /// ..."), or empty when nothing was decided.
  std::string summary() const;

  /// A line per decided GEMM, in key order: its label, every candidate's median ms per call ("-" where it failed) and
  /// the one kept, e.g. "weight gradient 768x2304x32768: -1 0.240, 0 0.172, 1 0.181 ms; kept 0 (1.40x)" (what the log
  /// shows with --gemm-autotune, to compare with perf/bench_gemm_algos.cpp).
  std::vector<std::string> details() const;

  /// An opaque record kept for `key` (the library's own description of the algorithm to run), so that later calls
  /// launch it without asking the library again; record() is empty until keep_record.
  void keep_record(const std::vector<int64_t>& key, std::vector<uint64_t> record);
  std::vector<uint64_t> record(const std::vector<int64_t>& key) const;

 private:
  struct Sample {
    int candidate;
    std::unique_ptr<DeviceMark> start, end;
  };
  struct Trial {
    int baseline = 0, last = 0;
    std::string label;
    int64_t turn = 0;                   // turns handed out so far
    std::vector<int> received, failed;  // per candidate: samples received, 1 where it failed
    std::vector<Sample> samples;
  };
  bool complete(const Trial& t) const;                     // every candidate left has kSamples
  void decide(const std::vector<int64_t>& key, Trial& t);  // mu_ held; erases the trial

  mutable std::mutex mu_;
  bool enabled_ = false;
  std::map<std::vector<int64_t>, Trial> trials_;  // begun, not decided
  std::map<std::vector<int64_t>, int> chosen_;
  std::map<std::vector<int64_t>, double> gains_;  // baseline's median over the kept one's
  std::map<std::vector<int64_t>, std::vector<uint64_t>> records_;
  std::map<std::vector<int64_t>, std::string> details_;  // details()' line per decided key
};

/// The process-wide tuner.
GemmTuner& gemm_tuner();

}  // namespace megaton::ops
