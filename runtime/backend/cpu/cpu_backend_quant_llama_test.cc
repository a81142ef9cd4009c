// The CPU backend on Llamas whose every linear is quantized: each format against its
// dequantized twin, one token or many alone or batched, seeded dummy weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "runtime/backend/cpu/cpu_backend_quant_test_util.h"
#include "testing/llama_program.h"

namespace ingot {
namespace {

using quant_test::FormatCase;
using quant_test::kFormats;
using quant_test::makeBackend;
using quant_test::oneRequest;
using quant_test::relativeError;
using quant_test::supportedLevels;
using schema::DType;
using schema::QuantKind;
using schema::ZeroKind;

testing::LlamaProgramOptions quantLlama(const FormatCase& f) {
  testing::LlamaProgramOptions o;
  o.hidden = 128;
  o.intermediate = 256;
  o.heads = 4;
  o.kv_heads = 2;
  o.head_dim = 32;
  o.linear_quant = f.kind;
  o.quant_group = f.group;
  o.quant_zero_kind = f.zero_kind;
  o.quant_scale_dtype = f.scale_dtype;
  o.qkv_bias = true;
  o.seed = 11;
  return o;
}

Artifact openLlama(const testing::LlamaProgramOptions& o) {
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(o);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  StatusOr<Artifact> a = Artifact::openFromMemory(*bytes);
  EXPECT_TRUE(a.ok()) << a.status().message();
  return std::move(*a);
}

TEST(CpuBackendQuantTest, QuantizedLlamaMatchesItsDequantizedTwin) {
  std::mt19937 rng(53);
  std::vector<int32_t> tokens(17);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 256);
  for (const FormatCase& f : kFormats) {
    SCOPED_TRACE(f.name);
    testing::LlamaProgramOptions o = quantLlama(f);
    Artifact quant = openLlama(o);
    o.dequantized_linears = true;
    Artifact twin = openLlama(o);
    for (SimdLevel level : supportedLevels()) {
      SCOPED_TRACE(simdLevelName(level));
      auto qb = makeBackend(quant, level), tb = makeBackend(twin, level);
      ASSERT_TRUE(qb && tb);
      EXPECT_LT(qb->matrixBytes(), tb->matrixBytes() / 2);
      std::vector<float> got, want;
      ASSERT_TRUE(qb->step(oneRequest(tokens, 0, o.block_size), &got).ok());
      ASSERT_TRUE(tb->step(oneRequest(tokens, 0, o.block_size), &want).ok());
      // bf16-activation tables round only the bf16 head here (tied f32 embeddings: none).
      std::vector<double> wantD(want.begin(), want.end());
      EXPECT_LT(relativeError(got, wantD), 2e-5);
    }
  }
}

/// seqA's logits rows, fed in `chunks`, alone or each step batched with another request.
std::vector<float> feed(CpuBackend& backend, const std::vector<int32_t>& a,
                        const std::vector<int>& chunks, const std::vector<int32_t>* other) {
  const int bs = backend.modelShape().kv_block_size;
  const int64_t V = backend.vocabSize();
  std::vector<float> rows;
  int done = 0, otherDone = 0;
  for (int c : chunks) {
    StepInputs s;
    s.num_requests = other ? 2 : 1;
    s.max_blocks_per_request = 4;
    // seqA in blocks 4..7, the other request in blocks 0..3 and first in the batch.
    std::vector<int32_t> counts;
    std::vector<const std::vector<int32_t>*> seqs;
    std::vector<int> starts;
    if (other) {
      seqs.push_back(other);
      counts.push_back(3);
      starts.push_back(otherDone);
    }
    seqs.push_back(&a);
    counts.push_back(c);
    starts.push_back(done);
    s.query_start.push_back(0);
    for (size_t r = 0; r < seqs.size(); ++r) {
      const int firstBlock = seqs[r] == &a ? 4 : 0;
      for (int i = 0; i < counts[r]; ++i) {
        const int slot = starts[r] + i;
        s.tokens.push_back((*seqs[r])[slot]);
        s.positions.push_back(slot);
        s.slot_mapping.push_back((firstBlock + slot / bs) * bs + slot % bs);
        s.logit_rows.push_back(static_cast<int32_t>(s.tokens.size() - 1));
      }
      s.seq_lens.push_back(starts[r] + counts[r]);
      s.query_start.push_back(static_cast<int32_t>(s.tokens.size()));
      for (int b = 0; b < 4; ++b) s.block_tables.push_back(firstBlock + b);
    }
    std::vector<float> logits;
    Status st = backend.step(s, &logits);
    EXPECT_TRUE(st.ok()) << st.message();
    const size_t offset = other ? 3 : 0;
    rows.insert(rows.end(), logits.begin() + offset * V, logits.end());
    done += c;
    if (other) otherDone += 3;
  }
  return rows;
}

TEST(CpuBackendQuantTest, OneTokenOrManyAloneOrBatchedGiveBitwiseTheSameLogits) {
  std::mt19937 rng(59);
  std::vector<int32_t> a(24), b(30);
  for (int32_t& t : a) t = static_cast<int32_t>(rng() % 256);
  for (int32_t& t : b) t = static_cast<int32_t>(rng() % 256);
  for (const FormatCase& f : kFormats) {
    SCOPED_TRACE(f.name);
    Artifact art = openLlama(quantLlama(f));
    auto fresh = [&] { return makeBackend(art, detectSimdLevel()); };
    const std::vector<float> alone = feed(*fresh(), a, {8, 8, 8}, nullptr);
    const std::vector<float> batched = feed(*fresh(), a, {8, 8, 8}, &b);
    const std::vector<float> byToken = feed(*fresh(), a, std::vector<int>(24, 1), nullptr);
    ASSERT_EQ(alone.size(), batched.size());
    EXPECT_EQ(alone, batched) << "batched with another request";
    EXPECT_EQ(alone, byToken) << "one token per step";
  }
}

TEST(CpuBackendQuantTest, DummyQuantizedWeightsAreSeededAndFinite) {
  for (const FormatCase& f : kFormats) {
    SCOPED_TRACE(f.name);
    testing::LlamaProgramOptions o = quantLlama(f);
    o.dummy_weights = true;
    o.seed = 5;
    Artifact a = openLlama(o);
    ASSERT_FALSE(a.hasBlob());
    const std::vector<int32_t> tokens = {1, 50, 200, 7, 7};
    std::vector<float> one, two, other;
    ASSERT_TRUE(makeBackend(a, detectSimdLevel())->step(oneRequest(tokens, 0, 16), &one).ok());
    ASSERT_TRUE(makeBackend(a, SimdLevel::kScalar)->step(oneRequest(tokens, 0, 16), &two).ok());
    double scale = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      ASSERT_TRUE(std::isfinite(one[i]));
      ASSERT_NEAR(one[i], two[i], 1e-3 * (1 + std::abs(two[i])));
      scale = std::max<double>(scale, std::abs(one[i]));
    }
    // Dense-sized weights: logits neither vanish nor blow up.
    EXPECT_GT(scale, 0.05);
    EXPECT_LT(scale, 100.0);
    o.seed = 6;
    Artifact b = openLlama(o);
    ASSERT_TRUE(makeBackend(b, detectSimdLevel())->step(oneRequest(tokens, 0, 16), &other).ok());
    EXPECT_NE(one, other);
  }
}

}  // namespace
}  // namespace ingot
