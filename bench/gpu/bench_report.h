// The arithmetic and the output format of the GPU benchmarks: FLOP and byte counts, the
// median of timed launches, case names and the `RESULT name value unit` lines that
// scripts/gpu-check.sh collects (scripts/gpu_reference.py prints the same names).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace ingot::bench {

/// FLOPs of causal attention over `batch` sequences of `seq` tokens, `heads` query heads of
/// `headDim`: two matmuls (QK^T and PV) of 2 * S * S * D each per head, halved by the mask:
/// 2 * 2 * B * H * S^2 * D / 2. The FlashAttention papers' convention (the diagonal's extra
/// S/2 keys are not counted), so the figure compares with PyTorch SDPA's as reported there.
double causalAttentionFlops(int64_t batch, int64_t heads, int64_t seq, int64_t headDim);

/// Bytes of K and V a decode step reads: every one of `seqLen` slots of each of `batch`
/// requests holds a K and a V row of `kvHeads` x `headDim` elements of `elemBytes`.
int64_t kvBytesRead(int64_t batch, int64_t seqLen, int64_t kvHeads, int64_t headDim,
                    int64_t elemBytes);

/// Sequences per prefill case: `tokensInFlight` / `seq`, at least 1 (16k tokens: 16 x 1k,
/// 8 x 2k, 4 x 4k, 2 x 8k), so every sequence length keeps the GPU equally full.
int64_t prefillBatch(int64_t seq, int64_t tokensInFlight);

/// The middle value (mean of the two middle ones for an even count); fails when empty or
/// when a value is not finite and positive (a timing that did not happen).
StatusOr<double> medianOf(std::vector<double> values);

/// "prefill_causal_d128_s8192_b2": the case name both the Ingot bench and the PyTorch
/// reference use.
std::string prefillCaseName(int64_t headDim, int64_t seq, int64_t batch);
/// "decode_bf16_d128_b64_l4096".
std::string decodeCaseName(const std::string &dtype, int64_t headDim, int64_t batch,
                           int64_t seqLen);

/// "RESULT <impl>/<case> <value> <unit>\n" with the value in %.6g. Fails on an empty or
/// blank-containing impl, case or unit, and on a value that is not finite.
StatusOr<std::string> resultLine(const std::string &impl, const std::string &caseName, double value,
                                 const std::string &unit);

}  // namespace ingot::bench
