// CpuBackend with an fp8 KV cache: selection from the artifact or the options, pool size,
// accuracy against f32 KV, chunking and batching invariance, copy-on-write and slot moves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "runtime/backend/cpu/cpu_backend.h"
#include "testing/llama_program.h"
#include "testing/step_builder.h"

namespace ingot {
namespace {

using testing::makeStep;
using testing::Sequence;

using testing::LlamaProgramOptions;

/// An in-memory artifact and the bytes it reads.
struct Model {
  std::vector<uint8_t> bytes;
  std::optional<Artifact> opened;
  const Artifact& artifact() const { return *opened; }
};

std::unique_ptr<Model> openLlama(const LlamaProgramOptions& o) {
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(o);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  auto m = std::make_unique<Model>();
  m->bytes = std::move(*bytes);
  StatusOr<Artifact> a = Artifact::openFromMemory(m->bytes);
  EXPECT_TRUE(a.ok()) << a.status().message();
  m->opened.emplace(std::move(*a));
  return m;
}

std::unique_ptr<CpuBackend> makeBackend(const Artifact& a, std::optional<KvDtype> kv,
                                        int64_t blocks = 24) {
  CpuBackendOptions o;
  o.num_kv_blocks = blocks;
  o.num_threads = 2;
  o.kv_dtype = kv;
  StatusOr<std::unique_ptr<CpuBackend>> b = CpuBackend::create(a, o);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? std::move(*b) : nullptr;
}

std::vector<int32_t> randomTokens(int n, int vocab, std::mt19937& rng) {
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

/// Logits of every token of `a` but the last fed in `chunks`, optionally beside `other` in
/// the same steps; the logits of a's last token fed alone after them; and the codes and
/// scales of a's blocks at the end.
struct ChunkRun {
  std::vector<float> logits;
  std::vector<float> next;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};

ChunkRun runChunks(CpuBackend& backend, const std::vector<int32_t>& a,
                   const std::vector<int>& chunks, const std::vector<int32_t>* other = nullptr,
                   const std::vector<int>* otherChunks = nullptr) {
  const int64_t V = backend.vocabSize();
  const int bs = backend.modelShape().kv_block_size;
  Sequence sa{a, {7, 2, 11, 4}};
  Sequence sb{other ? *other : std::vector<int32_t>{}, {1, 9, 5, 0}};
  ChunkRun run;
  for (size_t c = 0; c < chunks.size(); ++c) {
    std::vector<Sequence*> seqs = {&sb, &sa};
    std::vector<int> counts = {0, chunks[c]};
    if (!other || c >= otherChunks->size()) {
      seqs.erase(seqs.begin());
      counts.erase(counts.begin());
    } else {
      counts[0] = (*otherChunks)[c];
    }
    std::vector<float> logits;
    Status st = backend.step(makeStep(seqs, counts, bs), &logits);
    EXPECT_TRUE(st.ok()) << st.message();
    const int offset = seqs.size() == 2 ? counts[0] : 0;
    run.logits.insert(run.logits.end(), logits.begin() + offset * V, logits.end());
  }
  if (sa.done + 1 == static_cast<int>(a.size())) {
    Status st = backend.step(makeStep({&sa}, {1}, bs), &run.next);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  // a's blocks, in its order.
  if (backend.kvDtype() != KvDtype::kFp8E4M3) return run;
  const int64_t L = 2, Hk = 2, Dh = 16;  // LlamaProgramOptions defaults
  const int64_t blockBytes = L * 2 * bs * Hk * Dh, blockScales = L * 2 * Hk;
  for (int32_t b : sa.blocks) {
    run.codes.insert(run.codes.end(), backend.kvCodes() + b * blockBytes,
                     backend.kvCodes() + (b + 1) * blockBytes);
    run.scales.insert(run.scales.end(), backend.kvScales() + b * blockScales,
                      backend.kvScales() + (b + 1) * blockScales);
  }
  return run;
}

double relativeError(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max<double>(err, std::fabs(got[i] - want[i]));
    scale = std::max<double>(scale, std::fabs(want[i]));
  }
  return err / scale;
}

TEST(CpuBackendKvFp8Test, ArtifactDtypeIsTheDefaultAndOptionsOverrideIt) {
  LlamaProgramOptions o;
  auto f32Model = openLlama(o);
  o.kv_dtype = schema::DType::F8E4M3FN;
  auto fp8Model = openLlama(o);
  auto fromArtifact = makeBackend(fp8Model->artifact(), std::nullopt);
  auto fromOption = makeBackend(f32Model->artifact(), KvDtype::kFp8E4M3);
  auto overridden = makeBackend(fp8Model->artifact(), KvDtype::kF32);
  auto plain = makeBackend(f32Model->artifact(), std::nullopt);
  ASSERT_TRUE(fromArtifact && fromOption && overridden && plain);
  EXPECT_EQ(fromArtifact->kvDtype(), KvDtype::kFp8E4M3);
  EXPECT_EQ(fromOption->kvDtype(), KvDtype::kFp8E4M3);
  EXPECT_EQ(overridden->kvDtype(), KvDtype::kF32);
  EXPECT_EQ(plain->kvDtype(), KvDtype::kF32);
  // 24 blocks x 2 layers x 2 x 16 slots x 2 heads x 16 dims: 1 byte per element plus a
  // 4-byte scale per (block, layer, K/V, head), against 4 bytes per element.
  const uint64_t elements = 24ull * 2 * 2 * 16 * 2 * 16;
  EXPECT_EQ(plain->kvPoolBytes(), elements * 4);
  EXPECT_EQ(fromArtifact->kvPoolBytes(), elements + 24ull * 2 * 2 * 2 * 4);
  EXPECT_EQ(fromArtifact->kvPoolFloats(), 0u);

  // Other KV dtypes are refused with the dtype named.
  o.kv_dtype = schema::DType::BF16;
  auto bf16Model = openLlama(o);
  CpuBackendOptions opts;
  opts.num_kv_blocks = 4;
  StatusOr<std::unique_ptr<CpuBackend>> b = CpuBackend::create(bf16Model->artifact(), opts);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("BF16 KV cache"), std::string::npos) << b.status().message();
}

TEST(CpuBackendKvFp8Test, LogitsStayCloseToF32Kv) {
  LlamaProgramOptions o;
  o.seed = 21;
  auto m = openLlama(o);
  std::mt19937 rng(21);
  const std::vector<int32_t> seq = randomTokens(50, 256, rng);
  const ChunkRun f32 = runChunks(*makeBackend(m->artifact(), KvDtype::kF32), seq, {50});
  const ChunkRun fp8 = runChunks(*makeBackend(m->artifact(), KvDtype::kFp8E4M3), seq, {50});
  ASSERT_EQ(f32.logits.size(), fp8.logits.size());
  const double err = relativeError(fp8.logits, f32.logits);
  // E4M3 keeps 3 mantissa bits (relative error <= 2^-4 per element); through two layers of
  // attention the logits move by a few percent of their range at most, and not by nothing.
  EXPECT_LT(err, 0.05);
  EXPECT_GT(err, 0.0);
  GTEST_LOG_(INFO) << "fp8 vs f32 KV: max logit error " << err << " of the largest logit";
}

// Rows are appended one at a time in slot order however a step batches them, so the pool's
// bytes never depend on chunking or batching, and neither does anything computed after.
// Within a chunk, a token reads its block as it is at the end of the step: rows re-encoded
// to a scale grown by later rows of the chunk can differ from what token-by-token decoding
// read, in E4M3's subnormal range only — so logits inside a chunk agree closely, not bitwise.
TEST(CpuBackendKvFp8Test, ChunkingAndBatchingNeverChangeThePool) {
  LlamaProgramOptions o;
  o.seed = 3;
  auto m = openLlama(o);
  std::mt19937 rng(3);
  const std::vector<int32_t> a = randomTokens(41, 256, rng), b = randomTokens(30, 256, rng);
  auto fresh = [&] { return makeBackend(m->artifact(), KvDtype::kFp8E4M3); };
  const ChunkRun whole = runChunks(*fresh(), a, {40});
  const ChunkRun byToken = runChunks(*fresh(), a, std::vector<int>(40, 1));
  const ChunkRun chunked = runChunks(*fresh(), a, {13, 13, 1, 13});
  const std::vector<int> bChunks = {7, 1, 20, 2};
  const ChunkRun batched = runChunks(*fresh(), a, {13, 13, 1, 13}, &b, &bChunks);
  ASSERT_EQ(whole.logits.size(), 40u * 256);
  ASSERT_EQ(whole.next.size(), 256u);
  for (const ChunkRun* other : {&byToken, &chunked, &batched}) {
    ASSERT_EQ(other->logits.size(), whole.logits.size());
    EXPECT_EQ(other->codes, whole.codes);
    EXPECT_EQ(other->scales, whole.scales);
    EXPECT_EQ(std::memcmp(other->next.data(), whole.next.data(), 256 * sizeof(float)), 0);
    EXPECT_LT(relativeError(other->logits, whole.logits), 1e-3);
  }
  // Batching alone changes nothing at all.
  EXPECT_EQ(std::memcmp(batched.logits.data(), chunked.logits.data(),
                        chunked.logits.size() * sizeof(float)), 0);
}

TEST(CpuBackendKvFp8Test, CopiedBlocksAndMovedSlotsDecodeLikeTheOriginals) {
  LlamaProgramOptions o;
  auto m = openLlama(o);
  auto backend = makeBackend(m->artifact(), KvDtype::kFp8E4M3, 12);
  std::mt19937 rng(2);
  Sequence s{randomTokens(22, 256, rng), {0, 1}};
  std::vector<float> logits, viaOriginal, viaCopy;
  ASSERT_TRUE(backend->step(makeStep({&s}, {20}, 16), &logits).ok());
  // Copy-on-write of both blocks: the copy decodes the next token bitwise alike.
  ASSERT_TRUE(backend->copyKvBlocks(0, 5).ok());
  ASSERT_TRUE(backend->copyKvBlocks(1, 6).ok());
  Sequence copy = s;
  copy.blocks = {5, 6};
  ASSERT_TRUE(backend->step(makeStep({&s}, {1}, 16), &viaOriginal).ok());
  ASSERT_TRUE(backend->step(makeStep({&copy}, {1}, 16), &viaCopy).ok());
  EXPECT_EQ(viaOriginal, viaCopy);
  EXPECT_FALSE(backend->copyKvBlocks(0, 12).ok());

  // Slot moves (an accepted speculative path compacted into place): token 21 is computed
  // in a detour block (2, a copy of block 1) and moved to its place in block 1, slot 21;
  // a copy of the sequence writes it there directly (block 6). The move crosses blocks, so
  // the row is decoded and re-encoded under block 1's scale (which grows to block 2's):
  // exact here, so the next token's logits agree with the direct run's.
  Sequence direct = s, detour = s, moved = s;  // 21 tokens done
  direct.blocks = {5, 6};
  detour.blocks = {0, 2};
  std::vector<float> ignored, next1, next2;
  ASSERT_TRUE(backend->step(makeStep({&direct}, {1}, 16), &ignored).ok());
  ASSERT_TRUE(backend->copyKvBlocks(1, 2).ok());
  ASSERT_TRUE(backend->step(makeStep({&detour}, {1}, 16), &ignored).ok());
  ASSERT_TRUE(backend->copyKvSlots({{2 * 16 + 5, 1 * 16 + 5}}).ok());
  moved.done = 22;
  direct.tokens.push_back(9);
  moved.tokens.push_back(9);
  ASSERT_TRUE(backend->step(makeStep({&direct}, {1}, 16), &next1).ok());
  ASSERT_TRUE(backend->step(makeStep({&moved}, {1}, 16), &next2).ok());
  ASSERT_EQ(next1.size(), next2.size());
  EXPECT_LT(relativeError(next2, next1), 1e-6);
  // The tolerance tells a right move from a wrong one: slot 16's row moved to 21 instead.
  ASSERT_TRUE(backend->copyKvSlots({{1 * 16 + 0, 1 * 16 + 5}}).ok());
  moved.done = 22;
  std::vector<float> wrong;
  ASSERT_TRUE(backend->step(makeStep({&moved}, {1}, 16), &wrong).ok());
  EXPECT_GT(relativeError(wrong, next1), 1e-3);
  EXPECT_FALSE(backend->copyKvSlots({{0, 12 * 16}}).ok());
}

}  // namespace
}  // namespace ingot
