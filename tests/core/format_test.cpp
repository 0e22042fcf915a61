#include "core/format.h"

#include <gtest/gtest.h>

#include "core/timer.h"

using namespace megaton;

TEST(Format, FixedAndGigabytes) {
  EXPECT_EQ(fixed(0.0173303, 3), "0.017");
  EXPECT_EQ(fixed(2.5, 0), "2");  // round half to even, as printf
  EXPECT_EQ(gigabytes(18.4e9), "18.40 GB");
  EXPECT_EQ(gigabytes(887808), "0.001 GB");
  EXPECT_EQ(gigabytes(0), "0.00 GB");
}

TEST(Format, ProgressLineInGigabytes) {
  const Progress p(18.4e9, "GB", 1e9);
  const std::string line = p.line(0);
  EXPECT_EQ(line.rfind("  0.0% 0.00/18.40 GB, 0.00 GB/s, elapsed 0:00:00, ETA ", 0), 0u) << line;
  const Progress docs(10000, "docs");
  EXPECT_EQ(docs.line(0).rfind("  0.0% 0/10000 docs, 0.0 docs/s", 0), 0u) << docs.line(0);
}

TEST(Format, ProgressIsDueOncePerInterval) {
  Progress p(1, "x");
  EXPECT_FALSE(p.due(3600));  // an hour has not passed since it started
  EXPECT_TRUE(p.due(0));
  EXPECT_TRUE(p.due(0));
  EXPECT_FALSE(p.due(3600));
}
