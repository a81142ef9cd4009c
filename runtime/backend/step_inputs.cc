// Validation of StepInputs: a malformed step is an error, never undefined behaviour.
#include "runtime/backend/step_inputs.h"

#include <algorithm>
#include <string>

namespace ingot {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

Status StepInputs::validate(const ModelShape& shape, int64_t num_kv_blocks) const {
  const int64_t T = numTokens();
  const int64_t R = num_requests;
  const int64_t bs = shape.kv_block_size;
  if (bs <= 0) return invalidArgument("step: kv block size " + str(bs) + " is not positive");
  if (num_kv_blocks < 0) return invalidArgument("step: negative KV block count");
  if (positions.size() != tokens.size())
    return invalidArgument("step: " + str(positions.size()) + " positions for " + str(T) +
                           " tokens");
  if (slot_mapping.size() != tokens.size())
    return invalidArgument("step: " + str(slot_mapping.size()) + " slot_mapping entries for " +
                           str(T) + " tokens");
  if (R < 0 || max_blocks_per_request < 0)
    return invalidArgument("step: negative num_requests or max_blocks_per_request");
  if (static_cast<int64_t>(block_tables.size()) != R * max_blocks_per_request)
    return invalidArgument("step: block_tables has " + str(block_tables.size()) +
                           " entries, expected " + str(R) + " x " +
                           str(max_blocks_per_request));
  if (static_cast<int64_t>(seq_lens.size()) != R)
    return invalidArgument("step: " + str(seq_lens.size()) + " seq_lens for " + str(R) +
                           " requests");
  if (static_cast<int64_t>(query_start.size()) != R + 1)
    return invalidArgument("step: query_start has " + str(query_start.size()) +
                           " entries, expected num_requests + 1 = " + str(R + 1));
  if (query_start[0] != 0) return invalidArgument("step: query_start[0] is not 0");
  if (query_start[R] != T)
    return invalidArgument("step: query_start[" + str(R) + "] = " + str(query_start[R]) +
                           " but there are " + str(T) + " tokens");
  const int64_t slotLimit = num_kv_blocks * bs;
  for (int64_t b = 0; b < R; ++b) {
    const int64_t begin = query_start[b], end = query_start[b + 1];
    if (end < begin)
      return invalidArgument("step: query_start decreases at request " + str(b));
    const int64_t len = seq_lens[b];
    if (len < end - begin)
      return invalidArgument("step: request " + str(b) + " has seq_len " + str(len) +
                             " < its " + str(end - begin) + " new tokens");
    const int64_t blocks = (len + bs - 1) / bs;
    if (blocks > max_blocks_per_request)
      return invalidArgument("step: request " + str(b) + " needs " + str(blocks) +
                             " KV blocks for seq_len " + str(len) + " but its block-table row has " +
                             str(max_blocks_per_request));
    for (int64_t i = 0; i < blocks; ++i) {
      const int64_t block = block_tables[b * max_blocks_per_request + i];
      if (block < 0 || block >= num_kv_blocks)
        return invalidArgument("step: block_tables[" + str(b) + ", " + str(i) + "] = " +
                               str(block) + " is outside the pool of " + str(num_kv_blocks) +
                               " blocks");
    }
  }
  for (int64_t t = 0; t < T; ++t) {
    if (tokens[t] < 0 || tokens[t] >= shape.vocab_size)
      return invalidArgument("step: token id " + str(tokens[t]) + " at row " + str(t) +
                             " is outside the vocabulary of " + str(shape.vocab_size));
    if (positions[t] < 0)
      return invalidArgument("step: negative position " + str(positions[t]) + " at row " +
                             str(t));
    if (slot_mapping[t] < 0 || slot_mapping[t] >= slotLimit)
      return invalidArgument("step: slot_mapping[" + str(t) + "] = " + str(slot_mapping[t]) +
                             " is outside the pool's " + str(slotLimit) + " slots");
  }
  std::vector<int32_t> slots(slot_mapping);
  std::sort(slots.begin(), slots.end());
  auto dup = std::adjacent_find(slots.begin(), slots.end());
  if (dup != slots.end())
    return invalidArgument("step: two tokens write KV slot " + str(*dup));
  for (size_t i = 0; i < logit_rows.size(); ++i)
    if (logit_rows[i] < 0 || logit_rows[i] >= T)
      return invalidArgument("step: logit_rows[" + str(i) + "] = " + str(logit_rows[i]) +
                             " is not one of the " + str(T) + " token rows");
  return okStatus();
}

}  // namespace ingot
