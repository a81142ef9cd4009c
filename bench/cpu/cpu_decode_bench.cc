// cpu_decode_bench: decode-time GEMV bandwidth per weight dtype and whole-model decode
// tokens/s on SmolLM2-135M-shaped layers, each as a fraction of measured read bandwidth.
//
//   cpu_decode_bench [--threads N] [--quick] [--model-only]
//
// Read bandwidth: the best of several passes summing (dot with itself) a 1 GiB buffer on
// all threads with the backend's own SIMD kernels. GEMV: y = x W^T for one token, cycling
// through enough copies of W (>= 512 MiB) that no layer is served from cache, as in a real
// decode step. Model: a dummy-weights artifact with SmolLM2-135M's shapes (30 layers,
// hidden 576, 9 heads / 3 KV heads of 64, MLP 1536, vocab 49152, tied embeddings),
// 64 tokens of prefill then timed decode; bytes per token = every linear and logits matrix
// (packed codes and scales for the quantized rows, whose embeddings and head stay bf16).
// Quantized GEMVs on their own: quant_gemv_bench.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/backend/cpu/cpu_backend.h"
#include "bench/cpu/read_bandwidth.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/cpu/thread_pool.h"
#include "runtime/backend/cpu/weight_store.h"
#include "testing/llama_program.h"

namespace ingot {
namespace {

using bench::Clock;
using bench::measureReadBandwidth;
using bench::seconds;

struct GemvResult {
  double gbps;
};

GemvResult benchGemv(ThreadPool& pool, const CpuKernels& k, WeightType type, int64_t N, int64_t K,
                     double seconds_budget) {
  const int64_t elemBytes = type == WeightType::kF32 ? 4 : 2;
  const int64_t bytes = N * K * elemBytes;
  const int64_t copies = std::max<int64_t>(1, (int64_t{512} << 20) / bytes);
  std::vector<std::unique_ptr<uint8_t[]>> ws;
  for (int64_t c = 0; c < copies; ++c) {
    ws.emplace_back(new uint8_t[bytes]);
    fillDummyWeight(c, "w", {N, K}, type, ws.back().get());
  }
  std::vector<float> x(K, 0.5f), y(N);
  LinearArgs a;
  a.x = x.data();
  a.x_stride = K;
  a.w_type = type;
  a.y = y.data();
  a.y_stride = N;
  a.T = 1;
  a.K = K;
  const LinearKernel kernel = k.linear[static_cast<int>(type)];
  std::vector<uint16_t> xb(K);
  auto once = [&](int64_t c) {
    if (k.bf16_activations && type == WeightType::kBF16) {  // as CpuBackend: once per call
      k.round_to_bf16(x.data(), K, xb.data());
      a.x_bf16 = xb.data();
    }
    a.w = ws[c % copies].get();
    pool.parallelRanges(N, 4, [&](int64_t n0, int64_t n1) { kernel(a, n0, n1); });
  };
  for (int64_t c = 0; c < copies; ++c) once(c);  // warm up: page in every copy
  int64_t iters = 0;
  auto t0 = Clock::now();
  do {
    once(iters++);
  } while (seconds(t0, Clock::now()) < seconds_budget);
  const double s = seconds(t0, Clock::now());
  return {static_cast<double>(bytes) * iters / s / 1e9};
}

const char* typeName(WeightType t) {
  return t == WeightType::kF32 ? "f32" : t == WeightType::kBF16 ? "bf16" : "f16";
}

struct DecodeResult {
  double tokens_per_s = 0;
  double gbps = 0;
  uint64_t bytes = 0;
};

StatusOr<DecodeResult> benchModel(schema::DType dtype, schema::QuantKind quant, int threads,
                                  int decode_tokens) {
  testing::LlamaProgramOptions o;
  o.vocab = 49152;
  o.hidden = 576;
  o.intermediate = 1536;
  o.layers = 30;
  o.heads = 9;
  o.kv_heads = 3;
  o.head_dim = 64;
  o.max_context = 8192;
  o.rope_theta = 100000.0;
  o.weight_dtype = dtype;
  o.linear_quant = quant;  // int4: groups of 32 with mins (GGUF Q4_1)
  o.dummy_weights = true;
  o.seed = 42;
  INGOT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, testing::buildLlamaArtifact(o));
  INGOT_ASSIGN_OR_RETURN(Artifact artifact, Artifact::openFromMemory(bytes));
  CpuBackendOptions opts;
  opts.num_threads = threads;
  opts.num_kv_blocks = 16;
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> backend, CpuBackend::create(artifact, opts));
  const int bs = backend->modelShape().kv_block_size;
  const int prompt = 64;
  std::vector<int32_t> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(15 - i);
  auto stepFor = [&](int first, int count) {
    StepInputs s;
    s.num_requests = 1;
    s.max_blocks_per_request = 16;
    s.block_tables = blocks;
    for (int i = 0; i < count; ++i) {
      const int slot = first + i;
      s.tokens.push_back((slot * 7919) % 49152);
      s.positions.push_back(slot);
      s.slot_mapping.push_back(blocks[slot / bs] * bs + slot % bs);
    }
    s.seq_lens = {first + count};
    s.query_start = {0, count};
    s.logit_rows = {count - 1};
    return s;
  };
  std::vector<float> logits;
  INGOT_RETURN_IF_ERROR(backend->step(stepFor(0, prompt), &logits));
  INGOT_RETURN_IF_ERROR(backend->step(stepFor(prompt, 1), &logits));  // warm
  auto t0 = Clock::now();
  for (int i = 1; i <= decode_tokens; ++i)
    INGOT_RETURN_IF_ERROR(backend->step(stepFor(prompt + i, 1), &logits));
  const double s = seconds(t0, Clock::now());
  DecodeResult r;
  r.tokens_per_s = decode_tokens / s;
  r.bytes = backend->matrixBytes();
  r.gbps = r.bytes * r.tokens_per_s / 1e9;
  return r;
}

