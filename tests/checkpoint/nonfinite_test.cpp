// count_nonfinite's pass over the bits against torch::isfinite, for every floating dtype a checkpoint holds, with
// NaN, +-inf, values that overflow when narrowed, subnormals and negative zero in the data.
#include "checkpoint/nonfinite.h"

#include <gtest/gtest.h>

#include <limits>

namespace megaton::checkpoint {
namespace {

TEST(CheckpointNonfinite, CountsAsTorchIsfinite) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (auto dtype : {torch::kFloat32, torch::kFloat64, torch::kBFloat16, torch::kFloat16}) {
    torch::Tensor t = torch::randn({1000}, torch::TensorOptions().dtype(torch::kFloat64)) * 1e3;
    t[3] = nan;
    t[10] = inf;
    t[11] = -inf;
    t[12] = -0.0;
    t[13] = 1e-310;  // subnormal in float64, zero in the narrower types
    t[999] = nan;
    t[20] = 1e300;  // the largest magnitudes: finite in float64, inf once narrowed
    torch::Tensor x = t.to(dtype);
    const int64_t want = x.numel() - torch::isfinite(x).sum().item<int64_t>();
    EXPECT_EQ(count_nonfinite(x), want) << x.dtype();
    EXPECT_GE(want, 4) << x.dtype();
    // A strided view takes torch's path and agrees.
    EXPECT_EQ(count_nonfinite(x.view({100, 10}).t()), want) << x.dtype();
  }
  EXPECT_EQ(count_nonfinite(torch::arange(10)), 0);  // integers are always finite
}

}  // namespace
}  // namespace megaton::checkpoint
