// Device and pinned memory, and the weight upload through double-buffered pinned staging.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <tuple>

#include "core/kernels/quant_params.h"
#include "runtime/backend/cpu/half_float.h"
#include "runtime/backend/cuda/cuda_backend_state.h"

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

/// One tensor to upload: `count` elements of `src` (of `type`) into a new device buffer
/// as bf16 (`to_bf16`) or f32.
struct UploadItem {
  const void* src = nullptr;
  WeightType type = WeightType::kF32;
  int64_t count = 0;  ///< elements; bytes for a raw item
  bool to_bf16 = false;
  CUdeviceptr dst = 0;
  /// Bytes copied as they are (a quantized weight's codes and scales).
  bool raw = false;
};

size_t sourceBytes(WeightType t) { return t == WeightType::kF32 ? 4 : 2; }

float widen(const void* src, WeightType t, int64_t i) {
  switch (t) {
    case WeightType::kF32: return static_cast<const float*>(src)[i];
    case WeightType::kF16: return f16ToF32(static_cast<const uint16_t*>(src)[i]);
    case WeightType::kBF16: return bf16ToF32(static_cast<const uint16_t*>(src)[i]);
  }
  return 0.0f;
}

/// Elements [i0, i1) of `item` converted into `out`.
void convert(const UploadItem& item, int64_t i0, int64_t i1, void* out) {
  if (item.raw) {
    std::memcpy(out, static_cast<const uint8_t*>(item.src) + i0, static_cast<size_t>(i1 - i0));
    return;
  }
  if (item.to_bf16) {
    uint16_t* o = static_cast<uint16_t*>(out);
    if (item.type == WeightType::kBF16) {
      std::memcpy(o, static_cast<const uint16_t*>(item.src) + i0, (i1 - i0) * 2);
      return;
    }
    for (int64_t i = i0; i < i1; ++i) o[i - i0] = f32ToBf16(widen(item.src, item.type, i));
    return;
  }
  float* o = static_cast<float*>(out);
  if (item.type == WeightType::kF32) {
    std::memcpy(o, static_cast<const float*>(item.src) + i0, (i1 - i0) * 4);
    return;
  }
  for (int64_t i = i0; i < i1; ++i) o[i - i0] = widen(item.src, item.type, i);
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

/// The quantized kernels' shape rules (kernels/quant_gemv.cuh checkQuantGemvShape, code
/// chunk and float4 activation loads of rows of stride K; quant_gemm.cuh checkQuantGemmShape),
/// which the loader's formats do not imply (an fp8 weight may have any even K), checked
/// before any weight moves: a weight the GEMV cannot read fails the load naming it, its K
/// and the rule; one only the GEMM cannot read drops its GEMM (resolved with the kernels),
/// so the GEMV serves every row count. The kernels' pointer rules hold by construction:
/// cuMemAlloc's 256-byte alignment for codes and activation slots.
Status fitQuantKernels(const ProgramPlan& plan, std::vector<DeviceStep>& steps) {
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlannedStep& p = plan.steps[i];
    if (p.op != schema::OpKind::Linear || !p.quantized) continue;
    const auto format = static_cast<quantgemv::Format>(p.quant.format);
    const int K = static_cast<int>(p.quant.K), block = static_cast<int>(p.quant.block);
    if (const char* why = quantgemv::checkQuantGemvShape(format, K, block))
      return failedPrecondition(
          "step " + std::to_string(i) + " (" + p.weight.name + "): its K = " + std::to_string(K) +
          " (block " + std::to_string(block) + ") does not fit the CUDA quantized GEMV (" +
          gemvFamily(p.quant.format) + "): " + why +
          "; leave this weight unquantized or pad its K");
    if (quantgemm::checkQuantGemmShape(format, K, block)) steps[i].gemm = LoadedKernel{};
  }
  return okStatus();
}

}  // namespace

