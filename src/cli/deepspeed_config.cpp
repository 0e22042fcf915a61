#include "cli/deepspeed_config.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace megaton::cli {

using nlohmann::json;

namespace {

// Keys that only shape DeepSpeed's own logging, communication or memory tactics: nothing megaton computes changes.
const std::set<std::string> kIgnoredKeys = {"steps_per_print",
                                            "wall_clock_breakdown",
                                            "zero_allow_untested_optimizer",
                                            "prescale_gradients",
                                            "gradient_predivide_factor",
                                            "dump_state",
                                            "memory_breakdown",
                                            "sparse_gradients",
                                            "flops_profiler",
                                            "tensorboard",
                                            "wandb",
                                            "csv_monitor",
                                            "comms_logger",
                                            "activation_checkpointing",
                                            "communication_data_type",
                                            "data_types"};

// Sections that would change training in ways megaton does not do: a usage error, never silently different numbers.
const std::set<std::string> kRefusedKeys = {"optimizer",        "scheduler", "amp",        "compression_training",
                                            "sparse_attention", "pipeline",  "elasticity", "autotuning"};

class Reader {
 public:
  Reader(std::string path, const json& root) : path_(std::move(path)), root_(root) {}

  /// `root_[section][key]` (section empty: the top level), absent when missing, null or "auto".
  const json* find(const std::string& section, const std::string& key) const {
    const json* obj = &root_;
    if (!section.empty()) {
      auto s = root_.find(section);
      if (s == root_.end() || s->is_null()) return nullptr;
      MEGATON_CHECK(s->is_object(), UsageError, where(section, ""), ": expected an object, got ", s->dump());
      obj = &*s;
    }
    auto it = obj->find(key);
    if (it == obj->end() || it->is_null() || (it->is_string() && it->get<std::string>() == "auto")) return nullptr;
    return &*it;
  }

  double number(const std::string& section, const std::string& key, double fallback) const {
    const json* v = find(section, key);
    if (v == nullptr) return fallback;
    MEGATON_CHECK(v->is_number(), UsageError, where(section, key), ": expected a number, got ", v->dump());
    return v->get<double>();
  }

  int64_t integer(const std::string& section, const std::string& key, int64_t fallback) const {
    const double d = number(section, key, double(fallback));
    MEGATON_CHECK(std::floor(d) == d, UsageError, where(section, key), ": expected an integer, got ", d);
    return static_cast<int64_t>(d);
  }

  bool flag(const std::string& section, const std::string& key) const {
    const json* v = find(section, key);
    if (v == nullptr) return false;
    MEGATON_CHECK(v->is_boolean(), UsageError, where(section, key), ": expected true or false, got ", v->dump());
    return v->get<bool>();
  }

  std::string where(const std::string& section, const std::string& key) const {
    std::string k = section.empty() ? key : key.empty() ? section : section + "." + key;
    return "--deepspeed_config " + path_ + ": '" + k + "'";
  }

