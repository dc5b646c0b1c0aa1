// wd::median (core/median.h): the one definition of a median that the
// bandwidth ceiling, bench-moe's timings and the accuracy statistics use.
#include <gtest/gtest.h>

#include <vector>

#include "core/median.h"

namespace {

TEST(Median, OddCountIsTheMiddleSample) {
  EXPECT_EQ(wd::median(std::vector<double>{5.0, 1.0, 3.0}), 3.0);
  EXPECT_EQ(wd::median(std::vector<int>{9}), 9.0);
}

TEST(Median, EvenCountIsTheMeanOfTheTwoMiddleSamples) {
  // Unsorted, the lower middle (2) not next to the upper (3) in the input.
  EXPECT_EQ(wd::median(std::vector<double>{4.0, 2.0, 10.0, 3.0, 1.0, 7.0}), 3.5);
  EXPECT_EQ(wd::median(std::vector<float>{2.0f, 1.0f}), 1.5);
  // Integer samples: the mean is not truncated.
  EXPECT_EQ(wd::median(std::vector<unsigned>{1, 2}), 1.5);
  // Repeated middle values.
  EXPECT_EQ(wd::median(std::vector<double>{3.0, 3.0, 1.0, 9.0}), 3.0);
}

TEST(Median, EmptyIsZero) { EXPECT_EQ(wd::median(std::vector<double>{}), 0.0); }

TEST(Median, TwentyTimesOfABandwidthSeries) {
  // The read ceiling's 20 repetitions: the median time is between the 10th
  // and 11th fastest, not the slower of them.
  std::vector<float> ms;
  for (int i = 20; i >= 1; --i) ms.push_back(float(i));
  EXPECT_EQ(wd::median(ms), 10.5);
}

}  // namespace
