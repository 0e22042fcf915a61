// The tfevents writer: CRC-32C test vectors, and the file decoded by an independent Python reader
// (tests/train/tensorboard_decode.py: TFRecord framing, masked CRCs, protobuf wire format by hand).
#include "train/tensorboard_writer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/remove_tree.h"
#include "support/run_command.h"
#include "train/metrics_log.h"

using namespace megaton;
namespace fs = std::filesystem;

namespace {
fs::path fresh_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("megaton_tb_" + name + "_" + std::to_string(::getpid()));
  megaton::remove_tree(d);
  return d;
}
}  // namespace

TEST(TensorBoard, Crc32cVectors) {
  const std::string digits = "123456789";
  EXPECT_EQ(train::crc32c(digits.data(), digits.size()), 0xE3069283u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(train::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720 B.4
  const uint32_t c = 0xE3069283u;
  EXPECT_EQ(train::masked_crc32c(digits.data(), digits.size()), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TensorBoard, FileNameAndFirstRecord) {
  const auto dir = fresh_dir("name");
  std::string path;
  {
    train::TensorBoardWriter w(dir.string());
    path = w.path();
  }
  const auto name = fs::path(path).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("brain.Event:2"), std::string::npos);
  megaton::remove_tree(dir);
}

TEST(TensorBoard, IndependentDecoderReadsScalars) {
  if (std::system("command -v python3 > /dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not available";
  // MEGATON_KEEP_TFEVENTS=DIR keeps the file for dev/gpu/check_tfevents.py (TensorBoard's own reader).
  const char* keep = std::getenv("MEGATON_KEEP_TFEVENTS");
  const auto dir = keep ? fs::path(keep) : fresh_dir("decode");
  std::string path;
  {
    train::TensorBoardWriter w(dir.string(), /*flush_every=*/4);
    for (int64_t it = 1; it <= 5; ++it) w.add_scalar("lm loss", 10.0 / it, it);
    w.add_scalar_vs_progress("learning-rate", 0.5, 7, 700, 1433600);
    w.add_scalar("negative step", -2.5, -3);
    path = w.path();
  }
  const std::string script = std::string(MEGATON_SOURCE_DIR) + "/tests/train/tensorboard_decode.py";
  const std::string out = megaton::testing_support::run_command("python3 '" + script + "' '" + path + "'");
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(out)) << out;
  EXPECT_EQ(j.at("file_version"), "brain.Event:2");
  EXPECT_EQ(j.at("records").get<int>(), 1 + 5 + 3 + 1);
  const auto& s = j.at("scalars");
  ASSERT_EQ(s.size(), 9u);
  for (int k = 0; k < 5; ++k) {
    EXPECT_EQ(s[k].at("tag"), "lm loss");
    EXPECT_EQ(s[k].at("step").get<int64_t>(), k + 1);
    EXPECT_FLOAT_EQ(s[k].at("value").get<float>(), static_cast<float>(10.0 / (k + 1)));
  }
  EXPECT_EQ(s[5].at("tag"), "learning-rate");
  EXPECT_EQ(s[6].at("tag"), "learning-rate vs samples");
  EXPECT_EQ(s[6].at("step").get<int64_t>(), 700);
  EXPECT_EQ(s[7].at("tag"), "learning-rate vs tokens");
  EXPECT_EQ(s[7].at("step").get<int64_t>(), 1433600);
  EXPECT_EQ(s[8].at("step").get<int64_t>(), -3);
  EXPECT_GT(s[0].at("wall_time").get<double>(), 1.6e9);
  if (!keep) megaton::remove_tree(dir);
}

TEST(TensorBoard, DecoderRejectsACorruptedRecord) {
  if (std::system("command -v python3 > /dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not available";
  const auto dir = fresh_dir("corrupt");
  std::string path;
  {
    train::TensorBoardWriter w(dir.string());
    w.add_scalar("x", 1.0, 1);
    path = w.path();
  }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-6, std::ios::end);  // a byte of the last record's payload
    f.put('\x7f');
  }
  const std::string script = std::string(MEGATON_SOURCE_DIR) + "/tests/train/tensorboard_decode.py";
  EXPECT_EQ(megaton::testing_support::run_command("python3 '" + script + "' '" + path + "'").rfind("EXIT", 0), 0u);
  megaton::remove_tree(dir);
}

TEST(TensorBoard, UnwritableDirectoryIsARuntimeError) {
  EXPECT_THROW(train::TensorBoardWriter("/proc/megaton_cannot_write_here"), RuntimeError);
}

TEST(TensorBoardMetrics, JsonlOneObjectPerLineAppends) {
  const auto dir = fresh_dir("metrics");
  const auto path = (dir / "sub" / "metrics.jsonl").string();
  {
    train::MetricsLog log(path);
    train::IterationMetrics m;
    m.iteration = 10;
    m.consumed_samples = 80;
    m.learning_rate = 1e-4;
    m.lm_loss = 7.5;
    m.grad_norm = 1.25;
    m.extra["valid_loss"] = 7.9;
    log.write(m);
  }
  {
    train::MetricsLog log(path);  // a resumed run appends
    train::IterationMetrics m;
    m.iteration = 20;
    m.loss_scale = 65536.0;
    log.write(m);
  }
  std::ifstream in(path);
  std::string l1, l2, l3;
  ASSERT_TRUE(std::getline(in, l1) && std::getline(in, l2));
  EXPECT_FALSE(std::getline(in, l3));
  const auto a = nlohmann::json::parse(l1), b = nlohmann::json::parse(l2);
  EXPECT_EQ(a.at("iteration"), 10);
  EXPECT_EQ(a.at("consumed_samples"), 80);
  EXPECT_DOUBLE_EQ(a.at("lm_loss").get<double>(), 7.5);
  EXPECT_DOUBLE_EQ(a.at("valid_loss").get<double>(), 7.9);
  EXPECT_FALSE(a.contains("loss_scale"));
  EXPECT_EQ(b.at("iteration"), 20);
  EXPECT_DOUBLE_EQ(b.at("loss_scale").get<double>(), 65536.0);
  EXPECT_FALSE(b.contains("lm_loss"));
  megaton::remove_tree(dir);
}
