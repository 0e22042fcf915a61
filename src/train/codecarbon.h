// The energy and emissions log of --codecarbon-dir, in CodeCarbon's CSV format (the columns of its EmissionsData, one
// row appended per flush, totals since the tracker started, as its "append" mode writes them):
//   DIR/emissions-RRR.csv  one per rank (the fork's OfflineEmissionsTracker file names)
//   DIR/emissions.csv      the job's sum, written by rank 0: each GPU counted once, and each host's CPU packages and
//                          memory once, however many ranks share them
// Energy is measured, not modelled, where the hardware allows: the rank's GPU through NVML's energy counter, the CPU
// packages through RAPL (core/energy_counters.h; a zero column says it was not readable, and the log says why). RAM is
// CodeCarbon's model (3 W per 8 GB of the host's memory). Emissions = energy (kWh) x the grid's carbon intensity.
// Powers are the averages since the previous row. Rows are written at each checkpoint save and at the end of
// training, as the fork flushes its tracker.
#pragma once
#include <torch/torch.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/energy_counters.h"
#include "core/log.h"
#include "dist/communicator.h"
#include "train/codecarbon_options.h"

namespace megaton::train {

/// The columns of CodeCarbon's emissions CSV, in order.
extern const char* const kCodecarbonColumns;

class CodecarbonTracker {
 public:
  /// Collective over `world` (its ranks learn which of them share a host or a GPU). Starts the clock and a thread
  /// that reads the counters every measure_power_secs.
  CodecarbonTracker(const CodecarbonOptions& options, dist::Communicator& world, const torch::Device& device,
                    const Logger& log);
  ~CodecarbonTracker();
  CodecarbonTracker(const CodecarbonTracker&) = delete;
  CodecarbonTracker& operator=(const CodecarbonTracker&) = delete;

  /// Collective: appends this rank's row, and on rank 0 the job's row, for training `iteration` (a second call at
  /// the same iteration, the end of training right after a periodic save, writes nothing). A file that cannot be
  /// written is a warning.
  void flush(int64_t iteration);

 private:
  struct Totals {
    double seconds = 0, cpu_j = 0, gpu_j = 0, ram_j = 0;
  };
  Totals read();
  void sampler();

  CodecarbonOptions o_;
  dist::Communicator& world_;
  const Logger& log_;
  std::unique_ptr<RaplEnergy> rapl_;
  std::unique_ptr<NvmlEnergy> nvml_;
  bool counts_cpu_ = false, counts_gpu_ = false;  // this rank is the one whose host CPU / GPU enters the job's sum
  double ram_gb_ = 0;
  int cpu_count_ = 0;
  std::string run_id_, os_, cpu_model_;
  std::chrono::steady_clock::time_point start_;
  Totals last_row_, last_job_row_;
  int64_t last_iteration_ = -1;
  std::mutex mu_;  // guards rapl_ between the sampler and read()
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace megaton::train
