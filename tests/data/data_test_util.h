// Helpers shared by the data unit tests: a scratch directory, the downloaded GPT-2 files, a tiny tokenizer.json.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace megaton::data::testing {

inline std::filesystem::path scratch_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto p = std::filesystem::temp_directory_path() /
           ("megaton-" + name + "-" + info->name() + "-" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(p);
  return p;
}

inline std::string gpt2_file(const char* name) {
  return std::string(MEGATON_SOURCE_DIR) + "/data/downloaded/gpt2/" + name;
}

inline bool have_gpt2() {
  return std::filesystem::exists(gpt2_file("vocab.json")) && std::filesystem::exists(gpt2_file("merges.txt"));
}

#define MEGATON_REQUIRE_GPT2()                \
  if (!::megaton::data::testing::have_gpt2()) \
  GTEST_SKIP() << "GPT-2 vocab/merges not downloaded; run `bash data/fetch_gpt2_tokenizer.sh` (make tokenizer)"

inline void write_file(const std::filesystem::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary) << s;
}

}  // namespace megaton::data::testing
