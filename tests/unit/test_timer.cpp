// Timer with a device clock: a phase's time is the device time between the marks made at start and stop (no waiting
// at either), summed over the interval, and kept right when old spans are folded away.
#include <gtest/gtest.h>

#include <memory>

#include "core/timer.h"

using namespace megaton;

namespace {

// A mark at a device time the test sets; counts how often its time was read (the "wait").
struct FakeMark : DeviceMark {
  FakeMark(double t, int* reads) : t(t), reads(reads) {}
  double seconds_since(const DeviceMark& earlier) const override {
    ++*reads;
    return t - dynamic_cast<const FakeMark&>(earlier).t;
  }
  double t;
  int* reads;
};

}  // namespace

TEST(Timer, DeviceClockSumsSpansBetweenMarksAndReadsOnlyWhenAsked) {
  double now = 0;
  int reads = 0;
  Timers timers;
  timers.set_device_clock([&] { return std::make_unique<FakeMark>(now, &reads); });
  for (int i = 0; i < 3; ++i) {
    now += 1.0;
    timers("fwd").start();
    now += 0.25;  // device time inside the phase
    timers("fwd").stop();
  }
  EXPECT_EQ(reads, 0);  // start and stop never read the device
  EXPECT_DOUBLE_EQ(timers("fwd").elapsed(), 0.75);
  EXPECT_EQ(reads, 3);
  EXPECT_DOUBLE_EQ(timers("fwd").elapsed(), 0.0);  // reset by the read
}

TEST(Timer, ManySpansAreFoldedWithoutLosingTime) {
  double now = 0;
  int reads = 0;
  Timer t;
  t.set_device_clock([&] { return std::make_unique<FakeMark>(now, &reads); });
  for (int i = 0; i < 1000; ++i) {
    t.start();
    now += 0.001;
    t.stop();
    now += 1.0;
  }
  EXPECT_GT(reads, 0);  // folded along the way
  EXPECT_NEAR(t.elapsed(), 1.0, 1e-9);
  EXPECT_EQ(reads, 1000);
}

TEST(Timer, HostClockWithoutDeviceClock) {
  Timer t;
  t.start();
  t.stop();
  const double e = t.elapsed();
  EXPECT_GE(e, 0.0);
  EXPECT_LT(e, 1.0);
}
