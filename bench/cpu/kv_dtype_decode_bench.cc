// kv_dtype_decode_bench: decode tokens/s of one artifact with an f32 and an fp8 KV cache at
// a long context, measured A/B (alternating steps) so a busy machine slows both alike.
//
//   kv_dtype_decode_bench ARTIFACT [--context N] [--tokens M] [--threads T]
//
// Each backend prefills the same N pseudo-random tokens (chunks of 256), then the two
// decode M tokens one step each, alternating f32 / fp8; every step is timed. Prints the
// median and best ms/token of each, the tokens/s of the medians, and the KV bytes a decode
// token reads (every layer's K and V of the context) next to the matrix bytes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/cpu/cpu_backend.h"

namespace ingot {
namespace {

using Clock = std::chrono::steady_clock;

/// One request over blocks 0, 1, 2, ...: `tokens` at KV slots [start, start + n).
StepInputs stepFor(const std::vector<int32_t>& tokens, int32_t start, int32_t blockSize,
                   int32_t maxBlocks) {
  StepInputs in;
  const int32_t n = static_cast<int32_t>(tokens.size());
  in.tokens = tokens;
  in.num_requests = 1;
  in.max_blocks_per_request = maxBlocks;
  for (int32_t b = 0; b < maxBlocks; ++b) in.block_tables.push_back(b);
  in.seq_lens = {start + n};
  in.query_start = {0, n};
  for (int32_t i = 0; i < n; ++i) {
    in.positions.push_back(start + i);
    in.slot_mapping.push_back(start + i);
  }
  in.logit_rows = {n - 1};
  return in;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kv_dtype_decode_bench ARTIFACT [--context N] [--tokens M] "
                         "[--threads T]\n");
    return 2;
  }
  int32_t context = 2048, tokens = 32;
  int threads = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--context") context = value;
    else if (flag == "--tokens") tokens = value;
    else if (flag == "--threads") threads = value;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (context < 1 || tokens < 1) {
    std::fprintf(stderr, "--context and --tokens must be positive\n");
    return 2;
  }
  StatusOr<Artifact> artifact = Artifact::open(argv[1]);
  if (!artifact.ok()) {
    std::fprintf(stderr, "%s\n", artifact.status().message().c_str());
    return 1;
  }
  const int32_t bs = std::max(1, artifact->manifest().config()->kv_block_size());
  const int32_t blocks = (context + tokens + bs - 1) / bs;
  std::unique_ptr<CpuBackend> backends[2];
  const KvDtype dtypes[2] = {KvDtype::kF32, KvDtype::kFp8E4M3};
  std::mt19937 rng(1);
  std::vector<int32_t> prompt(context);
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % 1000);
  std::vector<float> logits;
  for (int k = 0; k < 2; ++k) {
    CpuBackendOptions o;
    o.num_threads = threads;
    o.num_kv_blocks = blocks;
    o.kv_dtype = dtypes[k];
    StatusOr<std::unique_ptr<CpuBackend>> b = CpuBackend::create(*artifact, o);
    if (!b.ok()) {
      std::fprintf(stderr, "%s\n", b.status().message().c_str());
      return 1;
    }
    backends[k] = std::move(*b);
    for (int32_t s = 0; s < context; s += 256) {
      std::vector<int32_t> chunk(prompt.begin() + s,
                                 prompt.begin() + std::min<int32_t>(s + 256, context));
      Status st = backends[k]->step(stepFor(chunk, s, bs, blocks), &logits);
      if (!st.ok()) {
        std::fprintf(stderr, "prefill: %s\n", st.message().c_str());
        return 1;
      }
    }
  }
  std::vector<double> ms[2];
  int32_t next[2] = {1, 1};
  for (int32_t i = 0; i < tokens; ++i)
    for (int k = 0; k < 2; ++k) {
      const auto t0 = Clock::now();
      Status st = backends[k]->step(stepFor({next[k]}, context + i, bs, blocks), &logits);
      ms[k].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (!st.ok()) {
        std::fprintf(stderr, "decode: %s\n", st.message().c_str());
        return 1;
      }
      next[k] = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) -
                                     logits.begin());
    }
  std::printf("context %d, %d decode tokens each, %d threads, %s\n", context, tokens,
              backends[0]->numThreads(), simdLevelName(backends[0]->simdLevel()));
  std::printf("kv    median ms  best ms  tok/s (median)  KV MiB/token  matrix MiB/token\n");
  for (int k = 0; k < 2; ++k) {
    // Bytes of the pool per token slot, times the context a decode token reads.
    const double perSlot =
        static_cast<double>(backends[k]->kvPoolBytes()) / (static_cast<double>(blocks) * bs);
    std::printf("%-5s %9.2f %8.2f %15.1f %13.1f %17.1f\n", kvDtypeName(dtypes[k]),
                median(ms[k]), *std::min_element(ms[k].begin(), ms[k].end()),
                1000.0 / median(ms[k]), perSlot * context / (1 << 20),
                backends[k]->matrixBytes() / double(1 << 20));
  }
  std::printf("fp8 / f32 tok/s: %.3f (median), %.3f (best)\n", median(ms[0]) / median(ms[1]),
              *std::min_element(ms[0].begin(), ms[0].end()) /
                  *std::min_element(ms[1].begin(), ms[1].end()));
  return 0;
}

}  // namespace
}  // namespace ingot

int main(int argc, char** argv) { return ingot::run(argc, argv); }
