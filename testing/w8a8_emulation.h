// W8A8 on the CPU: the quantized kernels with fp8 activations rounded per token to E4M3 first.
#pragma once

#include "runtime/backend/cpu/quant_linear.h"
#include "runtime/backend/cpu/simd_level.h"

namespace ingot::testing {

/// This machine's CPU quantized-kernel table (quantKernels(detectSimdLevel())), except that
/// an fp8 linear's activations are first rounded per token to E4M3 by the CUDA W8A8
/// quantizer's own encoder (codegen/cuda/kernels/fp8_w8a8.cuh: one scale per row, absmax /
/// 448, subnormals read as zero) and then multiplied weight-only as before. With exact
/// accumulation that is the W8A8 product, so a CPU backend given this table
/// (CpuBackendOptions::quant_kernels) is the reference for the CUDA backend's W8A8 linears
/// and measures what per-token fp8 activations cost. Other formats pass straight through.
/// `level`: the table of that SIMD level instead (two levels sum in different orders: how
/// far apart two valid W8A8 implementations land).
const QuantKernels& w8a8EmulatingQuantKernels();
const QuantKernels& w8a8EmulatingQuantKernels(SimdLevel level);

}  // namespace ingot::testing
