// quant_gemv_bench: decode GEMV (one token) of each quantized weight format against the bf16
// linear on the same shapes, as GB/s of the bytes each reads and as a fraction of the
// measured read bandwidth.
//
//   quant_gemv_bench [--threads N] [--quick] [--in-cache] [--tokens T]
//                    [--simd scalar|avx2|avx512|avx512bf16] [--shapes NxK,NxK...]
//
// Read bandwidth: the best of several passes summing a 1 GiB buffer on all threads with the
// backend's own dot kernel (as cpu_decode_bench). GEMV: y = x W^T for one token through the
// backend's path (activations prepared once, rows split over the pool), cycling through
// enough copies of W (>= 512 MiB) that no call is served from cache. --tokens T > 1 runs
// the same products for T tokens at once (prefill), still reporting weight bytes per
// second. --shapes replaces the default shapes (SmolLM2's MLP and a 4096 square), e.g.
// Phi-3-mini's q, k, v split (3072x3072) against fused (9216x3072).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/backend/cpu/half_float.h"
#include "bench/cpu/read_bandwidth.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/cpu/quant_formats.h"
#include "runtime/backend/cpu/quant_linear.h"
#include "runtime/backend/cpu/thread_pool.h"
#include "runtime/backend/cpu/weight_store.h"