int run(int argc, char** argv) {
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool quick = false, modelOnly = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--model-only")) modelOnly = true;
    else {
      std::fprintf(stderr, "usage: cpu_decode_bench [--threads N] [--quick] [--model-only]\n");
      return 2;
    }
  }
  const SimdLevel level = detectSimdLevel();
  const CpuKernels& k = cpuKernels(level);
  ThreadPool pool(threads);
  std::printf("cpu_decode_bench: %d threads, simd %s\n", threads, simdLevelName(level));
  const double bw = measureReadBandwidth(pool, k, quick ? 3 : 8);
  std::printf("measured read bandwidth (1 GiB sum): %.1f GB/s\n\n", bw);

  std::printf("%-6s %-12s %10s %8s\n", "dtype", "layer NxK", "GB/s", "ratio");
  const int64_t shapes[][2] = {{576, 576}, {1536, 576}, {576, 1536}, {49152, 576}};
  for (WeightType type : {WeightType::kF32, WeightType::kBF16, WeightType::kF16}) {
    if (modelOnly) break;
    for (const auto& s : shapes) {
      GemvResult r = benchGemv(pool, k, type, s[0], s[1], quick ? 0.3 : 1.0);
      std::printf("%-6s %5ldx%-6ld %10.1f %7.0f%%\n", typeName(type), static_cast<long>(s[0]),
                  static_cast<long>(s[1]), r.gbps, 100 * r.gbps / bw);
    }
  }
  std::printf("\n%-10s %10s %12s %10s %8s\n", "model", "tokens/s", "MB/token", "GB/s", "ratio");
  // Quantized rows: every linear quantized, embeddings and the (tied) head bf16.
  const struct {
    const char* name;
    schema::DType dtype;
    schema::QuantKind quant;
  } models[] = {{"F32", schema::DType::F32, schema::QuantKind::None},
                {"BF16", schema::DType::BF16, schema::QuantKind::None},
                {"int4", schema::DType::BF16, schema::QuantKind::Int4Group},
                {"fp8", schema::DType::BF16, schema::QuantKind::PerChannel},
                {"nvfp4", schema::DType::BF16, schema::QuantKind::Nvfp4},
                {"mxfp4", schema::DType::BF16, schema::QuantKind::Mxfp4}};
  for (const auto& m : models) {
    StatusOr<DecodeResult> r = benchModel(m.dtype, m.quant, threads, quick ? 8 : 32);
    if (!r.ok()) {
      std::fprintf(stderr, "model bench failed: %s\n", r.status().message().c_str());
      return 1;
    }
    std::printf("%-10s %10.1f %12.1f %10.1f %7.0f%%\n", m.name, r->tokens_per_s, r->bytes / 1e6,
                r->gbps, 100 * r->gbps / bw);
  }
  return 0;
}

}  // namespace
}  // namespace ingot

int main(int argc, char** argv) { return ingot::run(argc, argv); }
