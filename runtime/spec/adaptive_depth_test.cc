// Tests for AdaptiveDepth: grows on full acceptance, shrinks on rejection, clamps, and turns
// speculation off above the batch threshold.
#include "runtime/spec/adaptive_depth.h"

#include <gtest/gtest.h>

namespace ingot {
namespace {

TEST(AdaptiveDepthTest, StartsAtTheInitialDepth) {
  EXPECT_EQ(AdaptiveDepth({1, 8, 4, 0.25, 32}).depth(), 4);
  EXPECT_EQ(AdaptiveDepth({1, 3, 6, 0.25, 32}).depth(), 3);  // clamped
}

TEST(AdaptiveDepthTest, GrowsToMaxWhileEverythingIsAccepted) {
  AdaptiveDepth a({1, 6, 2, 0.5, 32});
  for (int i = 0; i < 50; ++i) a.observe(a.depth(), a.depth());
  EXPECT_EQ(a.depth(), 6);
}

TEST(AdaptiveDepthTest, ShrinksToMinWhenNothingIsAccepted) {
  AdaptiveDepth a({2, 8, 6, 0.5, 32});
  for (int i = 0; i < 50; ++i) a.observe(a.depth(), 0);
  EXPECT_EQ(a.depth(), 2);
}

TEST(AdaptiveDepthTest, SettlesOnePastTheTypicalAcceptedLength) {
  AdaptiveDepth a({1, 8, 8, 0.25, 32});
  for (int i = 0; i < 100; ++i) a.observe(a.depth(), 2);
  EXPECT_NEAR(a.acceptedAverage(), 2.0, 1e-6);
  EXPECT_EQ(a.depth(), 3);
}

TEST(AdaptiveDepthTest, ShortFullyAcceptedProposalsDoNotShrinkDepth) {
  AdaptiveDepth a({1, 8, 5, 0.5, 32});
  for (int i = 0; i < 20; ++i) a.observe(1, 1);  // a lookup that found only one token
  EXPECT_GE(a.depth(), 5);
  a.observe(0, 0);  // nothing proposed: ignored
  EXPECT_GE(a.depth(), 5);
}

TEST(AdaptiveDepthTest, LargeBatchesTurnSpeculationOff) {
  AdaptiveDepth a({1, 8, 4, 0.25, 16});
  EXPECT_EQ(a.depthFor(16), 4);
  EXPECT_EQ(a.depthFor(17), 0);
}

TEST(AdaptiveDepthTest, ADraftThatIsNeverRightPausesAndProbes) {
  AdaptiveDepthConfig c;
  c.pause_steps = 4;
  AdaptiveDepth d(c);
  int steps = 0;
  while (d.nextDepth(1) > 0 && steps < 100) {
    d.observe(d.depth(), 0);
    ++steps;
  }
  EXPECT_LT(steps, 30);  // the average fell below pause_below
  for (int i = 1; i < 4; ++i) EXPECT_EQ(d.nextDepth(1), 0);
  EXPECT_EQ(d.nextDepth(1), 1);  // a probe at min_depth
  d.observe(1, 1);               // it hit: speculation resumes
  EXPECT_GT(d.nextDepth(1), 0);
  EXPECT_EQ(d.nextDepth(64), 0);  // and large batches still turn it off
}

}  // namespace
}  // namespace ingot
