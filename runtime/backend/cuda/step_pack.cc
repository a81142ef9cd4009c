// Host-side planning of a CUDA step: packing, buckets, split-KV, KV pool size.
#include "runtime/backend/cuda/step_pack.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace ingot {
namespace {

int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

StepLayout stepLayout(const StepDims& d) {
  StepLayout l;
  int64_t at = 0;
  auto take = [&](int64_t words) {
    const int64_t start = at;
    at = roundUp(at + std::max<int64_t>(words, 1), 16);
    return start;
  };
  l.tokens = take(d.tokens);
  l.positions = take(d.tokens);
  l.slot_mapping = take(d.tokens);
  l.seq_lens = take(d.requests);
  l.query_start = take(int64_t{d.requests} + 1);
  l.block_tables = take(int64_t{d.requests} * d.max_blocks);
  l.logit_rows = take(d.logit_rows);
  l.run_tokens = take(d.tokens);
  l.run_starts = take(int64_t{d.tokens} + 1);
  l.words = at;
  return l;
}

StepDims stepDims(const StepInputs& in) {
  StepDims d;
  d.tokens = static_cast<int32_t>(in.tokens.size());
  d.requests = in.num_requests;
  d.max_blocks = in.max_blocks_per_request;
  d.logit_rows = static_cast<int32_t>(in.logit_rows.size());
  return d;
}

Status packStepInputs(const StepInputs& in, const StepDims& dims, int32_t pad_block,
                      int32_t* out) {
  const StepDims own = stepDims(in);
  if (own.tokens > dims.tokens || own.requests > dims.requests ||
      own.max_blocks > dims.max_blocks || own.logit_rows > dims.logit_rows)
    return invalidArgument(
        "step of " + std::to_string(own.tokens) + " tokens, " + std::to_string(own.requests) +
        " requests, " + std::to_string(own.max_blocks) + " blocks per request and " +
        std::to_string(own.logit_rows) + " logit rows does not fit buffers for " +
        std::to_string(dims.tokens) + ", " + std::to_string(dims.requests) + ", " +
        std::to_string(dims.max_blocks) + " and " + std::to_string(dims.logit_rows));
  if (pad_block < 0) return invalidArgument("padding block must be a block of the pool");
  const StepLayout l = stepLayout(dims);
  std::fill(out, out + l.words, 0);
  const int32_t T = own.tokens, R = own.requests;
  std::copy(in.tokens.begin(), in.tokens.end(), out + l.tokens);
  std::copy(in.positions.begin(), in.positions.end(), out + l.positions);
  std::copy(in.slot_mapping.begin(), in.slot_mapping.end(), out + l.slot_mapping);
  std::fill(out + l.slot_mapping + T, out + l.slot_mapping + dims.tokens, -1);
  std::copy(in.seq_lens.begin(), in.seq_lens.end(), out + l.seq_lens);
  std::fill(out + l.seq_lens + R, out + l.seq_lens + dims.requests, 1);
  int32_t* qs = out + l.query_start;
  for (int32_t r = 0; r <= R; ++r) qs[r] = in.query_start[r];
  // Padded requests take one padded token each while there are some left.
  for (int32_t r = R; r < dims.requests; ++r) qs[r + 1] = std::min(qs[r] + 1, dims.tokens);
  int32_t* bt = out + l.block_tables;
  std::fill(bt, bt + int64_t{dims.requests} * dims.max_blocks, pad_block);
  for (int32_t r = 0; r < R; ++r)
    std::copy(in.block_tables.begin() + int64_t{r} * own.max_blocks,
              in.block_tables.begin() + int64_t{r + 1} * own.max_blocks,
              bt + int64_t{r} * dims.max_blocks);
  std::copy(in.logit_rows.begin(), in.logit_rows.end(), out + l.logit_rows);
  return okStatus();
}

int32_t packKvRuns(const StepInputs& in, const StepDims& dims, int32_t block_size, int32_t* out) {
  const StepLayout l = stepLayout(dims);
  std::vector<int32_t> tokens;
  for (size_t t = 0; t < in.slot_mapping.size(); ++t)
    if (in.slot_mapping[t] >= 0) tokens.push_back(static_cast<int32_t>(t));
  auto blockOf = [&](int32_t t) { return in.slot_mapping[static_cast<size_t>(t)] / block_size; };
  std::stable_sort(tokens.begin(), tokens.end(),
                   [&](int32_t a, int32_t b) { return blockOf(a) < blockOf(b); });
  std::copy(tokens.begin(), tokens.end(), out + l.run_tokens);
  int32_t* starts = out + l.run_starts;
  int32_t runs = 0;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (i == 0 || blockOf(tokens[i]) != blockOf(tokens[i - 1])) starts[runs++] = static_cast<int32_t>(i);
  std::fill(starts + runs, starts + dims.tokens + 1, static_cast<int32_t>(tokens.size()));
  return runs;
}

bool isPlainDecode(const StepInputs& in) {
  if (!in.extra_inputs.empty() || in.num_requests != static_cast<int32_t>(in.tokens.size()) ||
      in.logit_rows.size() != in.tokens.size() ||
      in.query_start.size() != static_cast<size_t>(in.num_requests) + 1)
    return false;
  for (int32_t r = 0; r <= in.num_requests; ++r)
    if (in.query_start[r] != r) return false;
  for (size_t i = 0; i < in.logit_rows.size(); ++i)
    if (in.logit_rows[i] != static_cast<int32_t>(i)) return false;
  return true;
}

std::vector<int32_t> decodeBuckets(int32_t max_batch) {
  std::vector<int32_t> b;
  for (int32_t n = 1; n <= max_batch;) {
    b.push_back(n);
    n = n < 8 ? n * 2 : n < 64 ? n + 8 : n < 128 ? n + 16 : n + 32;
  }
  if (max_batch > 0 && (b.empty() || b.back() != max_batch)) b.push_back(max_batch);
  return b;
}

int32_t decodeBucket(int64_t tokens, const std::vector<int32_t>& buckets) {
  for (int32_t b : buckets)
    if (b >= tokens) return b;
  return -1;
}

SplitPlan chooseSplits(int64_t max_len, int64_t ctas, int32_t sms, int32_t key_tile,
                       int32_t min_keys) {
  SplitPlan p;
  const int64_t len = std::max<int64_t>(max_len, 1);
  const int64_t tile = std::max<int32_t>(key_tile, 1);
  int64_t splits = 1;
  const int64_t want = 2 * int64_t{std::max(sms, 1)};
  if (ctas > 0 && ctas < want) {
    splits = (want + ctas - 1) / ctas;
    splits = std::min<int64_t>(splits, std::max<int64_t>(1, len / std::max(min_keys, 1)));
  }
  const int64_t keys = roundUp((len + splits - 1) / splits, tile);
  p.keys_per_split = static_cast<int32_t>(keys);
  p.num_splits = static_cast<int32_t>((len + keys - 1) / keys);
  return p;
}

StatusOr<int64_t> kvBlocksForMemory(uint64_t free_bytes, uint64_t total_bytes,
                                    double utilization, uint64_t reserve_bytes,
                                    uint64_t block_bytes, int64_t min_blocks) {
  if (!(utilization > 0.0 && utilization <= 1.0))
    return invalidArgument("--gpu-memory-utilization must be in (0, 1], got " +
                           std::to_string(utilization));
  if (block_bytes == 0) return invalidArgument("KV block of 0 bytes");
  if (free_bytes > total_bytes) free_bytes = total_bytes;
  const double allowed = utilization * static_cast<double>(total_bytes);
  const double used = static_cast<double>(total_bytes - free_bytes);
  // What may still be taken: up to the utilization bound, never more than is free.
  double budget = std::min(allowed - used, static_cast<double>(free_bytes)) -
                  static_cast<double>(reserve_bytes);
  const int64_t blocks = budget > 0 ? static_cast<int64_t>(budget / static_cast<double>(block_bytes)) : 0;
  if (blocks < min_blocks)
    return failedPrecondition(
        "not enough GPU memory for the KV cache: " + mib(total_bytes - free_bytes) + " of " +
        mib(total_bytes) + " in use after loading, " + std::to_string(utilization) +
        " may be used and " + mib(reserve_bytes) + " are kept for graphs and cuBLASLt, leaving " +
        std::to_string(blocks) + " blocks of " + std::to_string(block_bytes) + " bytes; " +
        std::to_string(min_blocks) + " are needed for one sequence of the model's context. "
        "Raise --gpu-memory-utilization, lower --max-model-len, or free the GPU");
  return blocks;
}

}  // namespace ingot
