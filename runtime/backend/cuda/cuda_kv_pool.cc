// The CUDA backend's paged KV pool: its bytes per block, allocation, and block / slot copies (f32 and fp8).
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "core/kernels/kv_fp8_params.h"
#include "runtime/backend/cpu/kv_fp8.h"
#include "runtime/backend/cuda/cuda_backend_state.h"

namespace ingot {
namespace {

bool isFp8(const CudaBackendState& s) { return s.kv_dtype == KvDtype::kFp8E4M3; }

/// Bytes of block `b`'s codes in an fp8 pool, and of its scales.
size_t fp8CodeBytes(const KvCacheLayout& kv) { return static_cast<size_t>(kv.blockFloats()); }
size_t fp8ScaleBytes(const KvCacheLayout& kv) { return static_cast<size_t>(kv.blockScales()) * 4; }

}  // namespace

uint64_t kvBlockBytes(const CudaBackendState& s) {
  const KvCacheLayout& kv = s.plan->kv_layout;
  return isFp8(s) ? fp8CodeBytes(kv) + fp8ScaleBytes(kv)
                  : static_cast<uint64_t>(kv.blockFloats()) * 4;
}

/// What an unwritten KV element holds: zero, as on the CPU; on the SIMT emulator 0xFF bytes
/// (NaN in f32, bf16 and E4M3), so a kernel that reads a slot no sequence wrote, or a freed
/// block, shows it in its output.
uint32_t kvFillWord(const CudaBackendState& s) { return s.gpu.emulated ? 0xffffffffu : 0u; }

Status allocateKvPool(CudaBackendState& s, int64_t blocks) {
  CudaDriver& cu = *s.cu;
  const KvCacheLayout& kv = s.plan->kv_layout;
  s.num_kv_blocks = blocks;
  if (!isFp8(s)) {
    INGOT_RETURN_IF_ERROR(s.kv_pool.allocate(cu, static_cast<size_t>(blocks) * kvBlockBytes(s), "the KV pool"));
    INGOT_RETURN_IF_ERROR(cu.check("cuMemsetD32Async", cu.memsetD32Async(s.kv_pool.ptr(), kvFillWord(s),
                                                                         s.kv_pool.bytes() / 4, s.stream)));
    return cu.check("cuStreamSynchronize", cu.streamSynchronize(s.stream));
  }
  // Codes zero (kvFillWord), every scale the minimum: a fresh pool reads back as zeros, as on
  // the CPU; the scales are each block-head's state for the writer, never poisoned.
  const size_t codes = static_cast<size_t>(blocks) * fp8CodeBytes(kv);
  const size_t scales = static_cast<size_t>(blocks) * fp8ScaleBytes(kv);
  INGOT_RETURN_IF_ERROR(s.kv_pool.allocate(cu, codes, "the fp8 KV pool's codes"));
  INGOT_RETURN_IF_ERROR(s.kv_scales.allocate(cu, scales, "the fp8 KV pool's scales"));
  INGOT_RETURN_IF_ERROR(cu.check("cuMemsetD32Async", cu.memsetD32Async(s.kv_pool.ptr(), kvFillWord(s),
                                                                       s.kv_pool.bytes() / 4, s.stream)));
  const float minScale = fp8KvMinScale();
  uint32_t bits = 0;
  std::memcpy(&bits, &minScale, 4);
  INGOT_RETURN_IF_ERROR(cu.check("cuMemsetD32Async",
                                 cu.memsetD32Async(s.kv_scales.ptr(), bits, scales / 4, s.stream)));
  return cu.check("cuStreamSynchronize", cu.streamSynchronize(s.stream));
}

Status poisonKvBlocks(CudaBackendState& s, const std::vector<int32_t>& blocks) {
  CudaDriver& cu = *s.cu;
  const KvCacheLayout& kv = s.plan->kv_layout;
  const size_t bytes = isFp8(s) ? fp8CodeBytes(kv) : static_cast<size_t>(kv.blockFloats()) * 4;
  for (int32_t b : blocks)
    INGOT_RETURN_IF_ERROR(cu.check("cuMemsetD8Async", cu.memsetD8Async(s.kv_pool.ptr() + b * bytes, 0xff,
                                                                        bytes, s.stream)));
  return cu.check("cuStreamSynchronize", cu.streamSynchronize(s.stream));
}

Status copyKvBlock(CudaBackendState& s, int64_t src, int64_t dst) {
  CudaDriver& cu = *s.cu;
  const KvCacheLayout& kv = s.plan->kv_layout;
  auto copy = [&](CUdeviceptr base, size_t bytes) {
    return cu.check("cuMemcpyDtoDAsync",
                    cu.memcpyDtoDAsync(base + dst * bytes, base + src * bytes, bytes, s.stream));
  };
  if (isFp8(s)) {
    INGOT_RETURN_IF_ERROR(copy(s.kv_pool.ptr(), fp8CodeBytes(kv)));
    INGOT_RETURN_IF_ERROR(copy(s.kv_scales.ptr(), fp8ScaleBytes(kv)));
  } else {
    INGOT_RETURN_IF_ERROR(copy(s.kv_pool.ptr(), static_cast<size_t>(kv.blockFloats()) * 4));
  }
  return cu.check("cuStreamSynchronize", cu.streamSynchronize(s.stream));
}

Status copyKvSlotRows(CudaBackendState& s, const std::vector<std::pair<int32_t, int32_t>>& moves) {
  CudaDriver& cu = *s.cu;
  const KvCacheLayout& kv = s.plan->kv_layout;
  if (!isFp8(s)) {
    const size_t row = static_cast<size_t>(kv.rowFloats()) * 4;
    // In order on one stream: a later move sees the rows an earlier one wrote.
    for (const auto& [from, to] : moves) {
      if (from == to) continue;
      for (int64_t layer = 0; layer < kv.num_layers; ++layer)
        for (int64_t k = 0; k < 2; ++k) {
          const CUdeviceptr d = s.kv_pool.ptr() + kv.rowOffset(to / kv.block_size, layer, k, to % kv.block_size) * 4;
          const CUdeviceptr f = s.kv_pool.ptr() + kv.rowOffset(from / kv.block_size, layer, k, from % kv.block_size) * 4;
          INGOT_RETURN_IF_ERROR(cu.check("cuMemcpyDtoDAsync", cu.memcpyDtoDAsync(d, f, row, s.stream)));
        }
    }
    return cu.check("cuStreamSynchronize", cu.streamSynchronize(s.stream));
  }
  // fp8: a move across blocks re-encodes the row into the destination block-head, which
  // may rescale its other rows (kvCopySlotsFp8). Moves are few (accepted speculative
  // tokens), so the blocks they touch come to the host, the CPU's own code moves the rows
  // there (the same bytes as the CPU backend, by construction), and the blocks go back.
  std::set<int64_t> touched;
  for (const auto& [from, to] : moves)
    if (from != to) {
      touched.insert(from / kv.block_size);
      touched.insert(to / kv.block_size);
    }
  if (touched.empty()) return okStatus();
  std::map<int64_t, int32_t> local;  // pool block -> block of the host copy
  for (int64_t b : touched) local.emplace(b, static_cast<int32_t>(local.size()));
  const size_t codeBytes = fp8CodeBytes(kv), scaleBytes = fp8ScaleBytes(kv);
  std::vector<uint8_t> codes(local.size() * codeBytes);
  std::vector<float> scales(local.size() * static_cast<size_t>(kv.blockScales()));
  for (const auto& [b, i] : local) {
    INGOT_RETURN_IF_ERROR(cu.check("cuMemcpyDtoHAsync",
        cu.memcpyDtoHAsync(codes.data() + i * codeBytes, s.kv_pool.ptr() + b * codeBytes, codeBytes, s.stream)));
    INGOT_RETURN_IF_ERROR(cu.check("cuMemcpyDtoHAsync",
        cu.memcpyDtoHAsync(reinterpret_cast<uint8_t*>(scales.data()) + i * scaleBytes,
                           s.kv_scales.ptr() + b * scaleBytes, scaleBytes, s.stream)));
  }
  INGOT_RETURN_IF_ERROR(cu.check("cuStreamSynchronize", cu.streamSynchronize(s.stream)));
  std::vector<std::pair<int32_t, int32_t>> mapped;
  auto toLocal = [&](int32_t slot) {
    return local.at(slot / kv.block_size) * static_cast<int32_t>(kv.block_size) +
           static_cast<int32_t>(slot % kv.block_size);
  };
  for (const auto& [from, to] : moves)
    if (from != to) mapped.push_back({toLocal(from), toLocal(to)});
  kvCopySlotsFp8({codes.data(), scales.data()}, kv, mapped);
  for (const auto& [b, i] : local) {
    INGOT_RETURN_IF_ERROR(cu.check("cuMemcpyHtoDAsync",
        cu.memcpyHtoDAsync(s.kv_pool.ptr() + b * codeBytes, codes.data() + i * codeBytes, codeBytes, s.stream)));
    INGOT_RETURN_IF_ERROR(cu.check("cuMemcpyHtoDAsync",
        cu.memcpyHtoDAsync(s.kv_scales.ptr() + b * scaleBytes,
                           reinterpret_cast<const uint8_t*>(scales.data()) + i * scaleBytes, scaleBytes, s.stream)));
  }
  // The host buffers are pageable and die with this call: wait for the uploads.
  return cu.check("cuStreamSynchronize", cu.streamSynchronize(s.stream));
}

Status kvWriteError(const CudaBackendState& s) {
  if (!isFp8(s)) return okStatus();
  uint64_t key = 0;
  std::memcpy(&key, static_cast<const uint8_t*>(s.errors_host.data()) + 8, 8);
  if (key == kvfp8::kKvFp8NoError) return okStatus();
  return invalidArgument("kv_write layer " + std::to_string(kvfp8::kvFp8ErrorLayer(key)) + ": the " +
                         (kvfp8::kvFp8ErrorKv(key) == 0 ? "key" : "value") + " of token " +
                         std::to_string(kvfp8::kvFp8ErrorToken(key)) + " holds " +
                         (kvfp8::kvFp8ErrorIsNaN(key) ? "NaN" : "an infinity") +
                         ", which an fp8 KV cache cannot store (the step's other rows were "
                         "written; its requests' KV is not to be trusted)");
}

}  // namespace ingot
