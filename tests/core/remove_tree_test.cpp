// megaton::remove_tree (rm -rf without std::filesystem::remove_all, whose libtorch.so copy crashed on the GPU node):
// removes nested directories and files, removes a symbolic link without touching what it points to, treats a missing
// path as done, and reports the path when something cannot be removed.
#include "core/remove_tree.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

TEST(RemoveTree, RemovesNestedTreeButNotSymlinkTargets) {
  const fs::path root = fs::temp_directory_path() / ("megaton_rmtree_" + std::to_string(::getpid()));
  const fs::path outside = root.string() + "_outside";
  fs::create_directories(root / "a" / "b" / "c");
  fs::create_directories(outside);
  std::ofstream(root / "a" / "f.txt") << "x";
  std::ofstream(root / "a" / "b" / "c" / "g.bin") << "y";
  std::ofstream(outside / "keep.txt") << "z";
  fs::create_directory_symlink(outside, root / "a" / "link");
  std::string why;
  EXPECT_TRUE(megaton::remove_tree(root.string(), &why)) << why;
  EXPECT_FALSE(fs::exists(root));
  EXPECT_TRUE(fs::exists(outside / "keep.txt"));     // the link went, not its target
  EXPECT_TRUE(megaton::remove_tree(root.string()));  // already gone: success
  EXPECT_TRUE(megaton::remove_tree(outside.string()));
  EXPECT_FALSE(fs::exists(outside));
}

TEST(RemoveTree, ReportsWhatCouldNotBeRemoved) {
  std::string why;
  EXPECT_FALSE(megaton::remove_tree("/proc/self/status", &why));  // no one, root included, may unlink it
  EXPECT_NE(why.find("/proc/self/status: cannot unlink"), std::string::npos) << why;
  if (::geteuid() == 0) return;  // root may remove the read-only directory below
  const fs::path root = fs::temp_directory_path() / ("megaton_rmtree_ro_" + std::to_string(::getpid()));
  fs::create_directories(root / "locked");
  std::ofstream(root / "locked" / "f") << "x";
  fs::permissions(root / "locked", fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_FALSE(megaton::remove_tree(root.string(), &why));
  EXPECT_NE(why.find("locked"), std::string::npos) << why;
  fs::permissions(root / "locked", fs::perms::owner_all);
  EXPECT_TRUE(megaton::remove_tree(root.string()));
}

// No code calls std::filesystem::remove_all: on the GPU node the call binds to libtorch's exported copy, which crashes
// on a non-empty directory. remove_tree instead.
TEST(RemoveTree, NothingCallsStdFilesystemRemoveAll) {
  const fs::path root = MEGATON_SOURCE_DIR;
  const std::string call = std::string("remove_") + "all(";  // split: this file must not match itself
  std::vector<std::string> offenders;
  for (const char* dir : {"src", "tests", "perf"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".h" && ext != ".cu" && ext != ".cuh")) continue;
      if (e.path().filename() == "remove_tree.h") continue;  // its comment names the call it replaces
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n)
        if (line.find(call) != std::string::npos)
          offenders.push_back(fs::relative(e.path(), root).string() + ":" + std::to_string(n));
    }
  }
  EXPECT_TRUE(offenders.empty()) << "use megaton::remove_tree (src/core/remove_tree.h) instead of remove_all at "
                                 << ::testing::PrintToString(offenders);
}
