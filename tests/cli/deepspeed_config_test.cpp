// --deepspeed --deepspeed_config FILE: the reference scripts' DeepSpeed JSONs (tr1-13B's fp16 + ZeRO-1, BLOOM's bf16 +
// stage 0) set megaton's flags as DeepSpeed's engine would; contradictions and unsupported sections are usage errors
// that name the file and the key.
#include "cli/deepspeed_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "core/error.h"
#include "core/remove_tree.h"
#include "train/train_config.h"

using megaton::UsageError;
using megaton::train::TrainConfig;

namespace {

class DeepSpeedConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("megaton_ds_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  // Not std::filesystem::remove_all: the PyTorch wheel's libtorch exports a copy that segfaults on a non-empty
  // directory (src/core/remove_tree.h).
  void TearDown() override { megaton::remove_tree(dir_.string()); }

  std::string write(const std::string& text) {
    const std::string path = (dir_ / ("ds" + std::to_string(n_++) + ".json")).string();
    std::ofstream(path) << text;
    return path;
  }

  // `megaton train` on 4 ranks (TP 1, PP 1: DP 4) with the given flags after a tiny model's.
  static TrainConfig parse(std::vector<std::string> extra) {
    std::vector<std::string> args = {"train", "--num-layers", "2",  "--hidden-size", "32", "--num-attention-heads",
                                     "4",     "--seq-length", "16", "--train-iters", "5"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<const char*> argv;
    for (auto& a : args) argv.push_back(a.c_str());
    TrainConfig c;
    std::ostringstream help;
    megaton::cli::parse_train_command(static_cast<int>(argv.size()), argv.data(), 4, c, help);
    return c;
  }

  static std::string error_of(std::vector<std::string> extra) {
    try {
      parse(std::move(extra));
    } catch (const UsageError& e) {
      return e.what();
    }
    return "(no error)";
  }

 private:
  std::filesystem::path dir_;
  int n_ = 0;
};

// tr1-13B's JSON, as its slurm script writes it.
const char* kTr1 = R"({
  "train_micro_batch_size_per_gpu": 1,
  "train_batch_size": 1024,
  "gradient_clipping": 1.0,
  "zero_optimization": {"stage": 1},
  "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 500, "hysteresis": 2, "min_loss_scale": 1,
           "initial_scale_power": 12},
  "steps_per_print": 2000,
  "wall_clock_breakdown": false
})";

}  // namespace

TEST_F(DeepSpeedConfig, Tr1JsonSetsTheScalerZeroAndBatches) {
  const std::string path = write(kTr1);
  // The slurm script's own --loss-scale 12 is ignored under DeepSpeed: the JSON's dynamic scaler wins.
  const TrainConfig c = parse({"--deepspeed", "--deepspeed_config", path, "--micro-batch-size", "1", "--loss-scale",
                               "12", "--clip-grad", "0.5"});
  EXPECT_TRUE(c.precision.fp16);
  EXPECT_EQ(c.precision.loss_scale, 0.0);
  EXPECT_EQ(c.precision.initial_loss_scale, 4096.0);
  EXPECT_EQ(c.precision.loss_scale_window, 500);
  EXPECT_EQ(c.precision.hysteresis, 2);
  EXPECT_EQ(c.precision.min_loss_scale, 1.0);
  EXPECT_EQ(c.parallel.zero_stage, 1);
  EXPECT_EQ(c.optimizer.clip_grad, 1.0);
  EXPECT_EQ(c.loop.global_batch_size, 1024);  // filled from train_batch_size
  EXPECT_EQ(c.loop.num_micro_batches, 1024 / 4);
  ASSERT_FALSE(c.notes.empty());
  const std::string& last = c.notes.back();  // "--deepspeed_config FILE: ignored: ..."
  EXPECT_EQ(last.substr(last.find(": ") + 2), "ignored: steps_per_print, wall_clock_breakdown") << last;
}

TEST_F(DeepSpeedConfig, BloomBf16StageZeroIsZeroOneAndDefaultsApply) {
  const std::string path = write(R"({"zero_optimization": {"stage": 0}, "bf16": {"enabled": true},
    "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 3})");
  const TrainConfig c = parse({"--deepspeed", "--deepspeed_config", path, "--micro-batch-size", "2"});
  EXPECT_TRUE(c.precision.bf16);
  EXPECT_FALSE(c.precision.fp16);
  EXPECT_EQ(c.parallel.zero_stage, 1) << "DeepSpeed's bf16 optimizer shards its state: a ZeRO-1";
  EXPECT_EQ(c.optimizer.clip_grad, 0.0) << "no gradient_clipping: DeepSpeed does not clip";
  EXPECT_EQ(c.loop.global_batch_size, 3 * 2 * 4);  // gradient_accumulation_steps x micro x DP
  // fp16 without the scaler keys: DeepSpeed's defaults.
  const TrainConfig d = parse({"--deepspeed", "--deepspeed_config", write(R"({"fp16": {"enabled": true}})"),
                               "--micro-batch-size", "2", "--initial-loss-scale", "8"});
  EXPECT_EQ(d.precision.initial_loss_scale, 65536.0);
  EXPECT_EQ(d.precision.loss_scale_window, 1000);
  EXPECT_EQ(d.parallel.zero_stage, 0);
}

