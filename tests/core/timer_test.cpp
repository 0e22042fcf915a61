// Timer with a device clock: a phase's time is the device time between the marks made at start and stop (no waiting
// at either), summed over the interval, and kept right when old spans are folded away.
#include "core/timer.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

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

// take(): the interval's spans leave the timer at once (the next interval starts empty) and are read later, waiting
// only for their own marks; a running timer keeps running from the take.
TEST(Timer, TakeLeavesTheSpansToReadLater) {
  double now = 0;
  int reads = 0;
  Timers timers;
  timers.set_device_clock([&] { return std::make_unique<FakeMark>(now, &reads); });
  timers("step").start();
  now += 2.0;
  timers("step").stop();
  timers("open").start();
  now += 1.0;
  std::map<std::string, TimerReading> taken = timers.take_all();
  EXPECT_EQ(reads, 0);
  now += 5.0;  // the next interval's work
  timers("step").start();
  now += 0.5;
  timers("step").stop();
  EXPECT_DOUBLE_EQ(taken.at("step").seconds(), 2.0);
  EXPECT_DOUBLE_EQ(taken.at("open").seconds(), 1.0);
  EXPECT_EQ(reads, 2);
  timers("open").stop();
  EXPECT_DOUBLE_EQ(timers("step").elapsed(), 0.5);
  EXPECT_DOUBLE_EQ(timers("open").elapsed(), 5.5);  // from the take on
}

TEST(Timer, HostMarksMeasureHostTime) {
  const auto a = mark_now(DeviceClock{});
  const auto b = host_mark();
  const double s = b->seconds_since(*a);
  EXPECT_GE(s, 0.0);
  EXPECT_LT(s, 1.0);
}
