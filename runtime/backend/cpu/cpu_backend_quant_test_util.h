// Helpers the CPU backend's quantized-weight tests share: a backend over an artifact, the
// SIMD levels this CPU runs, one request's step inputs, the formats under test.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "core/artifact/artifact_reader.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/backend/cpu/simd_level.h"

namespace ingot::quant_test {

using schema::DType;
using schema::QuantKind;
using schema::ZeroKind;

inline std::unique_ptr<CpuBackend> makeBackend(const Artifact& a, SimdLevel simd, int threads = 2) {
  CpuBackendOptions opts;
  opts.num_kv_blocks = 16;
  opts.num_threads = threads;
  opts.simd = simd;
  StatusOr<std::unique_ptr<CpuBackend>> b = CpuBackend::create(a, opts);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? std::move(*b) : nullptr;
}

inline std::vector<SimdLevel> supportedLevels() {
  std::vector<SimdLevel> levels;
  for (int l = 0; l <= static_cast<int>(detectSimdLevel()); ++l)
    levels.push_back(static_cast<SimdLevel>(l));
  return levels;
}

/// One request of `tokens` new tokens at positions `first`.., every row giving logits.
inline StepInputs oneRequest(const std::vector<int32_t>& tokens, int first, int blockSize) {
  StepInputs s;
  s.num_requests = 1;
  const int total = first + static_cast<int>(tokens.size());
  s.max_blocks_per_request = (total + blockSize - 1) / blockSize;
  for (int b = 0; b < s.max_blocks_per_request; ++b) s.block_tables.push_back(b);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int slot = first + static_cast<int>(i);
    s.tokens.push_back(tokens[i]);
    s.positions.push_back(slot);
    s.slot_mapping.push_back(slot);
    s.logit_rows.push_back(static_cast<int32_t>(i));
  }
  s.seq_lens = {total};
  s.query_start = {0, static_cast<int32_t>(tokens.size())};
  return s;
}

/// The largest |a - b| over the largest |b|.
inline double relativeError(const std::vector<float>& a, const std::vector<double>& b) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / scale;
}

/// A quantized format with its group, zero kind and scale dtype where it has them.
struct FormatCase {
  const char* name;
  QuantKind kind;
  uint32_t group = 32;
  ZeroKind zero_kind = ZeroKind::Min;
  DType scale_dtype = DType::F16;
};

inline const FormatCase kFormats[] = {
    {"int4-min/32/f16", QuantKind::Int4Group, 32, ZeroKind::Min, DType::F16},
    {"int4-zero/64/bf16", QuantKind::Int4Group, 64, ZeroKind::Zero, DType::BF16},
    {"int4-min/128/f32", QuantKind::Int4Group, 128, ZeroKind::Min, DType::F32},
    {"int4-zero/32/f16", QuantKind::Int4Group, 32, ZeroKind::Zero, DType::F16},
    {"fp8/channel", QuantKind::PerChannel},
    {"fp8/tensor", QuantKind::PerTensor},
    {"nvfp4", QuantKind::Nvfp4},
    {"mxfp4", QuantKind::Mxfp4},
};

}  // namespace ingot::quant_test