TEST_F(DeepSpeedConfig, ContradictionsAndUnsupportedSectionsAreUsageErrors) {
  const auto fails_with = [&](const std::string& json, std::vector<std::string> flags, const std::string& expected) {
    const std::string path = write(json);
    std::vector<std::string> a = {"--deepspeed", "--deepspeed_config", path, "--micro-batch-size", "1"};
    a.insert(a.end(), flags.begin(), flags.end());
    const std::string e = error_of(a);
    EXPECT_NE(e.find(expected), std::string::npos) << e;
    EXPECT_NE(e.find(path), std::string::npos) << "the message names the file: " << e;
  };
  fails_with(R"({"zero_optimization": {"stage": 2}})", {}, "'zero_optimization.stage': 2 is not supported");
  fails_with(R"({"optimizer": {"type": "Adam"}})", {}, "'optimizer': not supported");
  fails_with(R"({"fp16": {"enabled": true}})", {"--bf16"}, "'fp16.enabled' contradicts --bf16");
  fails_with(R"({"train_batch_size": 64})", {"--global-batch-size", "32"},
             "'train_batch_size' is 64 but --global-batch-size is 32");
  fails_with(R"({"train_micro_batch_size_per_gpu": 2})", {}, "is 2 but --micro-batch-size is 1");
  fails_with(R"({"gradient_accumulation_steps": 3})", {"--global-batch-size", "8"},
             "'gradient_accumulation_steps' is 3 but --global-batch-size 8");
  fails_with(R"({"curriculum_learning": {"enabled": true, "curriculum_type": "vocab"}})", {},
             "megaton implements the sequence-length curriculum (seqlen)");
  fails_with(R"({"curriculum_learning": {"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8,
    "max_difficulty": 32, "schedule_type": "fixed_linear", "schedule_config": {"total_curriculum_step": 10,
    "difficulty_step": 8}}})",
             {}, "max_difficulty (32) <= --seq-length (16)");
  fails_with(R"({"zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}})", {},
             "'zero_optimization.offload_optimizer': not supported");
  fails_with(R"({"fp16": {"enabled": "yes"}})", {}, "'fp16.enabled': expected true or false");
  fails_with("{\"fp16\": {\"enabled\": true,}", {}, "not valid JSON");
  EXPECT_NE(error_of({"--deepspeed", "--micro-batch-size", "1"}).find("--deepspeed needs --deepspeed_config"),
            std::string::npos);
  EXPECT_NE(error_of({"--deepspeed_config", write(kTr1), "--micro-batch-size", "1"}).find("only with --deepspeed"),
            std::string::npos);
  EXPECT_NE(error_of({"--deepspeed", "--deepspeed_config", "/no/such/ds.json", "--micro-batch-size", "1"})
                .find("/no/such/ds.json: cannot open"),
            std::string::npos);
}

TEST_F(DeepSpeedConfig, CurriculumLearningSectionIsRead) {
  // The fork's examples/curriculum_learning JSON, scaled to --seq-length 16.
  const TrainConfig c = parse({"--deepspeed", "--deepspeed_config", write(R"({"curriculum_learning": {"enabled": true,
    "curriculum_type": "seqlen", "min_difficulty": 8, "max_difficulty": 16, "schedule_type": "fixed_root",
    "schedule_config": {"total_curriculum_step": 100, "difficulty_step": 8, "root_degree": 2}}})"),
                               "--micro-batch-size", "1"});
  EXPECT_TRUE(c.curriculum.enabled);
  EXPECT_EQ(c.curriculum.schedule_type, "fixed_root");
  EXPECT_EQ(c.curriculum.min_difficulty, 8);
  EXPECT_EQ(c.curriculum.max_difficulty, 16);
  EXPECT_EQ(c.curriculum.total_curriculum_step, 100);
  EXPECT_EQ(c.curriculum.difficulty_step, 8);
  EXPECT_EQ(c.curriculum.root_degree, 2.0);
}

TEST_F(DeepSpeedConfig, AcceptedDeepSpeedOnlyFlagsChangeNothing) {
  const TrainConfig plain = parse({"--micro-batch-size", "1", "--checkpoint-activations"});
  const TrainConfig c = parse({"--micro-batch-size", "1", "--checkpoint-activations",
                               "--deepspeed-activation-checkpointing", "--deepspeed_mpi"});
  EXPECT_EQ(c.model.checkpoint_activations, plain.model.checkpoint_activations);
  EXPECT_EQ(c.parallel.zero_stage, plain.parallel.zero_stage);
  EXPECT_TRUE(c.notes.empty());
}
