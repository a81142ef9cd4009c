// Device and pinned memory, and the weight upload through double-buffered pinned staging.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <tuple>

#include "core/kernels/quant_params.h"
#include "runtime/backend/cpu/half_float.h"
#include "runtime/backend/cuda/cuda_backend_state.h"
#include "runtime/backend/cuda/cuda_ops.h"

namespace ingot {

Status DeviceMemory::allocate(CudaDriver& cu, size_t bytes, const std::string& what) {
  reset();
  cu_ = &cu;
  bytes = std::max<size_t>(bytes, 256);
  CUresult r = cu.memAlloc(&ptr_, bytes);
  if (r != CUDA_SUCCESS) {
    ptr_ = 0;
    return failedPrecondition("cannot allocate " + std::to_string(bytes) + " bytes of GPU memory for " +
                              what + ": " + cu.describe("cuMemAlloc", r));
  }
  bytes_ = bytes;
  return okStatus();
}

void DeviceMemory::reset() {
  if (ptr_ && cu_) cu_->memFree(ptr_);
  ptr_ = 0;
  bytes_ = 0;
}

Status PinnedMemory::allocate(CudaDriver& cu, size_t bytes, const std::string& what) {
  reset();
  cu_ = &cu;
  bytes = std::max<size_t>(bytes, 256);
  CUresult r = cu.memAllocHost(&data_, bytes);
  if (r != CUDA_SUCCESS) {
    data_ = nullptr;
    return failedPrecondition("cannot allocate " + std::to_string(bytes) +
                              " bytes of pinned host memory for " + what + ": " +
                              cu.describe("cuMemAllocHost", r));
  }
  bytes_ = bytes;
  return okStatus();
}

void PinnedMemory::reset() {
  if (data_ && cu_) cu_->memFreeHost(data_);
  data_ = nullptr;
  bytes_ = 0;
}

namespace {

size_t sourceBytes(WeightType t) { return t == WeightType::kF32 ? 4 : 2; }

float widen(const void* src, WeightType t, int64_t i) {
  switch (t) {
    case WeightType::kF32: return static_cast<const float*>(src)[i];
    case WeightType::kF16: return f16ToF32(static_cast<const uint16_t*>(src)[i]);
    case WeightType::kBF16: return bf16ToF32(static_cast<const uint16_t*>(src)[i]);
  }
  return 0.0f;
}

/// Elements [i0, i1) of `src` into `out`: raw bytes, or elements of `type` as f32 or bf16.
void convert(const void* src, WeightType type, bool raw, bool to_bf16, int64_t i0, int64_t i1,
             void* out) {
  if (raw) {
    std::memcpy(out, static_cast<const uint8_t*>(src) + i0, static_cast<size_t>(i1 - i0));
    return;
  }
  if (to_bf16) {
    uint16_t* o = static_cast<uint16_t*>(out);
    if (type == WeightType::kBF16) {
      std::memcpy(o, static_cast<const uint16_t*>(src) + i0, (i1 - i0) * 2);
      return;
    }
    for (int64_t i = i0; i < i1; ++i) o[i - i0] = f32ToBf16(widen(src, type, i));
    return;
  }
  float* o = static_cast<float*>(out);
  if (type == WeightType::kF32) {
    std::memcpy(o, static_cast<const float*>(src) + i0, (i1 - i0) * 4);
    return;
  }
  for (int64_t i = i0; i < i1; ++i) o[i - i0] = widen(src, type, i);
}

/// The GEMV kernels of a quantized format (codegen QuantKernelsSource's names).
std::string gemvFamily(QuantFormat f) {
  switch (f) {
    case QuantFormat::kInt4Min: return "ingot_quant_gemv_int4min_*";
    case QuantFormat::kInt4Zero: return "ingot_quant_gemv_int4zero_*";
    case QuantFormat::kFp8: return "ingot_quant_gemv_fp8";
    case QuantFormat::kNvfp4: return "ingot_quant_gemv_nvfp4";
    case QuantFormat::kMxfp4: return "ingot_quant_gemv_mxfp4";
  }
  return "ingot_quant_gemv_*";
}

/// The quantized kernels' shape rules (core/kernels/quant_params.h: checkQuantGemvShape, code
/// chunk and float4 activation loads of rows of stride K; checkQuantGemmShape),
/// which the loader's formats do not imply (an fp8 weight may have any even K), checked
/// before any weight moves: a weight the GEMV cannot read fails the load naming it, its K
/// and the rule; one only the GEMM cannot read drops its GEMM (resolved with the kernels),
/// so the GEMV serves every row count. The kernels' pointer rules hold by construction:
/// cuMemAlloc's 256-byte alignment for codes and activation slots.
Status fitQuantKernels(const ProgramPlan& plan, std::vector<DeviceStep>& steps) {
  auto fit = [](size_t i, const PlannedStep& p, DeviceStep& d) -> Status {
    if (!p.quantized) return okStatus();
    const auto format = static_cast<quantgemv::Format>(p.quant.format);
    const int K = static_cast<int>(p.quant.K), block = static_cast<int>(p.quant.block);
    if (const char* why = quantgemv::checkQuantGemvShape(format, K, block))
      return failedPrecondition(
          "step " + std::to_string(i) + " (" + p.weight.name + "): its K = " + std::to_string(K) +
          " (block " + std::to_string(block) + ") does not fit the CUDA quantized GEMV (" +
          gemvFamily(p.quant.format) + "): " + why +
          "; leave this weight unquantized or pad its K");
    if (quantgemm::checkQuantGemmShape(format, K, block)) d.gemm = LoadedKernel{};
    return okStatus();
  };
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlannedStep& p = plan.steps[i];
    if (p.op == schema::OpKind::Linear) INGOT_RETURN_IF_ERROR(fit(i, p, steps[i]));
    if (p.op != schema::OpKind::GatedLinear) continue;
    steps[i].parts.resize(p.parts.size());
    for (size_t j = 0; j < p.parts.size(); ++j)
      INGOT_RETURN_IF_ERROR(fit(i, p.parts[j], steps[i].parts[j]));
  }
  return okStatus();
}

}  // namespace

