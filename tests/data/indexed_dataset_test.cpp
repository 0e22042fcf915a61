// The .bin/.idx format: exact header bytes (Megatron's MMapIndexedDataset), read-back, merge, dtype refusal,
// corruption detection and the never-looks-complete rule for unfinished builders.
#include "data/indexed_dataset.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/remove_tree.h"
#include "data/data_test_util.h"
#include "data/merge.h"

namespace megaton::data {
namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_docs(const std::string& prefix, const std::vector<std::vector<int32_t>>& docs, uint8_t dtype = kUInt16) {
  IndexedDatasetBuilder b(prefix, dtype);
  for (const auto& d : docs) {
    b.add_item(d.data(), d.size());
    b.end_document();
  }
  b.finalize();
}

TEST(DataIndexedDataset, HeaderAndArraysAreMegatronLayout) {
  const auto dir = testing::scratch_dir("idx");
  const std::string p = (dir / "a").string();
  write_docs(p, {{1, 2, 3}, {50256}, {7, 8}});
  const std::string idx = slurp(p + ".idx");
  ASSERT_EQ(idx.size(), 34u + 12 * 3 + 8 * 4);  // 34 + 12N + 8D
  EXPECT_EQ(idx.substr(0, 9), std::string("MMIDIDX\0\0", 9));
  auto u64 = [&](size_t off) {
    uint64_t v;
    std::memcpy(&v, idx.data() + off, 8);
    return v;
  };
  auto i32 = [&](size_t off) {
    int32_t v;
    std::memcpy(&v, idx.data() + off, 4);
    return v;
  };
  EXPECT_EQ(u64(9), 1u);                        // version
  EXPECT_EQ(static_cast<uint8_t>(idx[17]), 8);  // uint16
  EXPECT_EQ(u64(18), 3u);                       // N
  EXPECT_EQ(u64(26), 4u);                       // D
  EXPECT_EQ(i32(34), 3);
  EXPECT_EQ(i32(38), 1);
  EXPECT_EQ(i32(42), 2);
  EXPECT_EQ(u64(46), 0u);  // pointers in bytes
  EXPECT_EQ(u64(54), 6u);
  EXPECT_EQ(u64(62), 8u);
  EXPECT_EQ(u64(70), 0u);  // doc_idx
  EXPECT_EQ(u64(94), 3u);
  EXPECT_EQ(slurp(p + ".bin").size(), 12u);

  const MMapIndexedDataset ds(p);
  EXPECT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds.num_tokens(), 6);
  EXPECT_EQ(ds.get(1), (std::vector<int64_t>{50256}));
  int64_t buf[2];
  ds.get(0, 1, 2, buf);
  EXPECT_EQ(buf[0], 2);
  EXPECT_EQ(buf[1], 3);
  EXPECT_THROW(ds.get(0, 2, 2, buf), DataError);
  megaton::remove_tree(dir);
}

TEST(DataIndexedDataset, Int32WhenVocabIsLargeAndRangeChecked) {
  const auto dir = testing::scratch_dir("idx");
  const std::string p = (dir / "b").string();
  write_docs(p, {{128000, 5}}, kInt32);
  EXPECT_EQ(MMapIndexedDataset(p).get(0), (std::vector<int64_t>{128000, 5}));
  IndexedDatasetBuilder b((dir / "c").string(), kUInt16);
  const int32_t big = 70000;
  EXPECT_THROW(b.add_item(&big, 1), DataError);
  megaton::remove_tree(dir);
}

TEST(DataIndexedDataset, MergeEqualsConcatenationAndRefusesMixedDtypes) {
  const auto dir = testing::scratch_dir("idx");
  const std::string a = (dir / "a").string(), b = (dir / "b").string(), ab = (dir / "ab").string(),
                    m = (dir / "m").string();
  write_docs(a, {{1, 2}, {3}});
  write_docs(b, {{4, 5, 6}});
  write_docs(ab, {{1, 2}, {3}, {4, 5, 6}});
  const MergeStats s = merge_datasets({a, b}, m);
  EXPECT_EQ(s.documents, 3u);
  EXPECT_EQ(slurp(m + ".idx"), slurp(ab + ".idx"));
  EXPECT_EQ(slurp(m + ".bin"), slurp(ab + ".bin"));
  write_docs((dir / "wide").string(), {{1}}, kInt32);
  try {
    merge_datasets({a, (dir / "wide").string()}, (dir / "bad").string());
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("uint16"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.bin"));
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.idx"));
  megaton::remove_tree(dir);
}

TEST(DataIndexedDataset, DetectsTruncationAndBadMagic) {
  const auto dir = testing::scratch_dir("idx");
  const std::string p = (dir / "a").string();
  write_docs(p, {{1, 2, 3}, {4}});
  std::filesystem::resize_file(p + ".bin", 6);
  EXPECT_THROW(MMapIndexedDataset{p}, DataError);
  write_docs(p, {{1, 2, 3}, {4}});
  std::string idx = slurp(p + ".idx");
  idx[0] = 'X';
  testing::write_file(p + ".idx", idx);
  try {
    MMapIndexedDataset ds(p);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("magic"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MMapIndexedDataset{(dir / "missing").string()}, DataError);
  megaton::remove_tree(dir);
}

TEST(DataIndexedDataset, UnfinishedBuilderLeavesNoPair) {
  const auto dir = testing::scratch_dir("idx");
  const std::string p = (dir / "a").string();
  {
    IndexedDatasetBuilder b(p, kUInt16);
    const int32_t t[2] = {1, 2};
    b.add_item(t, 2);
    b.end_document();
    EXPECT_TRUE(std::filesystem::exists(p + ".bin.tmp"));
    EXPECT_FALSE(std::filesystem::exists(p + ".bin"));
  }  // destroyed without finalize(): an interrupted run
  EXPECT_FALSE(std::filesystem::exists(p + ".bin"));
  EXPECT_FALSE(std::filesystem::exists(p + ".idx"));
  EXPECT_FALSE(std::filesystem::exists(p + ".bin.tmp"));
  megaton::remove_tree(dir);
}

}  // namespace
TEST(DataIndexedDataset, BuilderNeverWritesThroughAPlantedLink) {
  const auto dir = testing::scratch_dir("idx");
  const auto victim = dir / "victim";
  std::ofstream(victim) << "precious";
  std::filesystem::create_symlink(victim, dir / "out.bin.tmp");
  std::filesystem::create_symlink(victim, dir / "out.idx.tmp");
  write_docs((dir / "out").string(), {{1, 2, 3}});
  EXPECT_EQ(slurp(victim.string()), "precious");
  EXPECT_EQ(MMapIndexedDataset((dir / "out").string()).get(0), (std::vector<int64_t>{1, 2, 3}));
  // An output that is a link is refused.
  std::filesystem::create_symlink(victim, dir / "linked.bin");
  EXPECT_THROW(IndexedDatasetBuilder((dir / "linked").string(), kUInt16), RuntimeError);
  EXPECT_EQ(slurp(victim.string()), "precious");
  megaton::remove_tree(dir);
}

}  // namespace megaton::data
