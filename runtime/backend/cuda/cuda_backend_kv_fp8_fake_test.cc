// CudaBackend with an fp8 KV cache over the fake libcuda: the fp8 write and decode kernels
// launched where the f32 ones were (eagerly and in decode graphs), the pool sized for codes
// plus scales, and artifacts whose kernels do not match the KV type refused naming the
// recompile. No kernel runs here; the byte-level checks are kv_fp8_write_host_test.cc and
// the GPU test (test/gpu/cuda_kv_fp8_test.cc).
#include <dlfcn.h>

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/backend/cuda/cuda_backend.h"
#include "testing/cuda/fake_cuda_test.h"
#include "testing/cuda/fake_libcuda.h"
#include "testing/llama_program.h"
#include "testing/step_builder.h"
#include "testing/test_seed.h"

namespace ingot {
namespace {

using testing::makeStep;
using testing::Sequence;

using Launch = RecordedLaunch;

class CudaBackendKvFp8FakeTest : public FakeCudaTest {
 protected:
  std::unique_ptr<Artifact> artifact(schema::DType kv) {
    testing::LlamaProgramOptions o;  // 2 layers, 4 q / 2 kv heads of 16, vocab 256
    o.kv_dtype = kv;
    o.fake_cuda_kernels = true;
    return tinyLlama(o);
  }
  static CudaBackendOptions options() {
    CudaBackendOptions o;
    o.num_kv_blocks = 64;
    o.max_model_len = 256;
    o.max_graph_batch = 16;
    o.kernels.ptx_cache_dir = "none";
    return o;
  }
  std::vector<int32_t> randomTokens(int n) {
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % 256u);
    return t;
  }
  std::mt19937 rng{ingot::testing::testSeed()};
};

std::vector<Launch> named(const std::vector<Launch>& ls, const std::string& prefix) {
  std::vector<Launch> out;
  for (const Launch& l : ls)
    if (l.name.rfind(prefix, 0) == 0) out.push_back(l);
  return out;
}

TEST_F(CudaBackendKvFp8FakeTest, StepsLaunchTheFp8WriteAndDecodeKernelsEagerlyAndInGraphs) {
  const testing::LlamaProgramOptions o;
  auto a = artifact(schema::DType::F8E4M3FN);
  StatusOr<std::unique_ptr<CudaBackend>> made = CudaBackend::create(*a, options());
  ASSERT_TRUE(made.ok()) << made.status().message();
  CudaBackend& b = **made;
  EXPECT_EQ(b.kvDtype(), KvDtype::kFp8E4M3) << "the artifact's KV type by default";
  EXPECT_NE(b.describe().find("fp8"), std::string::npos) << b.describe();
  SetUp();
  // A prefill of two requests (13 and 7 tokens): one run per block written.
  std::vector<Sequence> seqs(2);
  seqs[0].tokens = randomTokens(16);
  seqs[0].blocks = {5, 9};
  seqs[1].tokens = randomTokens(10);
  seqs[1].blocks = {2};
  std::vector<Sequence*> all = {&seqs[0], &seqs[1]};
  std::vector<float> logits;
  ASSERT_TRUE(b.step(makeStep(all, {13, 7}, o.block_size), &logits).ok());
  std::vector<Launch> ls = launches();
  const std::vector<Launch> writes = named(ls, "ingot_fused_kv_write_fp8_f32");
  ASSERT_EQ(writes.size(), static_cast<size_t>(o.layers)) << "one fp8 write per kv_write step";
  for (const Launch& l : writes) {
    EXPECT_EQ(l.dims[0], 1u) << "2 kv heads x K/V = 4 warps: one CTA of 8 warps";
    EXPECT_EQ(l.dims[1], 20u) << "grid y: up to one run per token";
    EXPECT_EQ(l.dims[3], 256u);
  }
  // Rope still runs on q and k (2 per layer); the f32 pool write is gone.
  EXPECT_EQ(named(ls, "ingot_fused_rope_kv_write_f32").size(), static_cast<size_t>(2 * o.layers));
  const std::string decode = "ingot_decode_test_f32_kvfp8_d16_g2";
  EXPECT_EQ(named(ls, decode).size(), static_cast<size_t>(o.layers));
  EXPECT_TRUE(named(ls, "ingot_decode_test_f32_d").empty());

  // Decode: warm-up, capture, replay; the graph holds the fp8 write over the bucket's rows.
  for (int i = 0; i < 3; ++i) {
    SetUp();
    ASSERT_TRUE(b.step(makeStep(all, {1, 1}, o.block_size), &logits).ok());
    EXPECT_EQ(b.lastGraphBucket(), i == 0 ? -2 : 2);
    ls = launches();
    const std::vector<Launch> w = named(ls, "ingot_fused_kv_write_fp8_f32");
    ASSERT_EQ(w.size(), static_cast<size_t>(o.layers));
    for (const Launch& l : w) {
      EXPECT_EQ(l.dims[1], 2u) << "runs of the bucket of 2";
      EXPECT_EQ(l.fromGraph, i > 0);
    }
    EXPECT_EQ(named(ls, decode).size(), static_cast<size_t>(o.layers));
  }
  // Copies of an fp8 pool: blocks (codes and scales) and slots (re-encoded through the
  // host) succeed; bad slots are still refused.
  EXPECT_TRUE(b.copyKvBlocks(5, 40).ok());
  EXPECT_TRUE(b.copyKvSlots({{5 * o.block_size + 3, 2 * o.block_size + 8}, {10, 11}}).ok());
  EXPECT_FALSE(b.copyKvSlots({{0, 64 * o.block_size}}).ok());
}

TEST_F(CudaBackendKvFp8FakeTest, PoolIsSizedForCodesAndScalesFromFreeMemory) {
  const testing::LlamaProgramOptions o;
  const int64_t elements = int64_t{o.layers} * 2 * o.block_size * o.kv_heads * o.head_dim;
  const int64_t fp8Block = elements + int64_t{o.layers} * 2 * o.kv_heads * 4;
  auto a = artifact(schema::DType::F8E4M3FN);
  CudaBackendOptions opts = options();
  opts.num_kv_blocks = 0;
  opts.gpu_memory_utilization = 0.535;  // the fake: 16 GiB, half of it free
  StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::create(*a, opts);
  ASSERT_TRUE(b.ok()) << b.status().message();
  // 0.535 x 16 GiB - 8 GiB in use - 512 MiB reserve = 61 MiB of blocks.
  const double budget = (0.535 * 16 - 8 - 0.5) * (1 << 30);
  EXPECT_NEAR(static_cast<double>((*b)->numKvBlocks()), budget / fp8Block, 1.0);
  // The same artifact with an f32 pool asked for is refused (its kernels read fp8); an f32
  // artifact's pool of the same memory holds 3.9x fewer blocks.
  auto f32 = artifact(schema::DType::F32);
  StatusOr<std::unique_ptr<CudaBackend>> plain = CudaBackend::create(*f32, opts);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ((*plain)->kvDtype(), KvDtype::kF32);
  EXPECT_NEAR(static_cast<double>((*plain)->numKvBlocks()), budget / (elements * 4), 1.0);
  EXPECT_GT(static_cast<double>((*b)->numKvBlocks()) / (*plain)->numKvBlocks(), 3.5);
}

TEST_F(CudaBackendKvFp8FakeTest, KvTypeAndKernelsThatDisagreeAreRefusedNamingTheRecompile) {
  CudaBackendOptions opts = options();
  // --kv-dtype fp8 on an artifact compiled for an f32 cache: no fp8 kernels in it.
  opts.kv_dtype = KvDtype::kFp8E4M3;
  auto f32 = artifact(schema::DType::F32);
  StatusOr<std::unique_ptr<CudaBackend>> b = CudaBackend::create(*f32, opts);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("ingot_fused_kv_write_fp8_f32"), std::string::npos)
      << b.status().message();
  EXPECT_NE(b.status().message().find("--kv-dtype fp8"), std::string::npos);
  // --kv-dtype f32 on an fp8 artifact: its attention kernels read fp8.
  opts.kv_dtype = KvDtype::kF32;
  auto fp8 = artifact(schema::DType::F8E4M3FN);
  b = CudaBackend::create(*fp8, opts);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("_kvfp8_"), std::string::npos) << b.status().message();
  EXPECT_NE(b.status().message().find("--kv-dtype f32"), std::string::npos);
  // Asked for explicitly, fp8 on the fp8 artifact is fine.
  opts.kv_dtype = KvDtype::kFp8E4M3;
  b = CudaBackend::create(*fp8, opts);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ((*b)->kvDtype(), KvDtype::kFp8E4M3);
}

}  // namespace
}  // namespace ingot
