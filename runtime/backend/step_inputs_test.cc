// StepInputs::validate: well-formed steps pass, each kind of malformed step is an error.
#include "runtime/backend/step_inputs.h"

#include <gtest/gtest.h>

#include <functional>

namespace ingot {
namespace {

const ModelShape kShape{100, 4};
constexpr int64_t kBlocks = 8;

/// Two requests: #0 prefills 3 tokens (blocks 5), #1 decodes its 6th token (blocks 2, 7).
StepInputs goodStep() {
  StepInputs s;
  s.tokens = {1, 2, 3, 99};
  s.positions = {0, 1, 2, 5};
  s.num_requests = 2;
  s.max_blocks_per_request = 2;
  s.block_tables = {5, -1, 2, 7};
  s.seq_lens = {3, 6};
  s.query_start = {0, 3, 4};
  s.slot_mapping = {20, 21, 22, 29};
  s.logit_rows = {2, 3};
  return s;
}

TEST(StepInputsTest, AcceptsWellFormedStep) {
  EXPECT_TRUE(goodStep().validate(kShape, kBlocks).ok());
  StepInputs empty;
  empty.query_start = {0};
  EXPECT_TRUE(empty.validate(kShape, kBlocks).ok());
}

TEST(StepInputsTest, RejectsEachMalformedField) {
  const std::vector<std::pair<const char*, std::function<void(StepInputs&)>>> cases = {
      {"positions size", [](StepInputs& s) { s.positions.pop_back(); }},
      {"slot size", [](StepInputs& s) { s.slot_mapping.push_back(1); }},
      {"block table size", [](StepInputs& s) { s.block_tables.pop_back(); }},
      {"seq_lens size", [](StepInputs& s) { s.seq_lens.pop_back(); }},
      {"query_start size", [](StepInputs& s) { s.query_start.pop_back(); }},
      {"query_start[0]", [](StepInputs& s) { s.query_start[0] = 1; }},
      {"query_start end", [](StepInputs& s) { s.query_start[2] = 3; }},
      {"query_start decreasing", [](StepInputs& s) { s.query_start = {0, 5, 4}; }},
      {"seq_len below new tokens", [](StepInputs& s) { s.seq_lens[0] = 2; }},
      {"negative seq_len", [](StepInputs& s) { s.seq_lens[1] = -1; }},
      {"seq_len beyond block row", [](StepInputs& s) { s.seq_lens[1] = 9; }},
      {"block id too large", [](StepInputs& s) { s.block_tables[3] = kBlocks; }},
      {"negative block id", [](StepInputs& s) { s.block_tables[0] = -1; }},
      {"token id", [](StepInputs& s) { s.tokens[1] = 100; }},
      {"negative token id", [](StepInputs& s) { s.tokens[1] = -3; }},
      {"negative position", [](StepInputs& s) { s.positions[0] = -1; }},
      {"slot outside pool", [](StepInputs& s) { s.slot_mapping[0] = kBlocks * 4; }},
      {"negative slot", [](StepInputs& s) { s.slot_mapping[0] = -1; }},
      {"duplicate slot", [](StepInputs& s) { s.slot_mapping[1] = 20; }},
      {"logit row", [](StepInputs& s) { s.logit_rows[0] = 4; }},
      {"negative requests", [](StepInputs& s) { s.num_requests = -1; }},
  };
  for (const auto& [name, mutate] : cases) {
    StepInputs s = goodStep();
    mutate(s);
    Status st = s.validate(kShape, kBlocks);
    EXPECT_FALSE(st.ok()) << name;
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << name;
  }
}

TEST(StepInputsTest, IgnoresBlockTableEntriesPastTheUsedBlocks) {
  StepInputs s = goodStep();
  s.block_tables[1] = 12345;  // request 0 uses one block only
  EXPECT_TRUE(s.validate(kShape, kBlocks).ok());
}

}  // namespace
}  // namespace ingot
