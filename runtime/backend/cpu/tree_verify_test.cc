// One query token or many give the same logits, trees included: a token tree verified in
// one pass through the tree mask against each path decoded one token at a time.
#include <gtest/gtest.h>

#include <cstring>

#include "core/region/region_examples.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "testing/llama_program.h"

namespace ingot {
namespace {

constexpr int kVocab = 128;
constexpr int kBlock = 16;

Artifact openTiny(bool tree_mask, std::vector<uint8_t>* storage) {
  testing::LlamaProgramOptions o;
  o.vocab = kVocab;
  o.seed = 3;
  o.block_size = kBlock;
  if (tree_mask) {
    o.mask_bytecode = treeMaskBytecode();
    o.extra_input_ranks = {1, 3};
    o.extra_input_names = {"tree_start", "tree_bits"};
  }
  StatusOr<std::vector<uint8_t>> bytes = testing::buildLlamaArtifact(o);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  *storage = std::move(*bytes);
  StatusOr<Artifact> a = Artifact::openFromMemory(*storage);
  EXPECT_TRUE(a.ok()) << a.status().message();
  return std::move(*a);
}

std::unique_ptr<CpuBackend> backendFor(const Artifact& a) {
  CpuBackendOptions o;
  o.num_threads = 2;
  o.num_kv_blocks = 32;
  StatusOr<std::unique_ptr<CpuBackend>> b = CpuBackend::create(a, o);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return std::move(*b);
}

/// One request whose KV lives in blocks `first_block`, +1, ...: new `tokens` at KV slots
/// [start, start + n) with rope `positions`, logits for every new token.
StepInputs oneRequest(int32_t first_block, int32_t start, const std::vector<int32_t>& tokens,
                      const std::vector<int32_t>& positions) {
  StepInputs in;
  const int32_t n = static_cast<int32_t>(tokens.size());
  in.tokens = tokens;
  in.positions = positions;
  in.num_requests = 1;
  in.max_blocks_per_request = 4;
  for (int32_t b = 0; b < 4; ++b) in.block_tables.push_back(first_block + b);
  in.seq_lens = {start + n};
  in.query_start = {0, n};
  for (int32_t i = 0; i < n; ++i) {
    const int32_t pos = start + i;
    in.slot_mapping.push_back((first_block + pos / kBlock) * kBlock + pos % kBlock);
    in.logit_rows.push_back(i);
  }
  return in;
}

std::vector<int32_t> range(int32_t a, int32_t n) {
  std::vector<int32_t> v(n);
  for (int32_t i = 0; i < n; ++i) v[i] = a + i;
  return v;
}

TEST(TreeVerifyTest, TreeProgramWithoutTreesIsBitwiseCausal) {
  std::vector<uint8_t> s1, s2;
  Artifact causal = openTiny(false, &s1), tree = openTiny(true, &s2);
  auto a = backendFor(causal), b = backendFor(tree);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 37; ++i) prompt.push_back((i * 7 + 3) % kVocab);
  std::vector<float> la, lb;
  ASSERT_TRUE(a->step(oneRequest(0, 0, prompt, range(0, 37)), &la).ok());
  ASSERT_TRUE(b->step(oneRequest(0, 0, prompt, range(0, 37)), &lb).ok());
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
}

TEST(TreeVerifyTest, OnePassOverATreeMatchesDecodingEachPath) {
  std::vector<uint8_t> storage;
  Artifact tree_artifact = openTiny(true, &storage);
  auto verify = backendFor(tree_artifact);
  auto decode = backendFor(tree_artifact);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 29; ++i) prompt.push_back((i * 11 + 5) % kVocab);
  const int32_t P = static_cast<int32_t>(prompt.size());
  std::vector<float> logits;
  ASSERT_TRUE(verify->step(oneRequest(0, 0, prompt, range(0, P)), &logits).ok());

  // Depth-first tree under root r: r -> a -> c -> e, r -> b -> d, b -> f.
  //   flat:    0=r 1=a 2=c 3=e 4=b 5=d 6=f
  const std::vector<int32_t> tokens = {40, 41, 42, 43, 50, 51, 52};
  const std::vector<int32_t> parent = {-1, 0, 1, 2, 0, 4, 4};
  std::vector<int32_t> depth(tokens.size()), positions;
  for (size_t i = 1; i < tokens.size(); ++i) depth[i] = depth[parent[i]] + 1;
  for (int32_t d : depth) positions.push_back(P + d);
  StepInputs in = oneRequest(0, P, tokens, positions);
  std::vector<int32_t> tree_start = {P};
  std::vector<int32_t> bits(tokens.size(), 0);
  for (size_t i = 0; i < tokens.size(); ++i)
    for (int32_t j = static_cast<int32_t>(i); j >= 0; j = parent[j]) bits[i] |= 1 << j;
  const int64_t start_shape[1] = {1};
  const int64_t bits_shape[3] = {1, static_cast<int64_t>(tokens.size()), 1};
  in.extra_inputs = {{RegionType::kI32, start_shape, 1, tree_start.data()},
                     {RegionType::kI32, bits_shape, 3, bits.data()}};
  std::vector<float> tree_logits;
  ASSERT_TRUE(verify->step(in, &tree_logits).ok());

  // Each node's path decoded token by token in its own KV blocks (prompt recomputed):
  // bitwise equal, for the first branch (in consecutive slots, as decoded) and for the
  // others (their keys gathered past the siblings' slots).
  for (size_t node = 0; node < tokens.size(); ++node) {
    std::vector<int32_t> path;
    for (int32_t j = static_cast<int32_t>(node); j >= 0; j = parent[j]) path.insert(path.begin(), tokens[j]);
    const int32_t first_block = 4 + 4 * static_cast<int32_t>(node);
    std::vector<float> row;
    ASSERT_TRUE(decode->step(oneRequest(first_block, 0, prompt, range(0, P)), &row).ok());
    for (size_t k = 0; k < path.size(); ++k) {
      const int32_t pos = P + static_cast<int32_t>(k);
      ASSERT_TRUE(decode->step(oneRequest(first_block, pos, {path[k]}, {pos}), &row).ok());
    }
    EXPECT_EQ(std::memcmp(tree_logits.data() + node * kVocab, row.data(), kVocab * sizeof(float)),
              0)
        << "node " << node;
  }
}

}  // namespace
}  // namespace ingot