Status uploadWeights(CudaBackendState& s) {
  CudaDriver& cu = *s.cu;
  const auto start = std::chrono::steady_clock::now();
  std::vector<UploadItem> items;
  // One device copy per (host tensor, device dtype): a tied embedding is an f32 table for
  // the gather and a bf16 matrix for the head.
  std::map<std::pair<const void*, bool>, CUdeviceptr> done;
  auto add = [&](const void* src, WeightType type, int64_t count, bool to_bf16,
                 const std::string& what) -> StatusOr<CUdeviceptr> {
    auto key = std::make_pair(src, to_bf16);
    if (auto it = done.find(key); it != done.end()) return it->second;
    auto memory = std::make_unique<DeviceMemory>();
    INGOT_RETURN_IF_ERROR(memory->allocate(cu, static_cast<size_t>(count) * (to_bf16 ? 2 : 4), what));
    UploadItem item{src, type, count, to_bf16, memory->ptr()};
    s.weight_device_bytes += memory->bytes();
    s.upload_bytes += static_cast<uint64_t>(count) * sourceBytes(type);
    s.weight_memory.push_back(std::move(memory));
    items.push_back(item);
    done.emplace(key, item.dst);
    return item.dst;
  };
  auto vector = [&](const float* src, int64_t count, const std::string& what)
      -> StatusOr<CUdeviceptr> { return add(src, WeightType::kF32, count, false, what); };
  // Packed bytes as they are; null parts stay 0.
  auto raw = [&](const void* src, int64_t bytes, const std::string& what) -> StatusOr<CUdeviceptr> {
    if (!src || bytes <= 0) return CUdeviceptr{0};
    auto key = std::make_pair(src, false);
    if (auto it = done.find(key); it != done.end()) return it->second;
    auto memory = std::make_unique<DeviceMemory>();
    INGOT_RETURN_IF_ERROR(memory->allocate(cu, static_cast<size_t>(bytes), what));
    UploadItem item;
    item.src = src;
    item.count = bytes;
    item.raw = true;
    item.dst = memory->ptr();
    s.weight_device_bytes += memory->bytes();
    s.upload_bytes += static_cast<uint64_t>(bytes);
    s.weight_memory.push_back(std::move(memory));
    items.push_back(item);
    done.emplace(key, item.dst);
    return item.dst;
  };

  const ProgramPlan& plan = *s.plan;
  s.steps.resize(plan.steps.size());  // kernels may be resolved already; weights go beside them
  INGOT_RETURN_IF_ERROR(fitQuantKernels(plan, s.steps));
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlannedStep& p = plan.steps[i];
    DeviceStep& d = s.steps[i];
    const std::string where = "step " + std::to_string(i) + " (" + p.weight.name + ")";
    switch (p.op) {
      case schema::OpKind::Embedding: {
        INGOT_ASSIGN_OR_RETURN(d.weight, add(p.weight.data, p.weight.type, p.weight.elements(),
                                             false, where));
        break;
      }
      case schema::OpKind::Linear:
      case schema::OpKind::Logits: {
        d.N = p.weight.rows();
        d.K = p.weight.cols();
        if (p.quantized) {
          const QuantMatrix& q = p.quant;
          const bool int4 = q.format == QuantFormat::kInt4Min || q.format == QuantFormat::kInt4Zero;
          const int64_t groups = q.groups();
          const int64_t scaleBytes =
              int4 ? groups * (q.scale_type == GroupScaleType::kF32 ? 4 : 2)
                   : q.format == QuantFormat::kFp8 ? 0 : groups;  // e4m3 / e8m0 bytes
          d.quantized = true;
          INGOT_ASSIGN_OR_RETURN(d.codes, raw(q.codes, q.N * q.rowBytes(), where + " codes"));
          INGOT_ASSIGN_OR_RETURN(d.scales, raw(q.scales, q.N * scaleBytes, where + " scales"));
          if (int4) {
            INGOT_ASSIGN_OR_RETURN(d.zeros, raw(q.zeros, q.N * scaleBytes, where + " zeros"));
          }
          INGOT_ASSIGN_OR_RETURN(d.channel_scales,
                                 raw(q.channel_scales, q.channel_scales ? q.N * 4 : 0,
                                     where + " channel scales"));
          if (p.bias) {
            INGOT_ASSIGN_OR_RETURN(d.bias, vector(p.bias, d.N, where + " bias"));
          }
          break;
        }
        INGOT_ASSIGN_OR_RETURN(d.weight, add(p.weight.data, p.weight.type, p.weight.elements(),
                                             true, where));
        if (p.bias) {
          INGOT_ASSIGN_OR_RETURN(d.bias, vector(p.bias, d.N, where + " bias"));
        }
        break;
      }
      case schema::OpKind::RmsNorm: {
        const int64_t width = plan.buffers[p.inputs[0]].width;
        INGOT_ASSIGN_OR_RETURN(d.norm, vector(p.norm, width, "step " + std::to_string(i) + " norm"));
        break;
      }
      case schema::OpKind::Rope: {
        INGOT_ASSIGN_OR_RETURN(d.inv_freq, vector(p.inv_freq.data(),
                                                  static_cast<int64_t>(p.inv_freq.size()),
                                                  "step " + std::to_string(i) + " rope"));
        // p.inv_freq lives in the plan, so its address is stable until the upload ends.
        break;
      }
      default:
        break;
    }
  }

  // Two staging buffers: the host converts into one while the other's copy is in flight.
  PinnedMemory staging[2];
  CUevent copied[2] = {nullptr, nullptr};
  Status status;
  for (int b = 0; b < 2 && status.ok(); ++b) {
    status = staging[b].allocate(cu, s.staging_bytes, "weight staging");
    if (status.ok())
      status = cu.check("cuEventCreate", cu.eventCreate(&copied[b], CU_EVENT_DISABLE_TIMING));
  }
  int next = 0;
  for (const UploadItem& item : items) {
    if (!status.ok()) break;
    const size_t elementBytes = item.raw ? 1 : item.to_bf16 ? 2 : 4;
    const int64_t perChunk = static_cast<int64_t>(std::max<size_t>(s.staging_bytes / elementBytes, 1));
    for (int64_t i0 = 0; i0 < item.count && status.ok(); i0 += perChunk) {
      const int64_t i1 = std::min(item.count, i0 + perChunk);
      const int b = next;
      next ^= 1;
      // The copy that last read this buffer must be done before it is overwritten.
      status = cu.check("cuEventSynchronize", cu.eventSynchronize(copied[b]));
      if (!status.ok()) break;
      convert(item, i0, i1, staging[b].data());
      status = cu.check("cuMemcpyHtoDAsync",
                        cu.memcpyHtoDAsync(item.dst + static_cast<CUdeviceptr>(i0) * elementBytes,
                                           staging[b].data(), (i1 - i0) * elementBytes, s.stream));
      if (status.ok()) status = cu.check("cuEventRecord", cu.eventRecord(copied[b], s.stream));
    }
  }
  // Never free staging memory a copy may still read, even after an error.
  Status synced = cu.check("cuStreamSynchronize", cu.streamSynchronize(s.stream));
  for (CUevent e : copied)
    if (e) cu.eventDestroy(e);
  INGOT_RETURN_IF_ERROR(status.withPrefix("weight upload"));
  INGOT_RETURN_IF_ERROR(synced.withPrefix("weight upload"));
  s.upload_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return okStatus();
}

}  // namespace ingot
