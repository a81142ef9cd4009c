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

}  // namespace
}  // namespace ingot