 private:
  std::string path_;
  const json& root_;
};

json read_json(const std::string& path) {
  std::ifstream in(path);
  MEGATON_CHECK(in.good(), UsageError, "--deepspeed_config ", path, ": cannot open the file");
  try {
    json j = json::parse(in, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
    MEGATON_CHECK(j.is_object(), UsageError, "--deepspeed_config ", path, ": expected a JSON object at the top");
    return j;
  } catch (const json::exception& e) {
    throw UsageError(str("--deepspeed_config ", path, ": not valid JSON (", e.what(), ")"));
  }
}

// A batch size the JSON states (if it does): fills the flag when it was not given, else must equal it.
void agree(int& flag, const char* flag_name, const Reader& r, const char* key, std::vector<std::string>& notes) {
  if (r.find("", key) == nullptr) return;
  const int64_t value = r.integer("", key, 0);
  MEGATON_CHECK(value > 0, UsageError, r.where("", key), ": expected > 0, got ", value);
  if (flag == 0) {
    flag = static_cast<int>(value);
    notes.push_back(str(key, " ", value, " -> ", flag_name, " ", value));
    return;
  }
  MEGATON_CHECK(flag == value, UsageError, r.where("", key), " is ", value, " but ", flag_name, " is ", flag,
                " (DeepSpeed asserts they agree)");
}

// DeepSpeed's curriculum_learning section (sequence-length curriculum: train/curriculum.h).
void read_curriculum(const Reader& r, const json& section, train::CurriculumOptions& o) {
  const char* s = "curriculum_learning";
  const std::string type = section.value("curriculum_type", std::string());
  MEGATON_CHECK(type == "seqlen", UsageError, r.where(s, "curriculum_type"), ": '", type,
                "'; megaton implements the sequence-length curriculum (seqlen)");
  for (const char* key : {"min_difficulty", "max_difficulty", "schedule_type", "schedule_config"})
    MEGATON_CHECK(section.contains(key), UsageError, r.where(s, key), ": missing (curriculum learning needs it)");
  o.enabled = true;
  o.min_difficulty = r.integer(s, "min_difficulty", 0);
  o.max_difficulty = r.integer(s, "max_difficulty", 0);
  o.schedule_type = section.at("schedule_type").is_string() ? section.at("schedule_type").get<std::string>() : "";
  const json& sc = section.at("schedule_config");
  MEGATON_CHECK(sc.is_object(), UsageError, r.where(s, "schedule_config"), ": expected an object");
  auto integer = [&](const char* key) {
    MEGATON_CHECK(sc.contains(key) && sc[key].is_number_integer(), UsageError, r.where(s, "schedule_config"), ".", key,
                  ": expected an integer for schedule_type ", o.schedule_type);
    return sc[key].get<int64_t>();
  };
  auto list = [&](const char* key) {
    MEGATON_CHECK(sc.contains(key) && sc[key].is_array(), UsageError, r.where(s, "schedule_config"), ".", key,
                  ": expected a list of integers");
    std::vector<int64_t> v;
    for (const auto& x : sc[key]) {
      MEGATON_CHECK(x.is_number_integer(), UsageError, r.where(s, "schedule_config"), ".", key, ": ", x.dump(),
                    " is not an integer");
      v.push_back(x.get<int64_t>());
    }
    return v;
  };
  if (o.schedule_type == "fixed_discrete") {
    o.difficulty = list("difficulty");
    o.max_step = list("max_step");
  } else if (o.schedule_type == "fixed_linear" || o.schedule_type == "fixed_root") {
    o.total_curriculum_step = integer("total_curriculum_step");
    o.difficulty_step = integer("difficulty_step");
    if (o.schedule_type == "fixed_root") {
      MEGATON_CHECK(sc.contains("root_degree") && sc["root_degree"].is_number(), UsageError,
                    r.where(s, "schedule_config"), ".root_degree: expected a number for fixed_root");
      o.root_degree = sc["root_degree"].get<double>();
    }
  }
}

}  // namespace

namespace {
std::vector<std::string> apply_checked(const std::string& path, train::TrainConfig& c);
}  // namespace

std::vector<std::string> apply_deepspeed_config(const std::string& path, train::TrainConfig& c) {
  try {
    return apply_checked(path, c);
  } catch (const json::exception& e) {  // a value of the wrong type anywhere: a usage error naming it
    throw UsageError(str("--deepspeed_config ", path, ": malformed (", e.what(), ")"));
  }
}

namespace {
std::vector<std::string> apply_checked(const std::string& path, train::TrainConfig& c) {
  train::LoopOptions& t = c.loop;
  optim::PrecisionOptions& p = c.precision;
  parallel::ParallelOptions& par = c.parallel;
  double& clip_grad = c.optimizer.clip_grad;
  const json root = read_json(path);
  const Reader r(path, root);
  std::vector<std::string> notes;

  for (const auto& [key, value] : root.items()) {
    MEGATON_CHECK(!kRefusedKeys.count(key) || value.is_null(), UsageError, r.where(key, ""),
                  ": not supported; megaton builds this from the Megatron flags (remove the section)");
  }
  if (r.flag("curriculum_learning", "enabled")) {
    read_curriculum(r, root.at("curriculum_learning"), c.curriculum);
    try {
      c.curriculum.validate(c.model.seq_length);
    } catch (const UsageError& e) {
      throw UsageError(str(path, ": ", e.what()));
    }
    notes.push_back(str("curriculum_learning -> sequence length ", c.curriculum.min_difficulty, "..",
                        c.curriculum.max_difficulty, " by ", c.curriculum.schedule_type));
  }
  if (const auto zero = root.find("zero_optimization"); zero != root.end() && zero->is_object()) {
    for (const auto& [key, value] : zero->items())
      MEGATON_CHECK(key == "stage" || value.is_null(), UsageError, r.where("zero_optimization", key),
                    ": not supported; megaton's ZeRO stage 1 has no such setting (remove the key)");
  }

  // Precision: the JSON's, which must not contradict the flags.
  const bool fp16 = r.flag("fp16", "enabled"), bf16 = r.flag("bf16", "enabled");
  MEGATON_CHECK(!(fp16 && bf16), UsageError, r.where("", "fp16"), " and 'bf16' are both enabled");
  MEGATON_CHECK(!(fp16 && p.bf16) && !(bf16 && p.fp16), UsageError, r.where(fp16 ? "fp16" : "bf16", "enabled"),
                " contradicts ", p.bf16 ? "--bf16" : "--fp16");
  if (fp16 && !p.fp16) notes.push_back("fp16.enabled -> --fp16");
  if (bf16 && !p.bf16) notes.push_back("bf16.enabled -> --bf16");
  p.fp16 = p.fp16 || fp16;
  p.bf16 = p.bf16 || bf16;
  if (fp16) {  // DeepSpeed's loss scaler settings, with its defaults; the Megatron scaler flags do not apply
    p.loss_scale = r.number("fp16", "loss_scale", 0.0);
    const int64_t power = r.integer("fp16", "initial_scale_power", 16);
    MEGATON_CHECK(power >= 0 && power < 128, UsageError, r.where("fp16", "initial_scale_power"),
                  ": expected 0..127, got ", power);
    p.initial_loss_scale = std::ldexp(1.0, static_cast<int>(power));
    p.loss_scale_window = static_cast<int>(r.integer("fp16", "loss_scale_window", 1000));
    p.hysteresis = static_cast<int>(r.integer("fp16", "hysteresis", 2));
    p.min_loss_scale = r.number("fp16", "min_loss_scale", 1.0);
    MEGATON_CHECK(!r.flag("fp16", "consecutive_hysteresis"), UsageError, r.where("fp16", "consecutive_hysteresis"),
                  ": not supported; the hysteresis budget refills when the scale grows, as with DeepSpeed's default");
    notes.push_back(str("fp16 loss scaler -> ", p.loss_scale > 0 ? str("--loss-scale ", p.loss_scale) : "dynamic",
                        ", --initial-loss-scale ", p.initial_loss_scale, " (2^", power, "), --loss-scale-window ",
                        p.loss_scale_window, ", --hysteresis ", p.hysteresis, ", --min-loss-scale ", p.min_loss_scale,
                        " (the Megatron scaler flags are ignored, as under DeepSpeed)"));
  }

  // ZeRO: DeepSpeed's bf16 optimizer keeps its fp32 masters and Adam state sharded over DP even at stage 0.
  const int64_t stage = r.integer("zero_optimization", "stage", 0);
  MEGATON_CHECK(stage == 0 || stage == 1, UsageError, r.where("zero_optimization", "stage"), ": ", stage,
                " is not supported (megaton implements ZeRO stage 1: optimizer state sharded over data parallelism)");
  const int zero = stage == 1 || p.bf16 ? 1 : 0;
  if (zero != par.zero_stage)
    notes.push_back(str("zero_optimization.stage ", stage, p.bf16 && stage == 0 ? " with bf16" : "",
                        " -> --zero-stage ", zero, " (was ", par.zero_stage, ")"));
  par.zero_stage = zero;

  const double clip = r.number("", "gradient_clipping", 0.0);
  MEGATON_CHECK(clip >= 0, UsageError, r.where("", "gradient_clipping"), ": expected >= 0, got ", clip);
  if (clip != clip_grad) notes.push_back(str("gradient_clipping ", clip, " -> --clip-grad ", clip));
  clip_grad = clip;

  agree(t.micro_batch_size, "--micro-batch-size", r, "train_micro_batch_size_per_gpu", notes);
  agree(t.global_batch_size, "--global-batch-size", r, "train_batch_size", notes);
  if (r.find("", "gradient_accumulation_steps") != nullptr) {
    const int64_t gas = r.integer("", "gradient_accumulation_steps", 1);
    const int64_t dp = par.data_parallel_size;
    if (t.global_batch_size == 0 && t.micro_batch_size > 0 && dp > 0) {
      t.global_batch_size = static_cast<int>(gas * t.micro_batch_size * dp);
      notes.push_back(str("gradient_accumulation_steps ", gas, " -> --global-batch-size ", t.global_batch_size));
    } else if (t.global_batch_size > 0 && t.micro_batch_size > 0 && dp > 0 && t.rampup_batch_size.empty()) {
      MEGATON_CHECK(gas * t.micro_batch_size * dp == t.global_batch_size, UsageError,
                    r.where("", "gradient_accumulation_steps"), " is ", gas, " but --global-batch-size ",
                    t.global_batch_size, " / (--micro-batch-size ", t.micro_batch_size, " x data-parallel size ", dp,
                    ") is ", double(t.global_batch_size) / double(t.micro_batch_size * dp));
    }
  }

  std::vector<std::string> ignored;
  for (const auto& [key, value] : root.items()) {
    static const std::set<std::string> kTaken = {"fp16",
                                                 "bf16",
                                                 "zero_optimization",
                                                 "gradient_clipping",
                                                 "train_micro_batch_size_per_gpu",
                                                 "train_batch_size",
                                                 "gradient_accumulation_steps",
                                                 "curriculum_learning"};
    if (!kTaken.count(key)) ignored.push_back(key + (kIgnoredKeys.count(key) ? "" : " (unknown to megaton)"));
  }
  if (!ignored.empty()) {
    std::string line = "ignored: ";
    for (size_t i = 0; i < ignored.size(); ++i) line += (i ? ", " : "") + ignored[i];
    notes.push_back(line);
  }
  return notes;
}
}  // namespace

}  // namespace megaton::cli
