// Error statistics over seeds (accuracy/stats.h).
#include <gtest/gtest.h>

#include <cmath>

#include "accuracy/stats.h"

namespace wd::accuracy {
namespace {

TEST(AccuracyStats, MedianOfOddAndEvenCounts) {
  const Summary odd = summarize({3.0, 1.0, 2.0});
  EXPECT_EQ(odd.median, 2.0);
  EXPECT_EQ(odd.worst, 3.0);
  EXPECT_EQ(odd.count, 3u);
  const Summary even = summarize({4.0, 1.0, 3.0, 2.0});
  EXPECT_EQ(even.median, 2.5);
  EXPECT_EQ(even.worst, 4.0);
  const Summary one = summarize({7.0});
  EXPECT_EQ(one.median, 7.0);
  EXPECT_EQ(one.worst, 7.0);
}

TEST(AccuracyStats, WorstOfARatioIsTheSmallest) {
  const Summary r = summarize({30.0, 12.0, 45.0}, Worst::kSmallest);
  EXPECT_EQ(r.median, 30.0);
  EXPECT_EQ(r.worst, 12.0);
}

TEST(AccuracyStats, NonFiniteSamplesAreNeverDropped) {
  const Summary s = summarize({1.0, NAN, 2.0});
  EXPECT_TRUE(std::isnan(s.median));
  EXPECT_TRUE(std::isnan(s.worst));
  EXPECT_EQ(s.non_finite, 1u);
  EXPECT_EQ(s.count, 3u);
  const Summary inf = summarize({1.0, INFINITY, 2.0});  // Inf sorts last: it is the worst
  EXPECT_EQ(inf.median, 2.0);
  EXPECT_TRUE(std::isinf(inf.worst));
  EXPECT_EQ(inf.non_finite, 1u);
}

TEST(AccuracyStats, EmptyIsNaN) {
  const Summary s = summarize({});
  EXPECT_EQ(s.count, 0u);
  EXPECT_TRUE(std::isnan(s.median));
}

TEST(AccuracyStats, ErrorRatio) {
  EXPECT_EQ(error_ratio(4e-2, 1e-3), 40.0);
  EXPECT_EQ(error_ratio(0.0, 0.0), 1.0);
  EXPECT_TRUE(std::isinf(error_ratio(1e-3, 0.0)));
  EXPECT_TRUE(std::isnan(error_ratio(NAN, 1.0)));
  EXPECT_TRUE(std::isnan(error_ratio(1.0, NAN)));
}

}  // namespace
}  // namespace wd::accuracy
