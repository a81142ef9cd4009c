// FLOP and byte counts, medians and RESULT lines of the GPU benchmarks.
#include "bench/gpu/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ingot::bench {

double causalAttentionFlops(int64_t batch, int64_t heads, int64_t seq, int64_t headDim) {
  return 2.0 * 2.0 * static_cast<double>(batch) * static_cast<double>(heads) *
         static_cast<double>(seq) * static_cast<double>(seq) * static_cast<double>(headDim) / 2.0;
}

int64_t kvBytesRead(int64_t batch, int64_t seqLen, int64_t kvHeads, int64_t headDim,
                    int64_t elemBytes) {
  return batch * seqLen * 2 * kvHeads * headDim * elemBytes;
}

int64_t prefillBatch(int64_t seq, int64_t tokensInFlight) {
  return seq <= 0 ? 1 : std::max<int64_t>(1, tokensInFlight / seq);
}

StatusOr<double> medianOf(std::vector<double> values) {
  if (values.empty()) return invalidArgument("median of no timings");
  for (double v : values)
    if (!std::isfinite(v) || v <= 0.0)
      return invalidArgument("median: timing " + std::to_string(v) +
                             " is not a positive finite number");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::string prefillCaseName(int64_t headDim, int64_t seq, int64_t batch) {
  return "prefill_causal_d" + std::to_string(headDim) + "_s" + std::to_string(seq) + "_b" +
         std::to_string(batch);
}

std::string decodeCaseName(const std::string &dtype, int64_t headDim, int64_t batch,
                           int64_t seqLen) {
  return "decode_" + dtype + "_d" + std::to_string(headDim) + "_b" + std::to_string(batch) + "_l" +
         std::to_string(seqLen);
}

namespace {
bool isToken(const std::string &s) {
  return !s.empty() && std::none_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  });
}
}  // namespace

StatusOr<std::string> resultLine(const std::string &impl, const std::string &caseName, double value,
                                 const std::string &unit) {
  if (!isToken(impl) || impl.find('/') != std::string::npos)
    return invalidArgument("result: implementation name '" + impl +
                           "' must be one word without '/'");
  if (!isToken(caseName))
    return invalidArgument("result: case name '" + caseName + "' must be one word");
  if (!isToken(unit)) return invalidArgument("result: unit '" + unit + "' must be one word");
  if (!std::isfinite(value))
    return invalidArgument("result " + impl + "/" + caseName + ": value is not finite");
  char number[64];
  std::snprintf(number, sizeof(number), "%.6g", value);
  return "RESULT " + impl + "/" + caseName + " " + number + " " + unit + "\n";
}

}  // namespace ingot::bench
