// The fused elementwise kernels (codegen/cuda/kernels/fused_ops.cuh) on a GPU against the CPU
// backend's ops: rms_norm with the residual add, rope in place plus the paged KV write (a
// padding token included), silu_mul and gelu_mul, the embedding gather with invalid token ids, add and
// scale (also in place), add_bias, the to_bf16 cast (ties, NaN, overflow) and the logits-row gather;
// f32 and bf16, through the cubin and the compute_80 PTX JIT, on fresh random inputs with
// poisoned outputs. Label `gpu`: skips, saying why, without a driver or a device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/cuda/FusedOpsSource.h"
#include "codegen/cuda/NvrtcCompiler.h"
#include "codegen/cuda/kernels/fused_ops.cuh"
#include "runtime/backend/cpu/cpu_ops.h"
#include "runtime/backend/cpu/paged_attention.h"
#include "runtime/backend/cuda/cuda_driver.h"
#include "testing/test_seed.h"
#include "test/gpu/kernel_target.h"

namespace ingot {
namespace {

using codegen::AttentionDtype;
using codegen::FusedOp;

float bf16Round(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&f, &b, 4);
  return f;
}

/// Random normal values, already representable in the element type.
std::vector<float> randomValues(std::mt19937 &rng, size_t n, bool bf16, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float &x : v) x = bf16 ? bf16Round(normal(rng)) : normal(rng);
  return v;
}

/// |got - want| <= atol + rtol |want| element by element, naming the first failure.
void expectClose(const std::vector<float> &got, const std::vector<float> &want, float atol,
                 float rtol, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - want[i]), atol + rtol * std::fabs(want[i]))
        << what << " element " << i << ": " << got[i] << " vs " << want[i];
}

class FusedOpsGpuTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {
 protected:
  void SetUp() override {
    StatusOr<std::unique_ptr<CudaDriver>> loaded = CudaDriver::load();
    if (!loaded.ok()) GTEST_SKIP() << "no GPU: " << loaded.status().message();
    cu = std::move(loaded).value();
    int count = 0;
    if (cu->deviceGetCount(&count) != CUDA_SUCCESS || count == 0) GTEST_SKIP() << "no CUDA device";
    ASSERT_TRUE(cu->check("cuDeviceGet", cu->deviceGet(&device, 0)).ok());
    int major = 0, minor = 0;
    cu->deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    cu->deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    ASSERT_TRUE(cu->check("cuDevicePrimaryCtxRetain", cu->primaryCtxRetain(&context, device)).ok());
    ASSERT_TRUE(cu->check("cuCtxSetCurrent", cu->ctxSetCurrent(context)).ok());
    bf16 = std::get<0>(GetParam());
    const GpuTarget gpu{major, minor, "", cu->emulated()};
    if (std::get<1>(GetParam()) && noPtxJit(gpu)) GTEST_SKIP() << noPtxJit(gpu);
    const std::string target = kernelTarget(gpu, std::get<1>(GetParam()));
    StatusOr<std::vector<codegen::CudaBinary>> bin =
        codegen::compileCuda(codegen::fusedOpsSource(), "fused_ops.cu", {target});
    ASSERT_TRUE(bin.ok()) << bin.status().message();
    std::vector<uint8_t> image = (*bin)[0].data;
    image.push_back(0);
    ASSERT_TRUE(cu->check("cuModuleLoadData", cu->moduleLoadData(&module, image.data())).ok());
  }
  void TearDown() override {
    for (CUdeviceptr p : allocations) cu->memFree(p);
    if (module) cu->moduleUnload(module);
    if (cu && context) cu->primaryCtxRelease(device);
  }

  size_t elementBytes() const { return bf16 ? 2 : 4; }

