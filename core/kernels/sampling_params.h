// Launch ABI of the sampling kernel (codegen/cuda/kernels/sampling.cuh).
#pragma once
#ifndef INGOT_CORE_KERNELS_SAMPLING_PARAMS_H  // also a guard: the kernel sources inline these headers
#define INGOT_CORE_KERNELS_SAMPLING_PARAMS_H

// Plain C++ the host launcher and the device share: threads per row and the parameter structs.

#include "core/kernels/abi.h"

namespace ingot {
namespace sampling {

/// Threads per CTA of ingot_fused_sample_f32: one CTA per logit row.
constexpr int kSampleThreads = 256;

/// One logit row's sampling parameters (24 bytes; the runtime's RowSampling has this layout).
struct RowParams {
  float temperature;  ///< <= 0: greedy
  int top_k;          ///< <= 0 or >= #candidates: all
  float top_p;        ///< >= 1: all
  float min_p;        ///< <= 0: off
  double u;           ///< the uniform in [0, 1) of the draw (ignored when greedy)
};
static_assert(sizeof(RowParams) == 24, "RowParams is the runtime's 24-byte RowSampling");

/// Launch parameters of ingot_fused_sample_f32: one CTA (256 threads) per row.
struct SampleParams {
  const float *logits;      ///< [rows, row_stride], the first `vocab` of each row used
  long row_stride;          ///< elements from one row to the next (>= vocab)
  int vocab;
  int rows;                 ///< the grid: one CTA per row
  const RowParams *params;  ///< [rows]
  int *tokens;              ///< [rows] out
};

}  // namespace sampling
}  // namespace ingot

#endif  // INGOT_CORE_KERNELS_SAMPLING_PARAMS_H
