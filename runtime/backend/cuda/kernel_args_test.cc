// KernelArgs and checkKernelArgs: the pointers and sizes a launch passes, held to the kernel
// ABI the artifact recorded.
#include "runtime/backend/cuda/kernel_args.h"

#include <gtest/gtest.h>

namespace ingot {
namespace {

/// A parameter struct of 88 bytes, as a kernel taking one by value sees it.
struct EightyEightBytes {
  double values[11];
};

LoadedKernel kernelTaking(std::vector<uint32_t> paramBytes) {
  LoadedKernel k;
  k.param_bytes = std::move(paramBytes);
  k.name = "ingot_test_kernel";
  return k;
}

TEST(KernelArgs, PointsAtEachObjectAndSizesItByItsType) {
  CUdeviceptr x = 1;
  int dim = 2;
  float eps = 3;
  long long count = 4;
  EightyEightBytes params{};
  const KernelArgs args = kernelArgs(x, dim, eps, count, params);
  ASSERT_EQ(args.size(), 5u);
  EXPECT_EQ(args.data()[0], static_cast<void*>(&x));
  EXPECT_EQ(args.data()[1], static_cast<void*>(&dim));
  EXPECT_EQ(args.data()[2], static_cast<void*>(&eps));
  EXPECT_EQ(args.data()[3], static_cast<void*>(&count));
  EXPECT_EQ(args.data()[4], static_cast<void*>(&params));
  const uint32_t want[] = {8, 4, 4, 8, 88};
  for (size_t i = 0; i < args.size(); ++i) EXPECT_EQ(args.bytes(i), want[i]) << "argument " << i;
  EXPECT_EQ(kernelArgs().size(), 0u);
}

TEST(CheckKernelArgs, AcceptsTheSizesTheKernelTakes) {
  CUdeviceptr x = 0, residual = 0, gamma = 0, out = 0;
  int dim = 0;
  float eps = 0;
  Status s = checkKernelArgs(kernelTaking({8, 8, 8, 8, 4, 4}),
                             kernelArgs(x, residual, gamma, out, dim, eps), "step 1 (rms_norm)");
  EXPECT_TRUE(s.ok()) << s.message();
  EightyEightBytes params{};
  s = checkKernelArgs(kernelTaking({88}), kernelArgs(params), "step 2 (rope)");
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(CheckKernelArgs, AcceptsAnyArgumentsWhenTheArtifactRecordsNone) {
  CUdeviceptr x = 0;
  int dim = 0;
  EXPECT_TRUE(checkKernelArgs(LoadedKernel{}, kernelArgs(x, dim), "step 0").ok());
  EXPECT_TRUE(checkKernelArgs(LoadedKernel{}, kernelArgs(), "step 0").ok());
}

TEST(CheckKernelArgs, RefusesAnotherNumberOfArguments) {
  CUdeviceptr a = 0, b = 0, out = 0;
  long long count = 0;
  Status s = checkKernelArgs(kernelTaking({8, 8, 8, 8, 4}), kernelArgs(a, b, out, count),
                             "step 3 (add)");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "step 3 (add): kernel 'ingot_test_kernel' takes 5 parameters of 8, 8, 8, 8, 4 bytes (the artifact's "
            "kernel ABI); this runtime passes 4 parameters of 8, 8, 8, 8 bytes: the artifact was "
            "compiled for another kernel ABI; compile it again with this version");

  EightyEightBytes params{};
  s = checkKernelArgs(kernelTaking({8}), kernelArgs(), "sampling");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sampling: kernel 'ingot_test_kernel' takes 1 parameter of 8 bytes (the "
                             "artifact's kernel ABI); this runtime passes no parameters: "),
            std::string::npos)
      << s.message();
  s = checkKernelArgs(kernelTaking({88}), kernelArgs(params, params), "step 4 (attention)");
  EXPECT_FALSE(s.ok());
}

TEST(CheckKernelArgs, RefusesAnArgumentOfAnotherSize) {
  CUdeviceptr in = 0, out = 0;
  int count = 0;  // the kernel takes a long
  Status s = checkKernelArgs(kernelTaking({8, 8, 8}), kernelArgs(in, out, count),
                             "step 5 (to_bf16)");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "step 5 (to_bf16): kernel 'ingot_test_kernel' takes 3 parameters of 8, 8, 8 bytes (the artifact's "
            "kernel ABI); this runtime passes 3 parameters of 8, 8, 4 bytes: the artifact was "
            "compiled for another kernel ABI; compile it again with this version");

  EightyEightBytes params{};
  s = checkKernelArgs(kernelTaking({96}), kernelArgs(params), "step 6 (embedding)");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("takes 1 parameter of 96 bytes"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("passes 1 parameter of 88 bytes"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace ingot