StatusOr<CUdeviceptr> WeightUploads::add(Item item, size_t bytes, uint64_t sourceBytes,
                                         const std::string& what) {
  const auto key = std::make_pair(item.src, item.to_bf16);
  if (auto it = done_.find(key); it != done_.end()) return it->second;
  auto memory = std::make_unique<DeviceMemory>();
  INGOT_RETURN_IF_ERROR(memory->allocate(*s_.cu, bytes, what));
  item.dst = memory->ptr();
  s_.weight_device_bytes += memory->bytes();
  s_.upload_bytes += sourceBytes;
  s_.weight_memory.push_back(std::move(memory));
  items_.push_back(item);
  done_.emplace(key, item.dst);
  return item.dst;
}

StatusOr<CUdeviceptr> WeightUploads::elements(const void* src, WeightType type, int64_t count,
                                              bool to_bf16, const std::string& what) {
  Item item;
  item.src = src;
  item.type = type;
  item.count = count;
  item.to_bf16 = to_bf16;
  return add(item, static_cast<size_t>(count) * (to_bf16 ? 2 : 4),
             static_cast<uint64_t>(count) * sourceBytes(type), what);
}

StatusOr<CUdeviceptr> WeightUploads::raw(const void* src, int64_t bytes, const std::string& what) {
  if (!src || bytes <= 0) return CUdeviceptr{0};
  Item item;
  item.src = src;
  item.count = bytes;
  item.raw = true;
  return add(item, static_cast<size_t>(bytes), static_cast<uint64_t>(bytes), what);
}

Status WeightUploads::copy() {
  CudaDriver& cu = *s_.cu;
  // Two staging buffers: the host converts into one while the other's copy is in flight.
  PinnedMemory staging[2];
  CUevent copied[2] = {nullptr, nullptr};
  Status status;
  for (int b = 0; b < 2 && status.ok(); ++b) {
    status = staging[b].allocate(cu, s_.staging_bytes, "weight staging");
    if (status.ok())
      status = cu.check("cuEventCreate", cu.eventCreate(&copied[b], CU_EVENT_DISABLE_TIMING));
  }
  int next = 0;
  for (const Item& item : items_) {
    if (!status.ok()) break;
    const size_t elementBytes = item.raw ? 1 : item.to_bf16 ? 2 : 4;
    const int64_t perChunk =
        static_cast<int64_t>(std::max<size_t>(s_.staging_bytes / elementBytes, 1));
    for (int64_t i0 = 0; i0 < item.count && status.ok(); i0 += perChunk) {
      const int64_t i1 = std::min(item.count, i0 + perChunk);
      const int b = next;
      next ^= 1;
      // The copy that last read this buffer must be done before it is overwritten.
      status = cu.check("cuEventSynchronize", cu.eventSynchronize(copied[b]));
      if (!status.ok()) break;
      convert(item.src, item.type, item.raw, item.to_bf16, i0, i1, staging[b].data());
      status = cu.check("cuMemcpyHtoDAsync",
                        cu.memcpyHtoDAsync(item.dst + static_cast<CUdeviceptr>(i0) * elementBytes,
                                           staging[b].data(), (i1 - i0) * elementBytes,
                                           s_.stream));
      if (status.ok()) status = cu.check("cuEventRecord", cu.eventRecord(copied[b], s_.stream));
    }
  }
  // Never free staging memory a copy may still read, even after an error.
  Status synced = cu.check("cuStreamSynchronize", cu.streamSynchronize(s_.stream));
  for (CUevent e : copied)
    if (e) cu.eventDestroy(e);
  INGOT_RETURN_IF_ERROR(status.withPrefix("weight upload"));
  return synced.withPrefix("weight upload");
}

Status uploadWeights(CudaBackendState& s) {
  const auto start = std::chrono::steady_clock::now();
  const ProgramPlan& plan = *s.plan;
  s.steps.resize(plan.steps.size());  // kernels may be resolved already; weights go beside them
  INGOT_RETURN_IF_ERROR(fitQuantKernels(plan, s.steps));
  WeightUploads uploads(s);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const CudaOpDefinition* op = findCudaOpDefinition(plan.steps[i].op);
    if (op && op->upload) INGOT_RETURN_IF_ERROR(op->upload(uploads, i, plan.steps[i], s.steps[i]));
  }
  INGOT_RETURN_IF_ERROR(uploads.copy());
  s.upload_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return okStatus();
}

}  // namespace ingot
