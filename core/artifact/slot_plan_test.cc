// planSlots and checkSlots: reuse, in-place pairs, and the plans checkSlots refuses.
#include "core/artifact/slot_plan.h"

#include <gtest/gtest.h>

namespace ingot {
namespace {

using schema::OpKind;

// Buffers 0, 1: program inputs; 2.. activations of width 8 unless changed.
std::vector<SlotBuffer> buffers(int numActivations) {
  std::vector<SlotBuffer> b = {{false, 0}, {false, 0}};
  for (int i = 0; i < numActivations; ++i) b.push_back({true, 8});
  return b;
}

TEST(SlotPlan, ReusesASlotOnceItsLastReaderRan) {
  // %2 = add(%0, %1); %3 = add(%2, %0); %4 = add(%3, %3); %5 = add(%4, %0)
  const std::vector<SlotStep> steps = {{OpKind::Add, {0, 1}, {2}},
                                       {OpKind::Add, {2, 0}, {3}},
                                       {OpKind::Add, {3, 3}, {4}},
                                       {OpKind::Add, {4, 0}, {5}}};
  const SlotPlan plan = planSlots(buffers(4), steps);
  EXPECT_EQ(plan.slot, (std::vector<int32_t>{-1, -1, 0, 1, 0, 1}));
  EXPECT_EQ(plan.num_slots, 2);
  EXPECT_TRUE(checkSlots(buffers(4), steps, plan.slot).ok());
}

TEST(SlotPlan, AddRmsNormWritesTheSumOverADyingResidual) {
  // %2 = add(%0, %1); (%3, %4) = add_rms_norm(%0, %2); %5 = add(%3, %4)
  const std::vector<SlotStep> steps = {{OpKind::Add, {0, 1}, {2}},
                                       {OpKind::AddRmsNorm, {0, 2}, {3, 4}},
                                       {OpKind::Add, {3, 4}, {5}}};
  const SlotPlan plan = planSlots(buffers(4), steps);
  EXPECT_EQ(plan.slot[3], plan.slot[2]);
  EXPECT_NE(plan.slot[4], plan.slot[3]);
  EXPECT_TRUE(checkSlots(buffers(4), steps, plan.slot).ok());
}

TEST(SlotPlan, ScaleWritesOverItsDyingInputOnly) {
  // %2 = add(%0, %1); %3 = scale(%2); %4 = scale(%3); %5 = add(%3, %4)
  const std::vector<SlotStep> steps = {{OpKind::Add, {0, 1}, {2}},
                                       {OpKind::Scale, {2}, {3}},
                                       {OpKind::Scale, {3}, {4}},
                                       {OpKind::Add, {3, 4}, {5}}};
  const SlotPlan plan = planSlots(buffers(4), steps);
  EXPECT_EQ(plan.slot[3], plan.slot[2]) << "%2 dies at the first scale";
  EXPECT_NE(plan.slot[4], plan.slot[3]) << "%3 is read again by the last add";
  EXPECT_TRUE(checkSlots(buffers(4), steps, plan.slot).ok());
}

TEST(SlotPlan, NoInPlaceWhenTheInputIsReadLaterTwiceOrOfAnotherWidth) {
  // The residual %2 is read again by step 2.
  std::vector<SlotStep> steps = {{OpKind::Add, {0, 1}, {2}},
                                 {OpKind::AddRmsNorm, {0, 2}, {3, 4}},
                                 {OpKind::Add, {2, 3}, {5}}};
  EXPECT_NE(planSlots(buffers(4), steps).slot[3], planSlots(buffers(4), steps).slot[2]);
  // x and residual are one buffer.
  steps[1].inputs = {2, 2};
  steps[2].inputs = {3, 4};
  EXPECT_NE(planSlots(buffers(4), steps).slot[3], planSlots(buffers(4), steps).slot[2]);
  // Another width.
  steps[1].inputs = {0, 2};
  std::vector<SlotBuffer> b = buffers(4);
  b[3].width = 16;
  EXPECT_NE(planSlots(b, steps).slot[3], planSlots(b, steps).slot[2]);
}

TEST(SlotPlan, CheckRefusesASlotStillToBeRead) {
  const std::vector<SlotStep> steps = {{OpKind::Add, {0, 1}, {2}},
                                       {OpKind::Add, {2, 0}, {3}},
                                       {OpKind::Add, {2, 3}, {4}}};
  const Status s = checkSlots(buffers(3), steps, {-1, -1, 0, 0, 1});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "step 1 (Add) writes buffer %3 into slot 0, which holds buffer %2 that step 2 still "
            "reads");
}

TEST(SlotPlan, CheckRefusesAnOutputOverAnInputTheOpDoesNotUpdateInPlace) {
  const std::vector<SlotStep> steps = {{OpKind::Add, {0, 1}, {2}},
                                       {OpKind::Add, {2, 0}, {3}}};
  const Status s = checkSlots(buffers(2), steps, {-1, -1, 0, 0});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "step 1 (Add) writes buffer %3 into slot 0, which holds buffer %2 that this step "
            "reads or writes");
  // Two outputs of one step in one slot.
  const std::vector<SlotStep> fused = {{OpKind::Add, {0, 1}, {2}},
                                       {OpKind::AddRmsNorm, {0, 2}, {3, 4}}};
  EXPECT_FALSE(checkSlots(buffers(3), fused, {-1, -1, 0, 1, 1}).ok());
  EXPECT_TRUE(checkSlots(buffers(3), fused, {-1, -1, 0, 0, 1}).ok());
}

TEST(SlotPlan, CheckRefusesSlotsOutOfRangeOnNonActivationsOrWithGaps) {
  const std::vector<SlotStep> steps = {{OpKind::Add, {0, 1}, {2}}};
  EXPECT_EQ(checkSlots(buffers(1), steps, {-1, -1, -1}).message(),
            "buffer %2: activation slot -1 outside [0, 3)");
  EXPECT_EQ(checkSlots(buffers(1), steps, {-1, -1, 3}).message(),
            "buffer %2: activation slot 3 outside [0, 3)");
  EXPECT_EQ(checkSlots(buffers(1), steps, {0, -1, 0}).message(),
            "buffer %0: only activations live in slots (slot 0)");
  EXPECT_EQ(checkSlots(buffers(1), steps, {-1, -1, 1}).message(),
            "activation slot 0 holds no buffer (slots are numbered 0 .. 1 without gaps)");
  EXPECT_EQ(checkSlots(buffers(1), steps, {-1, -1}).message(),
            "activation slots: 2 for 3 buffers");
  // An activation no step writes (a draft program cut from the main one) needs none.
  EXPECT_TRUE(checkSlots(buffers(2), steps, {-1, -1, 0, -1}).ok());
}

}  // namespace
}  // namespace ingot
