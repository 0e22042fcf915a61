// --tokenizer-name-or-path as a hub name: found in the hub cache layout under each of the variables huggingface_hub
// and transformers read, in their order; refs/main picks the snapshot; local paths win; a miss names what was searched.
#include "data/hf_hub_cache.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "core/remove_tree.h"
#include "data/data_test_util.h"

namespace megaton::data {
namespace {

GetEnv env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

// CACHE/models--ORG--NAME with the given snapshots (each holding a tokenizer.json) and refs/main when `main` is set.
void make_repo(const std::filesystem::path& cache, const std::string& repo, const std::vector<std::string>& hashes,
               const std::string& main) {
  const auto dir = cache / repo;
  for (const auto& h : hashes) {
    std::filesystem::create_directories(dir / "snapshots" / h);
    testing::write_file(dir / "snapshots" / h / "tokenizer.json", "{}");
  }
  if (main.empty()) return;
  std::filesystem::create_directories(dir / "refs");
  testing::write_file(dir / "refs" / "main", main + "\n");
}

TEST(HfHubCache, CacheDirectoriesInTheLibrariesOrder) {
  EXPECT_EQ(hf_hub_cache_dirs(env_of({{"HOME", "/h"}})), std::vector<std::string>{"/h/.cache/huggingface/hub"});
  EXPECT_EQ(hf_hub_cache_dirs(env_of({{"HOME", "/h"}, {"XDG_CACHE_HOME", "/x"}})),
            std::vector<std::string>{"/x/huggingface/hub"});
  EXPECT_EQ(hf_hub_cache_dirs(
                env_of({{"HOME", "/h"}, {"HF_HOME", "/hf"}, {"TRANSFORMERS_CACHE", "/t"}, {"HF_HUB_CACHE", "/c"}})),
            (std::vector<std::string>{"/c", "/t", "/hf/hub"}));
}

TEST(HfHubCache, HubNamesResolveToTheMainSnapshot) {
  const auto root = testing::scratch_dir("hfhub");
  make_repo(root / "hf" / "hub", "models--bigscience--bloom", {"aaa", "bbb"}, "bbb");
  make_repo(root / "hf" / "hub", "models--gpt2", {"ccc"}, "");
  const GetEnv env = env_of({{"HF_HOME", (root / "hf").string()}});
  EXPECT_EQ(resolve_hf_name_or_path("bigscience/bloom", env),
            (root / "hf/hub/models--bigscience--bloom/snapshots/bbb").string());
  // No refs/main: the only snapshot.
  EXPECT_EQ(resolve_hf_name_or_path("gpt2", env), (root / "hf/hub/models--gpt2/snapshots/ccc").string());
  // An existing local path is taken as it is, even when it looks like a hub name.
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(root);
  std::filesystem::create_directories(root / "bigscience" / "bloom");
  EXPECT_EQ(resolve_hf_name_or_path("bigscience/bloom", env), "bigscience/bloom");
  std::filesystem::current_path(cwd);
  // Several snapshots and no refs/main: ambiguous, refused by name.
  make_repo(root / "hf" / "hub", "models--org--two", {"d1", "d2"}, "");
  EXPECT_THROW(resolve_hf_name_or_path("org/two", env), DataError);
  remove_tree(root.string(), nullptr);
}

TEST(HfHubCache, AMissNamesTheSearchedDirectoriesAndHowToFetch) {
  const auto root = testing::scratch_dir("hfmiss");
  const GetEnv env = env_of({{"HF_HUB_CACHE", (root / "c").string()}, {"HOME", (root / "home").string()}});
  try {
    resolve_hf_name_or_path("bigscience/bloom-560m", env);
    FAIL() << "no error";
  } catch (const DataError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find((root / "c" / "models--bigscience--bloom-560m").string()), std::string::npos) << w;
    EXPECT_NE(w.find((root / "home/.cache/huggingface/hub/models--bigscience--bloom-560m").string()), std::string::npos)
        << w;
    EXPECT_NE(w.find("huggingface-cli download bigscience/bloom-560m"), std::string::npos) << w;
  }
  // Not a hub name (an absolute path, a relative one with ..): returned as given, for the caller's own error.
  EXPECT_EQ(resolve_hf_name_or_path("/no/such/dir", env), "/no/such/dir");
  EXPECT_EQ(resolve_hf_name_or_path("../x/y", env), "../x/y");
  remove_tree(root.string(), nullptr);
}

}  // namespace
}  // namespace megaton::data