  /// Device copy of `bytes` bytes, freed at TearDown; uploadValues converts to the element type.
  CUdeviceptr upload(const void *data, size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_TRUE(cu->check("cuMemAlloc", cu->memAlloc(&p, std::max<size_t>(bytes, 4))).ok());
    allocations.push_back(p);
    EXPECT_TRUE(cu->check("cuMemcpyHtoD", cu->memcpyHtoD(p, data, bytes)).ok());
    return p;
  }
  CUdeviceptr uploadValues(const std::vector<float> &v) {
    if (!bf16) return upload(v.data(), v.size() * 4);
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      uint32_t b;
      std::memcpy(&b, &v[i], 4);
      h[i] = static_cast<uint16_t>(b >> 16);  // already representable
    }
    return upload(h.data(), h.size() * 2);
  }
  /// A poisoned (all-ones bytes: NaN) output of n elements.
  CUdeviceptr poisoned(size_t n) {
    std::vector<uint8_t> ones(n * elementBytes(), 0xff);
    return upload(ones.data(), ones.size());
  }
  std::vector<float> download(CUdeviceptr p, size_t n) {
    EXPECT_TRUE(cu->check("cuCtxSynchronize", cu->ctxSynchronize()).ok());
    std::vector<float> out(n);
    std::vector<uint8_t> raw(n * elementBytes());
    EXPECT_TRUE(cu->check("cuMemcpyDtoH", cu->memcpyDtoH(raw.data(), p, raw.size())).ok());
    for (size_t i = 0; i < n; ++i) {
      if (bf16) {
        uint32_t b = static_cast<uint32_t>(raw[2 * i] | (raw[2 * i + 1] << 8)) << 16;
        std::memcpy(&out[i], &b, 4);
      } else {
        std::memcpy(&out[i], &raw[4 * i], 4);
      }
    }
    return out;
  }
  void launch(FusedOp op, unsigned grid, void **args) {
    const std::string name =
        codegen::fusedKernelName(op, bf16 ? AttentionDtype::kBF16 : AttentionDtype::kF32);
    CUfunction fn = nullptr;
    ASSERT_TRUE(cu->check("cuModuleGetFunction", cu->moduleGetFunction(&fn, module, name.c_str())).ok())
        << name;
    ASSERT_TRUE(cu->check("cuLaunchKernel", cu->launchKernel(fn, grid, 1, 1, fused::kFusedThreads,
                                                             1, 1, 0, nullptr, args, nullptr)).ok())
        << name;
  }
  float round(float v) const { return bf16 ? bf16Round(v) : v; }
  float atol() const { return bf16 ? 2e-2f : 2e-5f; }
  float rtol() const { return bf16 ? 1e-2f : 2e-5f; }

  std::unique_ptr<CudaDriver> cu;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  std::vector<CUdeviceptr> allocations;
  bool bf16 = false;
  std::mt19937 rng{ingot::testing::testSeed()};
};

TEST_P(FusedOpsGpuTest, RmsNormResidual) {
  for (int dim : {576, 1000, 4096}) {
    const int rows = 6;
    const float eps = 1e-5f;
    std::vector<float> x = randomValues(rng, rows * dim, bf16), res = randomValues(rng, rows * dim, bf16);
    std::vector<float> gamma = randomValues(rng, dim, bf16, 0.5f);
    std::vector<float> sum(rows * dim), want(rows * dim, NAN);
    for (int i = 0; i < rows * dim; ++i) sum[i] = round(res[i] + x[i]);
    rmsNormRows(sum.data(), gamma.data(), dim, eps, want.data(), 0, rows);
    CUdeviceptr dx = uploadValues(x), dres = uploadValues(res), dg = uploadValues(gamma);
    CUdeviceptr dout = poisoned(rows * dim);
    float e = eps;
    void *args[] = {&dx, &dres, &dg, &dout, &dim, &e};
    launch(FusedOp::kRmsNormResidual, rows, args);
    ASSERT_EQ(download(dres, rows * dim), sum) << "residual, dim " << dim;
    expectClose(download(dout, rows * dim), want, atol(), rtol(), "rms_norm dim " + std::to_string(dim));
    // Without a residual: plain rms_norm of x.
    CUdeviceptr none = 0, dout2 = poisoned(rows * dim);
    void *args2[] = {&dx, &none, &dg, &dout2, &dim, &e};
    launch(FusedOp::kRmsNormResidual, rows, args2);
    rmsNormRows(x.data(), gamma.data(), dim, eps, want.data(), 0, rows);
    expectClose(download(dout2, rows * dim), want, atol(), rtol(), "rms_norm, no residual");
  }
}