namespace ingot {
namespace {

using bench::Clock;
using bench::measureReadBandwidth;
using bench::seconds;

/// Bytes of weights the GEMVs cycle through, so that each call reads from DRAM
/// (--in-cache: one copy, to see the kernels' compute rate).
int64_t gWorkingSetBytes = int64_t{512} << 20;
/// Tokens per call (1: decode).
int64_t gTokens = 1;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct Timing {
  double seconds_per_call = 0;
  double gbps = 0;
};

/// Calls `once(copy)` until `budget` seconds pass, after touching every copy once.
template <typename Fn>
Timing timeCalls(int64_t copies, int64_t bytes, double budget, Fn once) {
  for (int64_t c = 0; c < copies; ++c) once(c);
  int64_t iters = 0;
  auto t0 = Clock::now();
  do {
    once(iters++);
  } while (seconds(t0, Clock::now()) < budget);
  const double s = seconds(t0, Clock::now()) / iters;
  return {s, bytes / s / 1e9};
}

Timing benchBf16(ThreadPool& pool, const CpuKernels& k, int64_t N, int64_t K, double budget) {
  const int64_t bytes = N * K * 2;
  const int64_t copies = std::max<int64_t>(1, gWorkingSetBytes / bytes);
  std::vector<std::unique_ptr<uint8_t[]>> ws;
  for (int64_t c = 0; c < copies; ++c) {
    ws.emplace_back(new uint8_t[bytes]);
    fillDummyWeight(c, "w", {N, K}, WeightType::kBF16, ws.back().get());
  }
  const int64_t T = gTokens;
  std::vector<float> x(T * K, 0.5f), y(T * N);
  std::vector<uint16_t> xb(T * K);
  LinearArgs a;
  a.x = x.data();
  a.x_stride = K;
  a.w_type = WeightType::kBF16;
  a.y = y.data();
  a.y_stride = N;
  a.T = T;
  a.K = K;
  const LinearKernel kernel = k.linear[static_cast<int>(WeightType::kBF16)];
  return timeCalls(copies, bytes, budget, [&](int64_t c) {
    if (k.bf16_activations) {  // as CpuBackend: rounded once per call
      k.round_to_bf16(x.data(), T * K, xb.data());
      a.x_bf16 = xb.data();
    }
    a.w = ws[c % copies].get();
    pool.parallelRanges(N, 4, [&](int64_t n0, int64_t n1) { kernel(a, n0, n1); });
  });
}

/// One copy of a quantized matrix with plausible random codes and scales.
struct Storage {
  std::vector<uint8_t> codes, scales, zeros;
  std::vector<float> channel;
  QuantMatrix m;
};

std::unique_ptr<Storage> makeQuant(QuantFormat f, int64_t block, int64_t N, int64_t K,
                                   uint64_t seed) {
  auto s = std::make_unique<Storage>();
  QuantMatrix& m = s->m;
  m.format = f;
  m.N = N;
  m.K = K;
  m.block = f == QuantFormat::kFp8 ? K : block;
  uint64_t state = seed;
  s->codes.resize(N * m.rowBytes());
  for (size_t i = 0; i < s->codes.size(); i += 8) {
    const uint64_t r = splitmix64(state);
    std::memcpy(&s->codes[i], &r, std::min<size_t>(8, s->codes.size() - i));
  }
  if (f == QuantFormat::kFp8)
    for (uint8_t& c : s->codes)
      if ((c & 0x7f) == 0x7f) c ^= 1;
  const int64_t groups = m.groups();
  switch (f) {
    case QuantFormat::kInt4Min:
    case QuantFormat::kInt4Zero: {
      std::vector<uint16_t> sc(N * groups, f32ToF16(0.01f)), z(N * groups, f32ToF16(-0.08f));
      if (f == QuantFormat::kInt4Zero) std::fill(z.begin(), z.end(), f32ToF16(8.0f));
      s->scales.resize(sc.size() * 2);
      s->zeros.resize(z.size() * 2);
      std::memcpy(s->scales.data(), sc.data(), s->scales.size());
      std::memcpy(s->zeros.data(), z.data(), s->zeros.size());
      break;
    }
    case QuantFormat::kFp8:
      s->channel.assign(N, 0.01f);
      m.channel_scales = s->channel.data();
      break;
    case QuantFormat::kNvfp4:
      s->scales.assign(N * groups, f32ToE4m3fn(1.0f));
      m.global_scale = 0.01f;
      break;
    case QuantFormat::kMxfp4:
      s->scales.assign(N * groups, 120);
      break;
  }
  m.codes = s->codes.data();
  m.scales = s->scales.empty() ? nullptr : s->scales.data();
  m.zeros = s->zeros.empty() ? nullptr : s->zeros.data();
  return s;
}

Timing benchQuant(ThreadPool& pool, const QuantKernels& k, QuantFormat f, int64_t block, int64_t N,
                  int64_t K, double budget) {
  std::unique_ptr<Storage> first = makeQuant(f, block, N, K, 1);
  const int64_t bytes = first->m.bytes();
  const int64_t copies = std::max<int64_t>(1, gWorkingSetBytes / bytes);
  std::vector<std::unique_ptr<Storage>> ws;
  ws.push_back(std::move(first));
  for (int64_t c = 1; c < copies; ++c) ws.push_back(makeQuant(f, block, N, K, c + 1));
  const int64_t T = gTokens;
  std::vector<float> x(T * K), y(T * N);
  for (int64_t i = 0; i < T * K; ++i) x[i] = 0.5f + 0.001f * static_cast<float>(i % 97);
  const int64_t stride = k.prepared_floats(ws[0]->m);
  std::vector<float> xq(T * stride);
  QuantLinearArgs a;
  a.xq = xq.data();
  a.xq_stride = stride;
  a.y = y.data();
  a.y_stride = N;
  a.T = T;
  return timeCalls(copies, bytes, budget, [&](int64_t c) {
    a.w = &ws[c % copies]->m;
    for (int64_t t = 0; t < T; ++t)  // as CpuBackend: once per call
      k.prepare(*a.w, x.data() + t * K, xq.data() + t * stride);
    pool.parallelRanges(N, 4, [&](int64_t n0, int64_t n1) { k.linear(a, n0, n1); });
  });
}

int run(int argc, char** argv) {
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool quick = false;
  SimdLevel level = detectSimdLevel();
  std::vector<std::array<int64_t, 2>> shapes = {{576, 1536}, {1536, 576}, {4096, 4096}};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--in-cache")) {
      gWorkingSetBytes = 0;
    } else if (!std::strcmp(argv[i], "--tokens") && i + 1 < argc) {
      gTokens = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--simd") && i + 1 < argc) {
      const std::string s = argv[++i];
      const SimdLevel wanted = s == "scalar" ? SimdLevel::kScalar
                               : s == "avx2" ? SimdLevel::kAvx2
                               : s == "avx512" ? SimdLevel::kAvx512
                                               : SimdLevel::kAvx512Bf16;
      if (wanted < level) level = wanted;
    } else if (!std::strcmp(argv[i], "--shapes") && i + 1 < argc) {
      shapes.clear();
      for (const char* p = argv[++i]; *p;) {
        char* end = nullptr;
        const long n = std::strtol(p, &end, 10);
        const long kk = *end == 'x' ? std::strtol(end + 1, &end, 10) : 0;
        if (n <= 0 || kk <= 0 || (*end && *end != ',')) {
          std::fprintf(stderr, "--shapes: expected NxK[,NxK...], got '%s'\n", argv[i]);
          return 2;
        }
        shapes.push_back({n, kk});
        p = *end ? end + 1 : end;
      }
    } else {
      std::fprintf(stderr,
                   "usage: quant_gemv_bench [--threads N] [--quick] [--in-cache] [--tokens T] "
                   "[--simd LEVEL] [--shapes NxK,NxK...]\n");
      return 2;
    }
  }
  const CpuKernels& k = cpuKernels(level);
  const QuantKernels& qk = quantKernels(level);
  ThreadPool pool(threads);
  std::printf("quant_gemv_bench: %d threads, simd %s, %ld token(s) per call\n", threads,
              simdLevelName(level), static_cast<long>(gTokens));
  const double bw = measureReadBandwidth(pool, k, quick ? 3 : 8);
  std::printf("measured read bandwidth (1 GiB sum): %.1f GB/s\n\n", bw);
  std::printf("%-12s %-10s %9s %9s %8s %9s %9s\n", "format", "NxK", "MB read", "us/call", "GB/s",
              "of bw", "vs bf16");
  const double budget = quick ? 0.3 : 1.0;
  struct Format {
    const char* name;
    QuantFormat format;
    int64_t block;
  };
  const Format formats[] = {{"int4-min/32", QuantFormat::kInt4Min, 32},
                            {"int4-zero/128", QuantFormat::kInt4Zero, 128},
                            {"fp8/channel", QuantFormat::kFp8, 0},
                            {"nvfp4", QuantFormat::kNvfp4, 16},
                            {"mxfp4", QuantFormat::kMxfp4, 32}};
  for (const auto& s : shapes) {
    const Timing bf16 = benchBf16(pool, k, s[0], s[1], budget);
    const std::string shape = std::to_string(s[0]) + "x" + std::to_string(s[1]);
    std::printf("%-12s %-10s %9.2f %9.1f %8.1f %8.0f%% %8.2fx\n", "bf16", shape.c_str(),
                s[0] * s[1] * 2 / 1e6, bf16.seconds_per_call * 1e6, bf16.gbps, 100 * bf16.gbps / bw,
                1.0);
    for (const Format& f : formats) {
      const Timing q = benchQuant(pool, qk, f.format, f.block, s[0], s[1], budget);
      std::printf("%-12s %-10s %9.2f %9.1f %8.1f %8.0f%% %8.2fx\n", f.name, shape.c_str(),
                  q.gbps * q.seconds_per_call * 1e3, q.seconds_per_call * 1e6, q.gbps,
                  100 * q.gbps / bw, bf16.seconds_per_call / q.seconds_per_call);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace ingot

int main(int argc, char** argv) { return ingot::run(argc, argv); }
