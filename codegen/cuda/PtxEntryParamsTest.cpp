// ptxEntryParamBytes on PTX as NVRTC writes it: scalars, pointers and structs by value.
#include "codegen/cuda/PtxEntryParams.h"

#include <gtest/gtest.h>

namespace ingot::codegen {
namespace {

constexpr const char *kPtx = R"(
.version 8.8
.target sm_80
.address_size 64

	// .globl	ingot_fused_add_f32
.visible .entry ingot_fused_add_f32(
	.param .u64 ingot_fused_add_f32_param_0,
	.param .u64 .ptr .global .align 4 ingot_fused_add_f32_param_1,
	.param .u32 ingot_fused_add_f32_param_2,
	.param .f32 ingot_fused_add_f32_param_3
)
{
	ret;
}
.visible .entry ingot_fused_add_f32_wide(
	.param .align 8 .b8 ingot_fused_add_f32_wide_param_0[144],
	.param .align 2 .b16 ingot_fused_add_f32_wide_param_1[3]
)
{
	ret;
}
.visible .entry none()
{
	ret;
}
)";

TEST(PtxEntryParams, ReadsScalarsPointersAndStructsOfTheNamedEntry) {
  EXPECT_EQ(ptxEntryParamBytes(kPtx, "ingot_fused_add_f32"),
            (std::vector<uint32_t>{8, 8, 4, 4}));
  EXPECT_EQ(ptxEntryParamBytes(kPtx, "ingot_fused_add_f32_wide"),
            (std::vector<uint32_t>{144, 6}));
  EXPECT_EQ(ptxEntryParamBytes(kPtx, "none"), std::vector<uint32_t>{});
}

TEST(PtxEntryParams, NoEntryOfThatNameOrAParameterItCannotReadIsNullopt) {
  EXPECT_EQ(ptxEntryParamBytes(kPtx, "ingot_fused"), std::nullopt);  // a prefix only
  EXPECT_EQ(ptxEntryParamBytes(kPtx, "missing"), std::nullopt);
  EXPECT_EQ(ptxEntryParamBytes(".entry k(\n .param .pred k_param_0\n)", "k"), std::nullopt);
  EXPECT_EQ(ptxEntryParamBytes(".entry k(\n .param .b8 k_param_0[]\n)", "k"), std::nullopt);
  EXPECT_EQ(ptxEntryParamBytes(".entry k(\n .param .u32 k_param_0\n", "k"), std::nullopt);
}

} // namespace
} // namespace ingot::codegen
