// The checkpoint loader's read-ahead: dataset_span finds a hyperslab's bytes in the file (checked against the file's
// raw bytes), and the read-ahead thread requests the ranges in order, stopping exactly `window` bytes past the start
// of the range the loader last reached.
#include "checkpoint/readahead.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>
#include <vector>

using namespace megaton::checkpoint;
namespace fs = std::filesystem;

namespace {

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
}

// Polls until the thread has requested `want` bytes (true), or 30 s pass (false). The thread stops at `want`, so a
// value past it never equals it again.
bool requested_reaches(const Readahead& r, int64_t want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (r.requested_bytes() == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

}  // namespace

TEST(Readahead, DatasetSpanCoversTheHyperslabsBytesInTheFile) {
  const fs::path file = temp_path("megaton_span.h5");
  std::vector<int32_t> values(4 * 6);
  std::iota(values.begin(), values.end(), 100);  // [4, 6]: element (r, c) = 100 + 6 r + c
  {
    const hid_t f = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[2] = {4, 6};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t ds = H5Dcreate2(f, "t", H5T_NATIVE_INT32, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
    H5Dclose(ds);
    H5Sclose(space);
    H5Fclose(f);
  }
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const auto span = dataset_span(f, "t", {1, 2}, {2, 3}, 4);  // rows 1-2, columns 2-4
  EXPECT_FALSE(dataset_span(f, "t", {1, 2}, {0, 3}, 4).has_value()) << "empty hyperslab";
  EXPECT_FALSE(dataset_span(f, "missing", {0}, {1}, 4).has_value());
  H5Fclose(f);
  ASSERT_TRUE(span.has_value());
  EXPECT_EQ(span->end - span->begin, (6 + 3) * 4) << "from (1, 2) to (2, 4), row-major";
  std::ifstream in(file, std::ios::binary);
  int32_t first = 0, last = 0;
  in.seekg(span->begin);
  in.read(reinterpret_cast<char*>(&first), 4);
  in.seekg(span->end - 4);
  in.read(reinterpret_cast<char*>(&last), 4);
  EXPECT_EQ(first, 100 + 6 * 1 + 2);
  EXPECT_EQ(last, 100 + 6 * 2 + 4);
  fs::remove(file);
}

TEST(Readahead, RequestsStayAWindowAheadOfTheLoader) {
  const fs::path file = temp_path("megaton_readahead.bin");
  constexpr int64_t kMiB = 1 << 20;
  {
    std::ofstream out(file, std::ios::binary);
    const std::vector<char> zeros(10 * kMiB, 0);
    out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  // Ranges of 1, 1 and 4 MiB; a window of 1.5 MiB (not a multiple of the chunk size).
  const int64_t window = 3 * kMiB / 2;
  Readahead r(file.string(), {{0, kMiB}, {2 * kMiB, 3 * kMiB}, {5 * kMiB, 9 * kMiB}}, window);
  EXPECT_TRUE(requested_reaches(r, window)) << "before the loader moves: one window; got " << r.requested_bytes();
  r.reached(1);
  EXPECT_TRUE(requested_reaches(r, kMiB + window)) << "got " << r.requested_bytes();
  r.reached(2);
  EXPECT_TRUE(requested_reaches(r, 2 * kMiB + window)) << "got " << r.requested_bytes();
  r.reached(3);
  EXPECT_TRUE(requested_reaches(r, 6 * kMiB)) << "all ranges; got " << r.requested_bytes();
  fs::remove(file);
}

TEST(Readahead, StopsWhenDestroyedWhileWaiting) {
  const fs::path file = temp_path("megaton_readahead_stop.bin");
  { std::ofstream(file, std::ios::binary) << std::string(1 << 20, 'x'); }
  {
    Readahead r(file.string(), {{0, 1 << 19}, {1 << 19, 1 << 20}}, 1 << 17);
    EXPECT_TRUE(requested_reaches(r, 1 << 17));
  }  // joins a thread that waits for the loader
  Readahead missing((file.string() + ".absent"), {{0, 1 << 20}}, 1 << 20);
  EXPECT_EQ(missing.requested_bytes(), 0) << "a file that cannot be opened reads nothing ahead";
  fs::remove(file);
}
