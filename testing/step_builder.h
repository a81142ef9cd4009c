// Test helper: serving steps over hand-placed requests (tokens, blocks) for backend tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/backend/step_inputs.h"

namespace ingot::testing {

/// One request's view for building steps: its tokens so far and its blocks.
struct Sequence {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
  int done = 0;  // tokens already in the KV
};

/// Builds one step that feeds `counts[i]` further tokens of seqs[i] (advancing their
/// `done`); every row gives logits.
inline StepInputs makeStep(const std::vector<Sequence*>& seqs, const std::vector<int>& counts,
                           int block_size) {
  StepInputs s;
  s.num_requests = static_cast<int32_t>(seqs.size());
  for (Sequence* q : seqs)
    s.max_blocks_per_request =
        std::max<int32_t>(s.max_blocks_per_request, static_cast<int32_t>(q->blocks.size()));
  s.query_start.push_back(0);
  for (size_t r = 0; r < seqs.size(); ++r) {
    Sequence& q = *seqs[r];
    for (int i = 0; i < counts[r]; ++i) {
      const int slot = q.done + i;
      s.tokens.push_back(q.tokens[slot]);
      s.positions.push_back(slot);
      s.slot_mapping.push_back(q.blocks[slot / block_size] * block_size + slot % block_size);
      s.logit_rows.push_back(static_cast<int32_t>(s.tokens.size() - 1));
    }
    q.done += counts[r];
    s.seq_lens.push_back(q.done);
    s.query_start.push_back(static_cast<int32_t>(s.tokens.size()));
    std::vector<int32_t> row(q.blocks);
    row.resize(s.max_blocks_per_request, -1);
    s.block_tables.insert(s.block_tables.end(), row.begin(), row.end());
  }
  return s;
}

}  // namespace ingot::testing
