// w8a8_accuracy: what per-token E4M3 activations (the CUDA backend's W8A8 fp8 linears) cost
// against weight-only fp8, measured on the CPU backend with teacher-forced logits.
//
//   w8a8_accuracy MODEL.ingot TEXT.txt [--ctx N] [--max-tokens N] [--threads N]
//
// MODEL must hold fp8 linear weights (`ingot compile --quant fp8`). The text is tokenized
// with the artifact's tokenizer and scored in disjoint windows of --ctx tokens twice: with
// the CPU's fp8 linear kernels as they are (weight-only), and with a kernel table whose
// activation step first rounds every token's row to E4M3 with one scale per row (absmax /
// 448, the quantizer of codegen/cuda/kernels/fp8_w8a8.cuh, the very encoder) before the
// same weight-only product. With exact accumulation that is the W8A8 product; the GPU
// accumulates in f32 instead, a far smaller difference. Prints both perplexities, their
// ratio, the mean KL(weight-only || W8A8) per token and the top-1 agreement.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/quant_formats.h"
#include "runtime/backend/cpu/quant_linear.h"
#include "testing/step_builder.h"
#include "testing/w8a8_emulation.h"
#include "runtime/eval/perplexity.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/tokenizer_data.h"

namespace ingot {
namespace {

struct Scores {
  std::vector<std::vector<float>> logits;  // per window: [tokens, vocab]
  double nll = 0;
  int64_t scored = 0;
  double seconds = 0;
};

Status score(const Artifact& artifact, const QuantKernels* table, const std::vector<int32_t>& tokens,
             int64_t ctx, int threads, Scores* out) {
  CpuBackendOptions o;
  o.num_threads = threads;
  o.num_kv_blocks = ctx / artifact.manifest().config()->kv_block_size() + 2;
  o.quant_kernels = table;
  StatusOr<std::unique_ptr<CpuBackend>> b = CpuBackend::create(artifact, o);
  if (!b.ok()) return b.status();
  const int block = artifact.manifest().config()->kv_block_size();
  const int64_t vocab = artifact.manifest().config()->vocab_size();
  const auto start = std::chrono::steady_clock::now();
  for (size_t w0 = 0; w0 + 1 < tokens.size(); w0 += static_cast<size_t>(ctx)) {
    const size_t n = std::min<size_t>(static_cast<size_t>(ctx), tokens.size() - w0);
    if (n < 2) break;
    testing::Sequence seq;
    seq.tokens.assign(tokens.begin() + w0, tokens.begin() + w0 + n);
    for (int32_t i = 0; i * block < static_cast<int32_t>(n); ++i) seq.blocks.push_back(i);
    std::vector<float> logits;
    INGOT_RETURN_IF_ERROR((*b)->step(testing::makeStep({&seq}, {static_cast<int>(n)}, block), &logits));
    for (size_t i = 0; i + 1 < n; ++i) {
      out->nll += tokenNll(logits.data() + i * vocab, vocab, seq.tokens[i + 1]);
      ++out->scored;
    }
    out->logits.push_back(std::move(logits));
  }
  out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return okStatus();
}

int run(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: w8a8_accuracy MODEL.ingot TEXT.txt [--ctx N] [--max-tokens N] "
                         "[--threads N]\n");
    return 2;
  }
  int64_t ctx = 512, maxTokens = 0;
  int threads = 0;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (flag == "--ctx") ctx = v;
    else if (flag == "--max-tokens") maxTokens = v;
    else if (flag == "--threads") threads = static_cast<int>(v);
    else {
      std::fprintf(stderr, "w8a8_accuracy: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  StatusOr<Artifact> artifact = Artifact::open(argv[1]);
  if (!artifact.ok()) {
    std::fprintf(stderr, "w8a8_accuracy: %s\n", artifact.status().message().c_str());
    return 1;
  }
  std::ifstream file(argv[2]);
  if (!file) {
    std::fprintf(stderr, "w8a8_accuracy: cannot read %s\n", argv[2]);
    return 1;
  }
  std::stringstream text;
  text << file.rdbuf();
  StatusOr<TokenizerData> data = tokenizerDataFromManifest(artifact->manifest().tokenizer());
  if (!data.ok()) {
    std::fprintf(stderr, "w8a8_accuracy: %s\n", data.status().message().c_str());
    return 1;
  }
  StatusOr<Tokenizer> tokenizer = Tokenizer::create(std::move(data).value());
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "w8a8_accuracy: %s\n", tokenizer.status().message().c_str());
    return 1;
  }
  std::vector<int32_t> tokens = tokenizer->encode(text.str(), /*addSpecial=*/true, /*parseSpecial=*/false);
  if (maxTokens > 0 && static_cast<int64_t>(tokens.size()) > maxTokens) tokens.resize(maxTokens);

  const QuantKernels* gBase = &quantKernels(detectSimdLevel());
  const QuantKernels& w8a8Table = testing::w8a8EmulatingQuantKernels();
  Scores weightOnly, w8a8;
  for (auto [table, out] : {std::pair{gBase, &weightOnly}, std::pair{static_cast<const QuantKernels*>(&w8a8Table), &w8a8}}) {
    Status s = score(*artifact, table, tokens, ctx, threads, out);
    if (!s.ok()) {
      std::fprintf(stderr, "w8a8_accuracy: %s\n", s.message().c_str());
      return 1;
    }
  }
  const int64_t vocab = artifact->manifest().config()->vocab_size();
  double kl = 0;
  int64_t agree = 0, rows = 0;
  for (size_t w = 0; w < weightOnly.logits.size(); ++w) {
    const std::vector<float>& a = weightOnly.logits[w];
    const std::vector<float>& b = w8a8.logits[w];
    for (size_t r = 0; r + 1 < a.size() / vocab; ++r) {
      const float* pa = a.data() + r * vocab;
      const float* pb = b.data() + r * vocab;
      double ma = pa[0], mb = pb[0];
      int64_t ia = 0, ib = 0;
      for (int64_t v = 1; v < vocab; ++v) {
        if (pa[v] > ma) ma = pa[v], ia = v;
        if (pb[v] > mb) mb = pb[v], ib = v;
      }
      double za = 0, zb = 0;
      for (int64_t v = 0; v < vocab; ++v) za += std::exp(pa[v] - ma), zb += std::exp(pb[v] - mb);
      double k = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        const double la = pa[v] - ma - std::log(za), lb = pb[v] - mb - std::log(zb);
        k += std::exp(la) * (la - lb);
      }
      kl += k;
      agree += ia == ib;
      ++rows;
    }
  }
  const double pplA = std::exp(weightOnly.nll / weightOnly.scored);
  const double pplB = std::exp(w8a8.nll / w8a8.scored);
  std::printf("w8a8_accuracy: %s, %s: %lld tokens scored in windows of %lld\n", argv[1], argv[2],
              static_cast<long long>(weightOnly.scored), static_cast<long long>(ctx));
  std::printf("  weight-only fp8 perplexity %.4f (%.1f s)\n", pplA, weightOnly.seconds);
  std::printf("  W8A8 (per-token E4M3 activations) perplexity %.4f (%.1f s)\n", pplB, w8a8.seconds);
  std::printf("  ratio %.4f, mean KL(weight-only || W8A8) %.5f nats/token, top-1 agreement %.2f%%\n",
              pplB / pplA, kl / rows, 100.0 * agree / rows);
  return 0;
}

}  // namespace
}  // namespace ingot

int main(int argc, char** argv) { return ingot::run(argc, argv); }