TEST_P(FusedOpsGpuTest, RopeAndKvWrite) {
  const int T = 9, H = 9, Hkv = 3, D = 64, layers = 2, layer = 1, blockSize = 16, blocks = 5;
  for (int rotary : {64, 32}) {
    const std::vector<float> invFreq = ropeInverseFrequencies(10000.0, rotary, RopeScalingParams{});
    std::vector<int32_t> positions(T), slots(blocks * blockSize);
    for (int32_t &p : positions) p = std::uniform_int_distribution<int>(0, 32767)(rng);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(T);
    slots[3] = -1;  // padding: rotated, not written
    // One fused qkv row per token: [q heads | k heads | v heads].
    const int width = (H + 2 * Hkv) * D;
    std::vector<float> qkv = randomValues(rng, T * width, bf16);
    std::vector<float> q(T * H * D), k(T * Hkv * D), v(T * Hkv * D);
    for (int t = 0; t < T; ++t) {
      std::copy_n(&qkv[t * width], H * D, &q[t * H * D]);
      std::copy_n(&qkv[t * width + H * D], Hkv * D, &k[t * Hkv * D]);
      std::copy_n(&qkv[t * width + (H + Hkv) * D], Hkv * D, &v[t * Hkv * D]);
    }
    std::vector<float> qWant(q.size()), kWant(k.size());
    ropeRows(q.data(), positions.data(), invFreq, H, D, qWant.data(), 0, T);
    ropeRows(k.data(), positions.data(), invFreq, Hkv, D, kWant.data(), 0, T);
    for (float &f : qWant) f = round(f);
    for (float &f : kWant) f = round(f);
    KvCacheLayout layout{layers, blockSize, Hkv, D};
    const size_t poolSize = static_cast<size_t>(blocks) * layout.blockFloats();
    std::vector<float> pool = randomValues(rng, poolSize, bf16), poolWant = pool;
    for (int t = 0; t < T; ++t)
      if (slots[t] >= 0)
        kvWriteRows(poolWant.data(), layout, layer, kWant.data(), v.data(), slots.data(), t, t + 1);
    CUdeviceptr dqkv = uploadValues(qkv), dpool = uploadValues(pool);
    CUdeviceptr dpos = upload(positions.data(), T * 4), dslots = upload(slots.data(), T * 4);
    CUdeviceptr dinv = upload(invFreq.data(), invFreq.size() * 4);
    fused::RopeKvParams p{};
    p.q = reinterpret_cast<void *>(dqkv);
    p.k = reinterpret_cast<void *>(dqkv + H * D * elementBytes());
    p.v = reinterpret_cast<void *>(dqkv + (H + Hkv) * D * elementBytes());
    p.kv_cache = reinterpret_cast<void *>(dpool);
    p.positions = reinterpret_cast<const int *>(dpos);
    p.slot_mapping = reinterpret_cast<const int *>(dslots);
    p.inv_freq = reinterpret_cast<const float *>(dinv);
    p.num_tokens = T;
    p.num_heads = H;
    p.num_kv_heads = Hkv;
    p.head_dim = D;
    p.rotary_dim = rotary;
    p.q_stride = p.k_stride = p.v_stride = width;
    p.num_layers = layers;
    p.layer = layer;
    p.block_size = blockSize;
    void *args[] = {&p};
    launch(FusedOp::kRopeKvWrite, T, args);
    const std::vector<float> qkvGot = download(dqkv, T * width);
    std::vector<float> qGot(q.size()), kGot(k.size()), vGot(v.size());
    for (int t = 0; t < T; ++t) {
      std::copy_n(&qkvGot[t * width], H * D, &qGot[t * H * D]);
      std::copy_n(&qkvGot[t * width + H * D], Hkv * D, &kGot[t * Hkv * D]);
      std::copy_n(&qkvGot[t * width + (H + Hkv) * D], Hkv * D, &vGot[t * Hkv * D]);
    }
    const float ulps = bf16 ? 8e-3f : 1e-6f;  // one rounding step of the element type
    expectClose(qGot, qWant, ulps, ulps, "rope q, rotary " + std::to_string(rotary));
    expectClose(kGot, kWant, ulps, ulps, "rope k");
    ASSERT_EQ(vGot, v) << "v must not change";
    // The pool: written rows hold the kernel's own k (compared above) and v; others untouched.
    std::vector<float> poolGot = download(dpool, poolSize);
    expectClose(poolGot, poolWant, ulps, ulps, "kv pool");
  }
}

TEST_P(FusedOpsGpuTest, SiluMul) {
  const long n = 3 * 1536 + 7;
  std::vector<float> gate = randomValues(rng, n, bf16, 4.0f), up = randomValues(rng, n, bf16);
  std::vector<float> want(n, NAN);
  siluMulRange(gate.data(), up.data(), want.data(), 0, n);
  for (float &f : want) f = round(f);
  CUdeviceptr dg = uploadValues(gate), du = uploadValues(up), dout = poisoned(n);
  long count = n;
  void *args[] = {&dg, &du, &dout, &count};
  launch(FusedOp::kSiluMul, 7, args);  // a grid smaller than the range: grid-stride loop
  expectClose(download(dout, n), want, atol(), rtol(), "silu_mul");
}

