// ops::heads_layout (ops/heads_layout.h): how a [.., np, d] tensor of heads lies in memory for the kernels that read
// heads by 16-byte vectors (the QKV interleave, the folded ALiBi's widened heads). CPU tensors: the rule is on strides.
#include "ops/heads_layout.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

using megaton::ops::heads_layout;

TEST(HeadsLayout, ContiguousViewsAndNarrowedHeads) {
  const auto l = heads_layout(torch::zeros({5, 3, 4, 16}));  // [s, b, np, d]
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->row_stride, 64);
  EXPECT_EQ(l->head_stride, 16);
  const torch::Tensor qkv = torch::zeros({5, 3, 4, 3, 16});  // [s, b, np, 3, d]: q, k, v as views
  const auto v = heads_layout(qkv.select(3, 2));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->row_stride, 4 * 3 * 16);
  EXPECT_EQ(v->head_stride, 3 * 16);
  const auto narrowed = heads_layout(torch::zeros({5, 3, 4, 24}).narrow(-1, 0, 16));  // the first d of d + 8
  ASSERT_TRUE(narrowed.has_value());
  EXPECT_EQ(narrowed->row_stride, 4 * 24);
  EXPECT_EQ(narrowed->head_stride, 24);
}

TEST(HeadsLayout, OneHeadOneRowAndSizeOneDims) {
  const auto one_head = heads_layout(torch::zeros({6, 2, 1, 24}).narrow(-1, 0, 8));  // np = 1: the row's stride
  ASSERT_TRUE(one_head.has_value());
  EXPECT_EQ(one_head->row_stride, 24);
  EXPECT_EQ(one_head->head_stride, 24);
  const auto one_row = heads_layout(torch::zeros({1, 1, 3, 8}));
  ASSERT_TRUE(one_row.has_value());
  EXPECT_EQ(one_row->row_stride, 24);
  EXPECT_EQ(one_row->head_stride, 8);
  const auto b1 = heads_layout(torch::zeros({7, 1, 2, 8}));  // b = 1: rows are s's
  ASSERT_TRUE(b1.has_value());
  EXPECT_EQ(b1->row_stride, 16);
}

TEST(HeadsLayout, RefusesWhatTheKernelsCannotRead) {
  EXPECT_FALSE(heads_layout(torch::zeros({3, 5, 4, 16}).transpose(0, 1)).has_value());      // s, b not one stride
  EXPECT_FALSE(heads_layout(torch::zeros({5, 4, 4, 16}).narrow(1, 0, 3)).has_value());      // gaps between rows
  EXPECT_FALSE(heads_layout(torch::zeros({5, 3, 4, 12}).narrow(-1, 0, 8)).has_value());     // head stride 12
  EXPECT_FALSE(heads_layout(torch::zeros({5, 3, 16, 4}).transpose(-1, -2)).has_value());    // d not dense
  EXPECT_FALSE(heads_layout(torch::zeros({5, 3, 1, 8}).expand({5, 3, 4, 8})).has_value());  // heads overlap
  EXPECT_FALSE(heads_layout(torch::zeros({8})).has_value());                                // no [np, d]
}
