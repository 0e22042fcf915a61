// Pure parts of the checkpoint format: shard placement (hyperslabs, vocabulary padding), the split-independent
// CRC-32, tracker files and pruning, dtype names.
#include "checkpoint/format.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "checkpoint/crc.h"
#include "checkpoint/placement.h"
#include "checkpoint/tracker.h"
#include "core/error.h"
#include "core/remove_tree.h"

using namespace megaton;
using namespace megaton::checkpoint;
namespace fs = std::filesystem;

TEST(CheckpointPlacement, SplitsAlongPartitionDim) {
  auto p = place_shard("w", {8, 6}, 1, 0, 2, 3);
  EXPECT_EQ(p.local_shape, (std::vector<int64_t>{8, 2}));
  EXPECT_EQ(p.main.box.offset, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(p.main.box.count, (std::vector<int64_t>{8, 2}));
  EXPECT_FALSE(p.has_padding);
  auto r = place_shard("ln", {8}, -1, 0, 1, 2);
  EXPECT_EQ(r.main.box.offset, (std::vector<int64_t>{0}));
  EXPECT_EQ(r.main.box.count, (std::vector<int64_t>{8}));
  EXPECT_THROW(place_shard("w", {7, 6}, 0, 0, 0, 2), InternalError);
  EXPECT_THROW(place_shard("w", {8, 6}, 2, 0, 0, 2), InternalError);
}

TEST(CheckpointPlacement, VocabPaddingRowsGoToTheirOwnDataset) {
  // 50 real rows padded to 56, TP=4: shards of 14 rows [0,14) [14,28) [28,42) [42,56).
  std::vector<int64_t> rows_main, rows_pad;
  for (int r = 0; r < 4; ++r) {
    auto p = place_shard("emb", {56, 3}, 0, 50, r, 4);
    ASSERT_TRUE(p.has_padding);
    EXPECT_EQ(p.main.dataset_shape, (std::vector<int64_t>{50, 3}));
    EXPECT_EQ(p.padding.dataset_shape, (std::vector<int64_t>{6, 3}));
    EXPECT_EQ(p.main.box.count[0] + p.padding.box.count[0], 14);
    rows_main.push_back(p.main.box.count[0]);
    rows_pad.push_back(p.padding.box.count[0]);
    if (r == 3) {
      EXPECT_EQ(p.main.box.offset[0], 42);
      EXPECT_EQ(p.padding.box.offset[0], 0);
      EXPECT_EQ(p.padding.local_row_begin, 8);
    }
  }
  EXPECT_EQ(rows_main, (std::vector<int64_t>{14, 14, 14, 8}));
  EXPECT_EQ(rows_pad, (std::vector<int64_t>{0, 0, 0, 6}));
  // Unpadded (U == P) is a plain tensor.
  EXPECT_FALSE(place_shard("emb", {56, 3}, 0, 56, 1, 4).has_padding);
  // Padding along a dimension other than 0 breaks the contract.
  EXPECT_THROW(place_shard("emb", {56, 4}, 1, 50, 0, 2), InternalError);
}

TEST(CheckpointCrc, PartialsOfAnyTilingXorToTheWholeCrc) {
  torch::manual_seed(3);
  const std::vector<int64_t> shape = {6, 4, 10};
  auto full = torch::randn(shape);
  const uint32_t whole = crc32_bytes(full.data_ptr(), full.numel() * 4);
  for (int dim = 0; dim < 3; ++dim)
    for (int parts : {1, 2}) {
      const int64_t step = shape[dim] / parts;
      uint32_t x = 0;
      for (int i = 0; i < parts; ++i) {
        Box b{{0, 0, 0}, shape};
        b.offset[dim] = i * step;
        b.count[dim] = step;
        auto piece = full.narrow(dim, i * step, step).contiguous();
        x ^= crc32_partial(piece.data_ptr(), shape, b, 4);
      }
      EXPECT_EQ(x, whole) << "dim " << dim << " parts " << parts;
    }
  // An uneven 2-D tiling (rows split 1+5, second row block split in columns 3+7).
  Box a{{0, 0, 0}, {1, 4, 10}}, b{{1, 0, 0}, {5, 4, 3}}, c{{1, 0, 3}, {5, 4, 7}};
  uint32_t x = 0;
  for (const Box& bx : {a, b, c}) {
    auto piece = full.slice(0, bx.offset[0], bx.offset[0] + bx.count[0])
                     .slice(2, bx.offset[2], bx.offset[2] + bx.count[2])
                     .contiguous();
    x ^= crc32_partial(piece.data_ptr(), shape, bx, 4);
  }
  EXPECT_EQ(x, whole);
  // A changed byte changes it.
  auto bad = full.clone();
  bad.view(-1)[17] += 1.0f;
  EXPECT_NE(crc32_bytes(bad.data_ptr(), bad.numel() * 4), whole);
  // Known value: CRC-32 of "123456789" is 0xCBF43926.
  EXPECT_EQ(crc32_bytes("123456789", 9), 0xCBF43926u);
}

TEST(CheckpointTracker, ParsesAndRefuses) {
  EXPECT_EQ(parse_tracker_text("100\n", "t"), 100);
  EXPECT_EQ(parse_tracker_text(" release ", "t"), kReleaseIteration);
  EXPECT_EQ(parse_tracker_text("global_step1000", "t"), 1000);
  try {
    parse_tracker_text("abc", "/x/latest");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("/x/latest: expected an iteration number or 'release', found 'abc'"),
              std::string::npos);
  }
  EXPECT_THROW(parse_tracker_text("", "t"), CheckpointError);
  EXPECT_EQ(iteration_dir_name(42), "iter_0000042");
  EXPECT_EQ(iteration_dir_name(kReleaseIteration), "release");
}