TEST_P(FusedOpsGpuTest, GeluMulInPlaceAsTheGatedLinearRunsIt) {
  const long n = 3 * 1536 + 7;
  // Gates over GELU's curved range and far into both tails (tanh saturates there).
  std::vector<float> gate = randomValues(rng, n, bf16, 6.0f), up = randomValues(rng, n, bf16);
  std::vector<float> want(n, NAN);
  geluMulRange(gate.data(), up.data(), want.data(), 0, n);
  for (float &f : want) f = round(f);
  CUdeviceptr dg = uploadValues(gate), du = uploadValues(up), dout = poisoned(n);
  long count = n;
  void *args[] = {&dg, &du, &dout, &count};
  launch(FusedOp::kGeluMul, 7, args);  // a grid smaller than the range: grid-stride loop
  expectClose(download(dout, n), want, atol(), rtol(), "gelu_mul");
  void *inPlace[] = {&dg, &du, &du, &count};  // the gated_linear writes over the up rows
  launch(FusedOp::kGeluMul, fused::fusedGridSize(count), inPlace);
  expectClose(download(du, n), want, atol(), rtol(), "gelu_mul in place");
}

TEST_P(FusedOpsGpuTest, EmbeddingGatherFlagsInvalidTokens) {
  const int vocab = 100, dim = 300, start = 40, rows = 30, T = 64;
  std::vector<float> table = randomValues(rng, rows * dim, bf16);
  for (bool withInvalid : {false, true}) {
    std::vector<int32_t> tokens(T);
    for (int32_t &t : tokens)
      t = std::uniform_int_distribution<int>(withInvalid ? -5 : 0, withInvalid ? vocab + 5 : vocab - 1)(rng);
    if (withInvalid) tokens[17] = vocab;
    std::vector<float> want(T * dim, NAN);
    embeddingShardRows(tokens.data(), table.data(), WeightType::kF32, start, rows, dim, want.data(), 0, T);
    CUdeviceptr dtok = upload(tokens.data(), T * 4), dtab = uploadValues(table), dout = poisoned(T * dim);
    const unsigned zero = 0;
    CUdeviceptr derr = upload(&zero, 4);
    fused::EmbeddingParams p{reinterpret_cast<const int *>(dtok), reinterpret_cast<const void *>(dtab),
                             reinterpret_cast<void *>(dout), reinterpret_cast<unsigned *>(derr),
                             T, dim, vocab, start, rows};
    void *args[] = {&p};
    launch(FusedOp::kEmbedding, T, args);
    ASSERT_EQ(download(dout, T * dim), want);
    unsigned err = 0;
    ASSERT_TRUE(cu->check("cuMemcpyDtoH", cu->memcpyDtoH(&err, derr, 4)).ok());
    if (!withInvalid) {
      EXPECT_EQ(err, 0u);
    } else {
      ASSERT_GT(err, 0u);
      ASSERT_LE(err, static_cast<unsigned>(T));
      const int bad = tokens[err - 1];
      EXPECT_TRUE(bad < 0 || bad >= vocab) << "error word names token " << bad;
    }
  }
}

TEST_P(FusedOpsGpuTest, AddInPlaceAndOutOfPlace) {
  const long n = 5 * 1536 + 3;
  std::vector<float> a = randomValues(rng, n, bf16, 2.0f), b = randomValues(rng, n, bf16, 2.0f);
  std::vector<float> want(n, NAN);
  addRange(a.data(), b.data(), want.data(), 0, n);
  for (float &f : want) f = round(f);
  CUdeviceptr da = uploadValues(a), db = uploadValues(b), dout = poisoned(n);
  long count = n;
  void *args[] = {&da, &db, &dout, &count};
  launch(FusedOp::kAdd, 5, args);  // a grid smaller than the range: grid-stride loop
  ASSERT_EQ(download(dout, n), want) << "add";
  void *inPlace[] = {&da, &db, &da, &count};  // out aliases a: the residual add
  launch(FusedOp::kAdd, fused::fusedGridSize(count), inPlace);
  ASSERT_EQ(download(da, n), want) << "add in place";
}

TEST_P(FusedOpsGpuTest, ScaleInPlaceAndOutOfPlace) {
  const long n = 3 * 1536 + 5;
  std::vector<float> x = randomValues(rng, n, bf16, 2.0f);
  long count = n;
  for (float factor : {25.298221f, -0.375f}) {  // sqrt(640), Gemma 3 270M's embedding scale
    std::vector<float> want(n, NAN);
    scaleRange(x.data(), factor, want.data(), 0, n);
    for (float &f : want) f = round(f);
    CUdeviceptr dx = uploadValues(x), dout = poisoned(n);
    void *args[] = {&dx, &dout, &factor, &count};
    launch(FusedOp::kScale, 3, args);  // a grid smaller than the range: grid-stride loop
    ASSERT_EQ(download(dout, n), want) << "scale by " << factor;
    void *inPlace[] = {&dx, &dx, &factor, &count};
    launch(FusedOp::kScale, fused::fusedGridSize(count), inPlace);
    ASSERT_EQ(download(dx, n), want) << "scale by " << factor << " in place";
  }
}

