#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/parser.h"
#include "core/error.h"
#include "train/layout_estimate.h"
#include "train/train_config.h"

using megaton::UsageError;
using megaton::train::TrainConfig;

namespace {

bool parse(std::vector<std::string> args, TrainConfig& c, int world = 1) {
  args.insert(args.begin(), "train");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  std::ostringstream help;
  return megaton::cli::parse_train_command(static_cast<int>(argv.size()), argv.data(), world, c, help);
}

std::vector<std::string> base() {
  return {"--num-layers", "4",  "--hidden-size",      "64", "--num-attention-heads", "4",
          "--seq-length", "32", "--micro-batch-size", "2",  "--train-iters",         "10"};
}

std::string error_of(std::vector<std::string> extra, int world = 1) {
  auto a = base();
  a.insert(a.end(), extra.begin(), extra.end());
  TrainConfig c;
  try {
    parse(a, c, world);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Arguments, DefaultsAndDerivedValues) {
  TrainConfig c;
  auto a = base();
  a.insert(a.end(), {"--tensor-model-parallel-size", "2", "--global-batch-size", "16"});
  ASSERT_TRUE(parse(a, c, 8));
  EXPECT_EQ(c.model.ffn_hidden_size, 256);
  EXPECT_EQ(c.model.kv_channels, 16);
  EXPECT_EQ(c.model.max_position_embeddings, 32);
  EXPECT_EQ(c.parallel.data_parallel_size, 4);
  EXPECT_EQ(c.loop.num_micro_batches, 2);
  EXPECT_DOUBLE_EQ(c.optimizer.adam_beta2, 0.999);
  EXPECT_EQ(c.loop.seed, 1234);
}

TEST(Arguments, MegatronValidationRules) {
  EXPECT_NE(error_of({"--global-batch-size", "6"}, 4).find("--global-batch-size (6) must be divisible by"),
            std::string::npos);
  EXPECT_NE(error_of({"--tensor-model-parallel-size", "3"}, 3).find("--num-attention-heads (4)"), std::string::npos);
  EXPECT_NE(error_of({"--fp16", "--bf16"}).find("exclusive"), std::string::npos);
  EXPECT_NE(error_of({"--train-samples", "100"}).find("exclusive"), std::string::npos);
  EXPECT_NE(error_of({"--rampup-batch-size", "2", "2", "100"}).find("--train-samples"), std::string::npos);
  EXPECT_NE(error_of({"--position-embedding-type", "sinus"}).find("absolute|rotary|alibi"), std::string::npos);
  EXPECT_NE(error_of({"--save", "/tmp/x"}).find("--save-interval"), std::string::npos);
  EXPECT_NE(error_of({"--pipeline-model-parallel-size", "8"}, 8).find("--num-layers (4)"), std::string::npos);
}

TEST(Arguments, UnknownFlagSuggestsTheClosest) {
  const std::string e = error_of({"--num-layer", "3"});
  EXPECT_NE(e.find("unrecognised option '--num-layer'"), std::string::npos) << e;
  EXPECT_NE(error_of({"--hiden-size", "3"}).find("did you mean --hidden-size?"), std::string::npos);
}

TEST(Arguments, HelpReturnsFalse) {
  TrainConfig c;
  EXPECT_FALSE(parse({"--help"}, c));
}

TEST(Arguments, PaddedVocab) {
  megaton::model::GptOptions m;
  EXPECT_EQ(m.padded_vocab_size(50257, 1), 50304);
  EXPECT_EQ(m.padded_vocab_size(50257, 2), 50432);
  m.pad_vocab_size_to = 50300;
  EXPECT_THROW(m.padded_vocab_size(50257, 8), UsageError);
}

TEST(LayoutEstimate, GPT2SmallParameterCountAndFlops) {
  megaton::model::GptOptions m;
  m.num_layers = 12;
  m.hidden_size = 768;
  m.num_attention_heads = 12;
  m.seq_length = 1024;
  m.validate();
  const auto c = megaton::train::count_parameters(m, 50257);
  EXPECT_EQ(c.total, 124439808);  // GPT-2 124M as Hugging Face counts it (tied embedding, 1024 positions)
  const double f = megaton::train::model_flops_per_iteration(m, 50257, 1);
  const double s = 1024, l = 12, h = 768;
  EXPECT_DOUBLE_EQ(f, 72 * s * l * h * h * (1 + s / (6 * h) + 50257 / (12 * l * h)));
  EXPECT_EQ(megaton::train::layers_per_stage(10, 4), (std::vector<int>{3, 3, 2, 2}));
}

TEST(Arguments, PythonDigitSeparatorsInNumbers) {
  using megaton::cli::strip_digit_separators;
  EXPECT_EQ(strip_digit_separators("220_000_000"), "220000000");
  EXPECT_EQ(strip_digit_separators("-1_000"), "-1000");
  EXPECT_EQ(strip_digit_separators("6_0.5e-3"), "60.5e-3");
  EXPECT_EQ(strip_digit_separators("my_data_text_document"), "my_data_text_document");
  EXPECT_EQ(strip_digit_separators("1__0"), "1__0");  // not a Python literal: left for the parser to refuse
  EXPECT_EQ(strip_digit_separators("_10"), "_10");
  TrainConfig c;
  auto a = base();
  a.insert(a.end(), {"--global-batch-size", "1_024", "--seed", "4_2"});
  ASSERT_TRUE(parse(a, c, 1));
  EXPECT_EQ(c.loop.global_batch_size, 1024);
  EXPECT_EQ(c.loop.seed, 42);
}

TEST(Arguments, BigScienceTemplateFlagsAccepted) {
  TrainConfig c;
  auto a = base();
  a.insert(a.end(),
           {"--tensorboard-queue-size", "5", "--log-batch-size-to-tensorboard", "--sync-tp-duplicated-parameters",
            "--abort-on-unmet-fused-kernel-constraints", "--valid-num-workers", "0"});
  ASSERT_TRUE(parse(a, c, 1));
  EXPECT_EQ(c.logging.tensorboard_queue_size, 5);
  EXPECT_TRUE(c.logging.log_batch_size_to_tensorboard);
  EXPECT_TRUE(c.parallel.sync_tp_duplicated_parameters);
  EXPECT_NE(error_of({"--tensorboard-queue-size", "0"}).find("--tensorboard-queue-size must be > 0"),
            std::string::npos);
}

// Megatron's fusion and precision switches: each maps onto megaton's own (or is what megaton always does).
TEST(Arguments, MegatronFusionFlagsMapOntoMegatons) {
  TrainConfig c;
  auto a = base();
  a.insert(a.end(), {"--no-masked-softmax-fusion", "--no-bias-dropout-fusion", "--accumulate-allreduce-grads-in-fp32",
                     "--dataloader-type", "single"});
  ASSERT_TRUE(parse(a, c, 1));
  EXPECT_FALSE(c.kernels.masked_softmax_fusion);
  EXPECT_FALSE(c.kernels.dropout_layernorm_fusion);  // --no-bias-dropout-fusion is the same fusion
  TrainConfig plain;
  ASSERT_TRUE(parse(base(), plain, 1));
  EXPECT_TRUE(plain.kernels.masked_softmax_fusion);
  EXPECT_TRUE(plain.kernels.dropout_layernorm_fusion);
  EXPECT_EQ(plain.data.dataloader_type, "single");
  EXPECT_NE(error_of({"--no-bias-dropout-fusion", "--dropout-layernorm-fusion"}).find("contradict"), std::string::npos);
  const std::string cyclic = error_of({"--dataloader-type", "cyclic"});
  EXPECT_NE(cyclic.find("--dataloader-type: expected single, got 'cyclic'"), std::string::npos) << cyclic;
  auto f = base();
  f.insert(f.end(), {"--fp16", "--fp16-lm-cross-entropy"});
  ASSERT_TRUE(parse(f, c, 1));
  EXPECT_TRUE(c.precision.fp16);
  EXPECT_NE(error_of({"--bf16", "--fp16-lm-cross-entropy"}).find("--fp16-lm-cross-entropy needs --fp16"),
            std::string::npos);
}

TEST(Arguments, Fp32ResidualConnectionNeedsAHalfPrecisionModel) {
  TrainConfig c;
  auto a = base();
  a.insert(a.end(), {"--bf16", "--fp32-residual-connection"});
  ASSERT_TRUE(parse(a, c, 1));
  EXPECT_TRUE(c.model.fp32_residual_connection);
  EXPECT_NE(error_of({"--fp32-residual-connection"}).find("--fp32-residual-connection needs --fp16 or --bf16"),
            std::string::npos);
}

// Megatron's logging switches: the norms in the log line, TensorBoard scalars left out (with Megatron's spelling).
TEST(Arguments, MegatronLoggingSwitches) {
  TrainConfig plain;
  ASSERT_TRUE(parse(base(), plain, 1));
  EXPECT_FALSE(plain.logging.log_params_norm || plain.optimizer.log_num_zeros_in_grad);
  EXPECT_TRUE(plain.logging.log_learning_rate_to_tensorboard && plain.logging.log_loss_scale_to_tensorboard);
  TrainConfig c;
  auto a = base();
  a.insert(a.end(), {"--log-params-norm", "--log-num-zeros-in-grad", "--no-log-learnig-rate-to-tensorboard",
                     "--no-log-loss-scale-to-tensorboard"});
  ASSERT_TRUE(parse(a, c, 1));
  EXPECT_TRUE(c.logging.log_params_norm && c.optimizer.log_num_zeros_in_grad);
  EXPECT_FALSE(c.logging.log_learning_rate_to_tensorboard || c.logging.log_loss_scale_to_tensorboard);
}

// The variable-length attention is the default; --no-varlen-attention returns to the mask, and both is an error.
TEST(Arguments, VarlenAttentionIsTheDefault) {
  TrainConfig plain, off;
  ASSERT_TRUE(parse(base(), plain, 1));
  EXPECT_TRUE(plain.kernels.varlen_attention);
  auto a = base();
  a.push_back("--no-varlen-attention");
  ASSERT_TRUE(parse(a, off, 1));
  EXPECT_FALSE(off.kernels.varlen_attention);
  EXPECT_NE(error_of({"--varlen-attention", "--no-varlen-attention"}).find("contradict each other"), std::string::npos);
}

// ALiBi folded into the heads is the default; --no-alibi-fold returns to the 16-bit mask.
TEST(Arguments, AlibiFoldIsTheDefault) {
  TrainConfig plain, off;
  ASSERT_TRUE(parse(base(), plain, 1));
  EXPECT_TRUE(plain.kernels.alibi_fold);
  auto a = base();
  a.push_back("--no-alibi-fold");
  ASSERT_TRUE(parse(a, off, 1));
  EXPECT_FALSE(off.kernels.alibi_fold);
}

// --train-tokens: a token budget beside --train-iters/--train-samples (the stop itself: test_train_stops.sh).
TEST(Arguments, TrainTokensIsATokenBudget) {
  TrainConfig c;
  auto a = base();
  a.insert(a.end(), {"--train-tokens", "300_000_000_000"});
  ASSERT_TRUE(parse(a, c, 1));
  EXPECT_EQ(c.loop.train_tokens, 300000000000LL);
  TrainConfig plain;
  ASSERT_TRUE(parse(base(), plain, 1));
  EXPECT_EQ(plain.loop.train_tokens, 0);
  EXPECT_NE(error_of({"--train-tokens", "-5"}).find("--train-tokens must be > 0, got -5"), std::string::npos);
}

TEST(Arguments, WeightedSplitPathsModeRules) {
  const std::string group = "train: 1 0:0.9 /d/a, 2 0:1 /d/b";
  TrainConfig c;
  auto a = base();
  a.insert(a.end(), {"--train-weighted-split-paths", group, "--valid-weighted-split-paths", "v1: 1 0.9:1 /d/a",
                     "v2: 1 0.9:1 /d/b"});
  ASSERT_TRUE(parse(a, c, 1));
  EXPECT_EQ(c.data.train_weighted_split_paths, std::vector<std::string>{group});
  EXPECT_EQ(c.data.valid_weighted_split_paths.size(), 2u);
  EXPECT_NE(error_of({"--train-weighted-split-paths", group, "--data-path", "/d/a"}).find("exclusive"),
            std::string::npos);
  EXPECT_NE(error_of({"--valid-weighted-split-paths", "v: 1 0:1 /d/a"}).find("need --train-weighted-split-paths"),
            std::string::npos);
  EXPECT_NE(error_of({"--train-weighted-split-paths", "a: 1 0:1 /d/a", "b: 1 0:1 /d/b"}).find("exactly one group"),
            std::string::npos);
  EXPECT_NE(error_of({"--train-weighted-split-paths", group, "--valid-weighted-split-paths", "v: 1 0:1 /d/a",
                      "--valid-weighted-split-paths-path", "/d/valid.txt"})
                .find("--valid-weighted-split-paths and --valid-weighted-split-paths-path are exclusive"),
            std::string::npos);
}

TEST(ArgparseSemantics, LastOccurrenceWinsAndEqualsForm) {
  TrainConfig c;
  auto a = base();
  // 33 of BigScience's scripts pass --clip-grad twice; argparse keeps the last.
  a.insert(a.end(), {"--clip-grad", "1.0", "--lr=6e-4", "--clip-grad", "0.5", "--lr", "1e-4"});
  ASSERT_TRUE(parse(a, c));
  EXPECT_DOUBLE_EQ(c.optimizer.clip_grad, 0.5);
  EXPECT_DOUBLE_EQ(c.lr.lr, 1e-4);
}

TEST(ArgparseSemantics, RepeatedListFlagReplacesTheEarlierList) {
  TrainConfig c;
  auto a = base();
  a.insert(a.end(), {"--data-path", "1", "a", "1", "b", "--lr", "1e-3", "--data-path", "c"});
  ASSERT_TRUE(parse(a, c));
  EXPECT_EQ(c.data.data_path, std::vector<std::string>{"c"});
}

TEST(ArgparseSemantics, NegativeNumbersAreValues) {
  TrainConfig c;
  auto a = base();
  a.insert(a.end(), {"--adam-eps", "-1e-8"});
  ASSERT_TRUE(parse(a, c));
  EXPECT_DOUBLE_EQ(c.optimizer.adam_eps, -1e-8);
}

TEST(ArgparseSemantics, PythonBoolFlagsTakeAValue) {
  TrainConfig c;
  auto a = base();
  a.insert(a.end(), {"--eval-only", "True"});
  ASSERT_TRUE(parse(a, c));
  EXPECT_TRUE(c.loop.eval_only);
  TrainConfig d;
  auto b = base();
  b.insert(b.end(), {"--eval-only=", "--lr", "1e-3"});  // bool('') is False
  ASSERT_TRUE(parse(b, d));
  EXPECT_FALSE(d.loop.eval_only);
}

TEST(ArgparseSemantics, NormalizeWarnsWhenAPythonBoolSpellsFalse) {
  boost::program_options::options_description d;
  bool eval_only = false;
  double lr = 0;
  d.add_options()("eval-only", boost::program_options::bool_switch(&eval_only), "")(
      "lr", boost::program_options::value(&lr), "");
  std::ostringstream warn;
  const auto out = megaton::cli::argparse_normalize({"--eval-only", "False", "--lr", "1_000"}, d, warn);
  EXPECT_EQ(out, (std::vector<std::string>{"--eval-only", "--lr=1000"}));
  EXPECT_NE(warn.str().find("--eval-only False is true"), std::string::npos) << warn.str();
}

TEST(ArgparseSemantics, PrefixesAreNotExpandedAsInMegatronDeepSpeed) {
  // Megatron-DeepSpeed's parser sets allow_abbrev=False: a prefix is unknown, with a suggestion.
  const std::string e = error_of({"--clip", "1.0"});
  EXPECT_NE(e.find("unrecognised option '--clip'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean --clip-grad?"), std::string::npos) << e;
}

TEST(CompatibilityFlags, DeepSpeedRunsPartitionByTransformerLayersByDefault) {
  // The fork's GPTModelPipe partitions 'type:transformer' unless told otherwise; its Megatron path, uniformly.
  TrainConfig plain, ds, given;
  ASSERT_TRUE(parse(base(), plain));
  EXPECT_EQ(plain.parallel.pp_partition_method, "uniform");
  const std::string json =
      (std::filesystem::temp_directory_path() / ("megaton_pp_default_" + std::to_string(::getpid()) + ".json"))
          .string();
  std::ofstream(json) << R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 0}})";
  auto a = base();
  a.insert(a.end(), {"--deepspeed", "--deepspeed_config", json});
  ASSERT_TRUE(parse(a, ds));
  EXPECT_EQ(ds.parallel.pp_partition_method, "type:transformer");
  a.insert(a.end(), {"--pp-partition-method", "type:transformer|embedding"});
  ASSERT_TRUE(parse(a, given));
  EXPECT_EQ(given.parallel.pp_partition_method, "type:transformer|embedding");
  std::filesystem::remove(json);
}

TEST(Arguments, NonFiniteOrNegativeRatesAndCountsAreRefusedByName) {
  EXPECT_NE(error_of({"--lr", "inf"}).find("--lr must be a finite number >= 0, got inf"), std::string::npos);
  EXPECT_NE(error_of({"--lr", "nan"}).find("--lr must be a finite number >= 0, got nan"), std::string::npos);
  EXPECT_NE(error_of({"--lr", "-0.5"}).find("--lr must be a finite number >= 0, got -0.5"), std::string::npos);
  EXPECT_NE(error_of({"--lr", "-1"}).find("--lr must be a finite number >= 0, got -1"), std::string::npos);
  EXPECT_NE(error_of({"--lr", "1e-3", "--min-lr", "nan"}).find("--min-lr must be a finite number"), std::string::npos);
  EXPECT_NE(error_of({"--eval-iters", "-1"}).find("--eval-iters must be >= 0"), std::string::npos);
  EXPECT_EQ(error_of({"--lr", "1e-3", "--eval-iters", "0"}), "");
}
