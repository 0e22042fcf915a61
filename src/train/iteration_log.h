// What a training run reports, on three sinks: Megatron-DeepSpeed's iteration and validation lines on stdout (the
// logging rank: last pipeline stage, TP and DP rank 0), TensorBoard scalars under the fork's tags (--tensorboard-dir;
// the per-iteration series every --tensorboard-log-interval iterations, the timing series at log lines) and a
// JSON-lines metrics file (--metrics-file). An iteration's values are captured at its end without waiting for the
// device and written one iteration later, once the next iteration's work is queued, so the device never runs dry at a
// log line.
//
//   log.add_iteration(outcome, progress);       // every iteration: its loss, on the device, and whether it stepped
//   log.capture(outcome, progress, n);          // at a log point: start the device-to-host copy, mark the device
//   log.flush();                                // after the next iteration is queued: wait for the mark, write
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/device_clock.h"
#include "core/log.h"
#include "core/timer.h"
#include "dist/process_groups.h"
#include "model/gpt_config.h"
#include "optim/optimizer.h"
#include "train/logging_options.h"
#include "train/metrics_log.h"
#include "train/progress.h"
#include "train/tensorboard_writer.h"
#include "train/train_step.h"

namespace megaton::train {

class IterationLog {
 public:
  struct Context {
    const model::GptConfig& model;
    const dist::ProcessGroups& groups;
    optim::MixedPrecisionOptimizer& optimizer;
    Timers& timers;
    std::ostream& out;
    const Logger& log;
    // The fork's "gigaflos (without embeddings)" per consumed token: 6 x the logging rank's parameters other than the
    // word and position embeddings x TP x PP / 1e9 (megatron/utils.py's get_parameters_in_billions).
    double gigaflos_per_token = 0;
    bool curriculum = false;  // sequence-length curriculum: the line and TensorBoard show the iteration's length
  };
  /// Opens the TensorBoard and metrics sinks on the logging rank. `train_iters`: the run's length, for the line.
  IterationLog(Context context, const LoggingOptions& options, int64_t train_iters);
  ~IterationLog();

  /// The last pipeline stage's TP and DP rank 0: the rank that writes lines and files.
  bool logging_rank() const;

  /// Starts the first interval (before the loop's first iteration).
  void start();
  /// Records an iteration's loss (on the device) and whether its step was taken; counts skipped steps. `progress`:
  /// after the iteration (its TensorBoard point, every --tensorboard-log-interval iterations).
  void add_iteration(const StepOutcome& s, const TrainingProgress& progress);
  /// At a log point: takes the interval's values (`iterations` since the last line), starts their copy to the host
  /// and marks the device's position; nothing waits for the device.
  void capture(const StepOutcome& s, const TrainingProgress& progress, int64_t iterations);
  /// Writes the captured line, if any: waits for the device to pass its mark and reads its values.
  void flush();

  /// The validation line ("validation[-NAME] loss at iteration ...") and its scalars, on the logging rank.
  void validation(const std::string& name, double loss, const TrainingProgress& progress);

 private:
  struct Pending;  // a line's values, captured at its iteration's end
  struct Point {   // one iteration's TensorBoard values; the loss and grad norm are read with the next line's
    int64_t iteration = 0, samples = 0, tokens = 0, global_batch = 0, seq_length = 0;
    double lr = 0;
    std::optional<double> loss_scale;
    int loss_index = -1;  // into the captured losses
    DeviceScalar grad_norm;
  };
  void write_points(const Pending& p, const double* values);
  /// A loss series as the fork writes it: vs iterations, samples, tokens and gigaflos (without embeddings).
  void loss_series(const std::string& tag, double value, int64_t iteration, int64_t samples, int64_t tokens);
  struct Values {  // the device values of a line, read back
    std::optional<double> avg_loss, grad_norm, params_norm;
    int64_t nan_iterations = 0;
  };
  void write(const Pending& p, double interval_s, const Values& values,
             const std::map<std::string, double>& timer_seconds);

  Context c_;
  LoggingOptions options_;
  int64_t train_iters_;
  std::unique_ptr<TensorBoardWriter> tb_;
  std::unique_ptr<MetricsLog> metrics_;
  DeviceClock clock_;                                 // marks on the compute stream (host clock on the CPU)
  std::shared_ptr<const DeviceMark> interval_start_;  // where the current interval began
  std::unique_ptr<Pending> pending_;                  // captured, not yet written
  bool memory_reported_ = false;  // the device-memory line is logged once, after the first logged iteration
  int64_t skipped_in_interval_ = 0;
  // Each iteration's loss (on the device) and whether its step was taken, until the capture copies them to the host
  // at once: a read per iteration would make every iteration wait for the GPU.
  std::vector<std::pair<torch::Tensor, bool>> losses_;
  std::vector<Point> points_;  // this interval's TensorBoard points
};

}  // namespace megaton::train