TEST_P(FusedOpsGpuTest, AddBiasToEveryRow) {
  for (int width : {576, 1000, 3}) {
    const long rows = 7;
    std::vector<float> x = randomValues(rng, rows * width, bf16), bias(width);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float &f : bias) f = normal(rng);  // f32, not rounded to the element type
    std::vector<float> want(x.size());
    for (long r = 0; r < rows; ++r)
      for (int c = 0; c < width; ++c) want[r * width + c] = round(x[r * width + c] + bias[c]);
    CUdeviceptr dx = uploadValues(x), dbias = upload(bias.data(), width * 4);
    long r = rows;
    int w = width;
    void *args[] = {&dx, &dbias, &r, &w};
    launch(FusedOp::kAddBias, width == 3 ? 1 : fused::fusedGridSize(rows * width), args);
    ASSERT_EQ(download(dx, rows * width), want) << "add_bias, width " << width;
  }
}

TEST_P(FusedOpsGpuTest, ToBf16RoundsToNearestEven) {
  const long n = 70000;
  std::vector<float> in = randomValues(rng, n, bf16, 100.0f);
  if (!bf16) {
    // Exact ties, both parities, and values that are not numbers or too large for bf16.
    std::uniform_int_distribution<uint32_t> anyBits;
    for (long i = 0; i < 4096; ++i) {
      const uint32_t b = (anyBits(rng) & 0xbfff0000u) | 0x8000u;
      std::memcpy(&in[i], &b, 4);
    }
    const uint32_t special[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
                                0x7f7f8000u, 0x7f7f7fffu, 0x00000001u, 0x80008000u};
    for (size_t i = 0; i < std::size(special); ++i) std::memcpy(&in[4096 + i], &special[i], 4);
  }
  std::vector<uint16_t> want(n);
  for (long i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, &in[i], 4);
    want[i] = std::isnan(in[i]) ? 0x7fff : static_cast<uint16_t>(
        (static_cast<uint64_t>(b) + 0x7fffu + ((b >> 16) & 1u)) >> 16);
  }
  CUdeviceptr din = uploadValues(in);
  std::vector<uint8_t> ones(n * 2, 0xff);
  CUdeviceptr dout = upload(ones.data(), ones.size());
  long count = n;
  void *args[] = {&din, &dout, &count};
  launch(FusedOp::kToBf16, fused::fusedGridSize(count), args);
  ASSERT_TRUE(cu->check("cuCtxSynchronize", cu->ctxSynchronize()).ok());
  std::vector<uint16_t> got(n, 0);
  ASSERT_TRUE(cu->check("cuMemcpyDtoH", cu->memcpyDtoH(got.data(), dout, n * 2)).ok());
  for (long i = 0; i < n; ++i)
    ASSERT_EQ(got[i], want[i]) << "element " << i << " = " << in[i];
}

TEST_P(FusedOpsGpuTest, GatherRowsCopiesTheRequestedRows) {
  const int inRows = 37, width = 1000, numRows = 9;
  std::vector<float> in = randomValues(rng, inRows * width, bf16);
  std::vector<int32_t> rows(numRows);
  for (int32_t &r : rows) r = std::uniform_int_distribution<int>(0, inRows - 1)(rng);
  rows[1] = rows[0];  // a row asked for twice
  rows[2] = inRows - 1;
  std::vector<float> want(numRows * width);
  for (int i = 0; i < numRows; ++i)
    std::copy_n(&in[static_cast<size_t>(rows[i]) * width], width, &want[i * width]);
  CUdeviceptr din = uploadValues(in), drows = upload(rows.data(), numRows * 4);
  CUdeviceptr dout = poisoned(numRows * width);
  int n = numRows, w = width;
  void *args[] = {&din, &drows, &dout, &n, &w};
  launch(FusedOp::kGatherRows, numRows, args);
  ASSERT_EQ(download(dout, numRows * width), want);
}

INSTANTIATE_TEST_SUITE_P(
    Types, FusedOpsGpuTest, ::testing::Combine(::testing::Bool(), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<bool, bool>> &i) {
      return std::string(std::get<0>(i.param) ? "bf16" : "f32") +
             (std::get<1>(i.param) ? "_ptx" : "_cubin");
    });

}  // namespace
}  // namespace ingot