TEST(CheckpointTracker, WritesAtomicallyAndPrunes) {
  const fs::path dir = fs::temp_directory_path() / ("megaton_tracker_" + std::to_string(::getpid()));
  megaton::remove_tree(dir);
  fs::create_directories(dir);
  EXPECT_FALSE(read_latest_iteration(dir.string()).has_value());
  for (int it : {1, 2, 3, 4}) fs::create_directory(dir / iteration_dir_name(it));
  fs::create_directory(dir / "iter_0000005.tmp-77");
  write_latest(dir.string(), 4);
  EXPECT_EQ(read_latest_iteration(dir.string()), 4);
  EXPECT_FALSE(fs::exists(dir / "latest.tmp"));
  EXPECT_EQ(list_checkpoints(dir.string()), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(stale_temporaries(dir.string()), (std::vector<std::string>{"iter_0000005.tmp-77"}));
  EXPECT_EQ(prune_checkpoints(dir.string(), 2, 4), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(list_checkpoints(dir.string()), (std::vector<int64_t>{3, 4}));
  // Megatron's tracker alone is honoured.
  fs::remove(dir / "latest");
  EXPECT_EQ(read_latest_iteration(dir.string()), 4);
  megaton::remove_tree(dir);
}

TEST(CheckpointFormat, DtypeNamesRoundTrip) {
  for (auto t : {torch::kFloat32, torch::kFloat64, torch::kFloat16, torch::kBFloat16, torch::kInt64, torch::kInt32,
                 torch::kUInt8})
    EXPECT_EQ(dtype_from_name(dtype_name(t), "x"), t);
  EXPECT_THROW(dtype_from_name("float8", "x"), CheckpointError);
}

TEST(CheckpointTracker, NeverWritesThroughAPlantedLink) {
  const fs::path dir = fs::temp_directory_path() / ("megaton_trlink_" + std::to_string(::getpid()));
  megaton::remove_tree(dir);
  fs::create_directories(dir);
  const fs::path victim = dir / "victim";
  std::ofstream(victim) << "precious";
  fs::create_symlink(victim, dir / "latest.tmp");
  fs::create_symlink(victim, dir / "latest_checkpointed_iteration.txt.tmp");
  write_latest(dir.string(), 9);
  std::ifstream in(victim);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "precious");
  EXPECT_EQ(read_latest_iteration(dir.string()), 9);
  EXPECT_FALSE(fs::is_symlink(dir / "latest"));
  // A tracker that is itself a link is refused, not followed.
  fs::remove(dir / "latest");
  fs::create_symlink(victim, dir / "latest");
  EXPECT_THROW(write_latest(dir.string(), 10), RuntimeError);
  megaton::remove_tree(dir);
}

TEST(CheckpointTracker, DisagreeingTrackersTakeTheNewerExistingAndSaySo) {
  const fs::path dir = fs::temp_directory_path() / ("megaton_trdis_" + std::to_string(::getpid()));
  megaton::remove_tree(dir);
  fs::create_directories(dir / iteration_dir_name(4));
  fs::create_directories(dir / iteration_dir_name(8));
  std::ofstream(dir / "latest") << "4\n";
  std::ofstream(dir / "latest_checkpointed_iteration.txt") << "8\n";
  std::string warning;
  EXPECT_EQ(read_latest_iteration(dir.string(), &warning), 8);
  EXPECT_NE(warning.find("'latest' says 4 but 'latest_checkpointed_iteration.txt' says 8"), std::string::npos)
      << warning;
  // The newer one's directory is gone: the older is loaded, still with the warning.
  megaton::remove_tree(dir / iteration_dir_name(8));
  warning.clear();
  EXPECT_EQ(read_latest_iteration(dir.string(), &warning), 4);
  EXPECT_FALSE(warning.empty());
  // Agreeing trackers say nothing.
  std::ofstream(dir / "latest_checkpointed_iteration.txt") << "4\n";
  warning.clear();
  EXPECT_EQ(read_latest_iteration(dir.string(), &warning), 4);
  EXPECT_TRUE(warning.empty());
  megaton::remove_tree(dir);
}

// A large buffer is checksummed in chunks on several threads and joined with crc32_combine: the result is zlib's
// one-pass CRC, for a length that is no multiple of the chunk and a CRC continued from an earlier one.
TEST(CheckpointCrc, ParallelChunksEqualOnePass) {
  const int threads = at::get_num_threads();
  at::set_num_threads(4);
  const int64_t n = (int64_t{37} << 20) + 12345;
  torch::Tensor bytes = torch::randint(0, 256, {n}, torch::TensorOptions().dtype(torch::kUInt8));
  const auto* p = static_cast<const Bytef*>(bytes.data_ptr());
  uLong want = crc32(0, p, 1000);
  for (int64_t off = 1000; off < n; off += 1 << 30)
    want = crc32(want, p + off, static_cast<uInt>(std::min<int64_t>(n - off, 1 << 30)));
  const uint32_t first = crc32_bytes(p, 1000);
  EXPECT_EQ(crc32_bytes(p + 1000, n - 1000, first), static_cast<uint32_t>(want));
  at::set_num_threads(threads);
}
