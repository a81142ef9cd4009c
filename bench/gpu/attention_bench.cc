// ingot_attention_gpu_bench: speed of the generated attention kernels on a GPU, in the
// `RESULT name value unit` lines scripts/gpu-check.sh puts next to PyTorch's figures.
//
//   ingot_attention_gpu_bench [--quick]
//
// Prefill: the FA2 bf16 kernel with the causal region (core/region/region_examples.h)
// and its block mask, 32 query / 8 kv heads, head dims 64 and 128, sequences 1k..8k with
// 16k tokens in flight, paged with shuffled blocks; TFLOP/s by the causal convention of
// bench_report.h. Decode: the split-KV kernel (bf16 and f32), batch 64 x 4k context, d128,
// splits as the CUDA backend plans them; GB/s of K/V read, against a device-to-device copy
// of the same bytes in the same run (copy GB/s counts bytes read and written). Each figure
// is the median of launches timed back to back with CUDA events. Outputs are poisoned first
// and spot-checked against a host reference, so a fast wrong kernel fails the bench.
// Exits 2, saying why, without a driver or a GPU; 1 when a kernel fails or is wrong.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "bench/gpu/bench_data.h"
#include "bench/gpu/bench_report.h"
#include "codegen/cuda/AttentionRegionEmitter.h"
#include "core/region/region_examples.h"
#include "runtime/backend/cuda/step_pack.h"
#include "test/gpu/attention_launch.h"

namespace ingot::bench {
namespace {

using codegen::AttentionDtype;
using codegen::DecodeInstance;
using codegen::PrefillInstance;

constexpr int kHeads = 32, kKvHeads = 8, kGroup = kHeads / kKvHeads;  // Llama-3-8B's heads
// Tokens in flight in every prefill case; decode batch and length. On the SIMT emulator
// (INGOT_CUDA_DRIVER=emulated, whose times mean nothing as GPU speed) run() shrinks them so
// the benchmark's code runs end to end in seconds.
int64_t kPrefillTokens = 16384;
int kDecodeBatch = 64, kDecodeLen = 4096;
constexpr int kDecodeHeadDim = 128;
constexpr int kSpareBlocks = 7;  // unused pool blocks, so tables are not the identity
constexpr int kSpotRows = 8;     // (request, token, head) rows checked per case
/// q is uniform in [-8, 8), K and V in [-1, 1): scores of standard deviation ~2.7 give a
/// peaked softmax, as in trained models, so outputs are far from the mean of V and the spot
/// check tells a right kernel from one that writes zeros or averages.
constexpr float kQueryAmplitude = 8.0f;
const char *const kVariant = "Causal";

/// Device memory freed on scope exit.
class DeviceMemory {
 public:
  DeviceMemory(CudaDriver &cu, CUdeviceptr ptr, size_t bytes)
      : cu_(&cu), ptr_(ptr), bytes_(bytes) {}
  DeviceMemory(DeviceMemory &&o) noexcept : cu_(o.cu_), ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = 0;
  }
  DeviceMemory(const DeviceMemory &) = delete;
  DeviceMemory &operator=(const DeviceMemory &) = delete;
  ~DeviceMemory() {
    if (ptr_) cu_->memFree(ptr_);
  }
  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <class T>
  T *as() const {
    return reinterpret_cast<T *>(ptr_);
  }

 private:
  CudaDriver *cu_;
  CUdeviceptr ptr_;
  size_t bytes_;
};

/// Device 0's primary context and a stream for the timed work.
struct Gpu {
  std::unique_ptr<CudaDriver> cu;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  int major = 0, minor = 0, sms = 0;
  std::string name;

  GpuTarget target() const { return GpuTarget{major, minor, name, cu->emulated()}; }

  ~Gpu() {
    if (!cu) return;
    if (stream) cu->streamDestroy(stream);
    if (context) cu->primaryCtxRelease(device);
  }

  StatusOr<DeviceMemory> alloc(size_t bytes) {
    CUdeviceptr p = 0;
    INGOT_RETURN_IF_ERROR(cu->check("cuMemAlloc", cu->memAlloc(&p, std::max<size_t>(bytes, 4)))
                              .withPrefix(std::to_string(bytes) + " bytes"));
    return DeviceMemory(*cu, p, bytes);
  }
  StatusOr<DeviceMemory> upload(const void *data, size_t bytes) {
    INGOT_ASSIGN_OR_RETURN(DeviceMemory m, alloc(bytes));
    INGOT_RETURN_IF_ERROR(cu->check("cuMemcpyHtoD", cu->memcpyHtoD(m.ptr(), data, bytes)));
    // A pageable copy may return before its DMA lands, and the timed work runs on a
    // non-blocking stream that does not wait for the legacy one.
    INGOT_RETURN_IF_ERROR(cu->check("cuCtxSynchronize", cu->ctxSynchronize()));
    return m;
  }
  template <class T>
  StatusOr<DeviceMemory> upload(const std::vector<T> &v) {
    return upload(v.data(), v.size() * sizeof(T));
  }
  Status synchronize() { return cu->check("cuStreamSynchronize", cu->streamSynchronize(stream)); }
};

/// Exit code 2 for "no GPU here", as opposed to 1 for a failure on one.
struct Unavailable {
  std::string why;
};

StatusOr<std::unique_ptr<Gpu>> openGpu(Unavailable &unavailable) {
  StatusOr<std::unique_ptr<CudaDriver>> driver = CudaDriver::load();
  if (!driver.ok()) {
    unavailable.why = "no CUDA driver: " + driver.status().message();
    return driver.status();
  }
  auto gpu = std::make_unique<Gpu>();
  gpu->cu = std::move(driver).value();
  CudaDriver &cu = *gpu->cu;
  int count = 0;
  if (cu.deviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    unavailable.why = "the CUDA driver sees no device";
    return failedPrecondition(unavailable.why);
  }
  INGOT_RETURN_IF_ERROR(cu.check("cuDeviceGet", cu.deviceGet(&gpu->device, 0)));
  char name[256] = {};
  cu.deviceGetName(name, sizeof(name), gpu->device);
  gpu->name = name;
  cu.deviceGetAttribute(&gpu->major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, gpu->device);
  cu.deviceGetAttribute(&gpu->minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, gpu->device);
  cu.deviceGetAttribute(&gpu->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, gpu->device);
  if (gpu->major < 8)
    return failedPrecondition(gpu->name + " is sm_" + std::to_string(gpu->major) +
                              std::to_string(gpu->minor) +
                              "; the bf16 attention kernels need sm_80 or newer");
  INGOT_RETURN_IF_ERROR(
      cu.check("cuDevicePrimaryCtxRetain", cu.primaryCtxRetain(&gpu->context, gpu->device)));
  INGOT_RETURN_IF_ERROR(cu.check("cuCtxSetCurrent", cu.ctxSetCurrent(gpu->context)));
  INGOT_RETURN_IF_ERROR(
      cu.check("cuStreamCreate", cu.streamCreate(&gpu->stream, CU_STREAM_NON_BLOCKING)));
  return gpu;
}

/// Median milliseconds of `reps` runs of `launch`, enqueued back to back on the stream with
/// an event between consecutive runs (after two untimed runs), so host enqueue time never
/// shows as GPU time.
StatusOr<double> medianMs(Gpu &gpu, int reps, const std::function<Status()> &launch) {
  CudaDriver &cu = *gpu.cu;
  std::vector<CUevent> events(reps + 1, nullptr);
  Status status;
  for (CUevent &e : events)
    if (status.ok()) status = cu.check("cuEventCreate", cu.eventCreate(&e, CU_EVENT_DEFAULT));
  for (int i = 0; i < 2 && status.ok(); ++i) status = launch();
  if (status.ok()) status = cu.check("cuEventRecord", cu.eventRecord(events[0], gpu.stream));
  for (int i = 0; i < reps && status.ok(); ++i) {
    status = launch();
    if (status.ok()) status = cu.check("cuEventRecord", cu.eventRecord(events[i + 1], gpu.stream));
  }
  if (status.ok()) status = gpu.synchronize();
  std::vector<double> ms;
  for (int i = 0; i < reps && status.ok(); ++i) {
    float t = 0.0f;
    status = cu.check("cuEventElapsedTime", cu.eventElapsedTime(&t, events[i], events[i + 1]));
    ms.push_back(t);
  }
  for (CUevent e : events)
    if (e) cu.eventDestroy(e);
  INGOT_RETURN_IF_ERROR(status);
  return medianOf(ms);
}

void emit(const std::string &impl, const std::string &caseName, double value,
          const std::string &unit) {
  StatusOr<std::string> line = resultLine(impl, caseName, value, unit);
  if (line.ok()) {
    std::cout << *line << std::flush;
  } else {
    std::cerr << "ingot_attention_gpu_bench: " << line.status().message() << "\n";
  }
}

/// Reads `out` ([tokens, kHeads, headDim] of bf16 or f32) and the region error word back:
/// fails on an element still holding the NaN poison, a region trap, or a spot-checked row
/// off the host reference by more than the output type allows.
Status checkOutput(Gpu &gpu, const DeviceMemory &out, const DeviceMemory &error, bool bf16,
                   const PagedLayout &layout, const std::vector<uint16_t> &q,
                   const std::vector<uint16_t> &pool, int headDim, uint64_t seed,
                   const std::string &caseName) {
  CudaDriver &cu = *gpu.cu;
  INGOT_RETURN_IF_ERROR(gpu.synchronize());
  uint32_t trapped = 0;
  INGOT_RETURN_IF_ERROR(cu.check("cuMemcpyDtoH", cu.memcpyDtoH(&trapped, error.ptr(), 4)));
  if (trapped != 0)
    return internalError(caseName + ": the causal region reported trap bits " +
                         std::to_string(trapped));
  const size_t elems = static_cast<size_t>(layout.tokens()) * kHeads * headDim;
  std::vector<uint8_t> raw(elems * (bf16 ? 2 : 4));
  INGOT_RETURN_IF_ERROR(cu.check("cuMemcpyDtoH", cu.memcpyDtoH(raw.data(), out.ptr(), raw.size())));
  auto at = [&](size_t i) {
    if (bf16) {
      uint16_t b;
      std::memcpy(&b, raw.data() + 2 * i, 2);
      return fromBf16(b);
    }
    float f;
    std::memcpy(&f, raw.data() + 4 * i, 4);
    return f;
  };
  for (size_t i = 0; i < elems; ++i)
    if (std::isnan(at(i)))
      return internalError(caseName + ": output element " + std::to_string(i) +
                           " was never written (still NaN)");
  const double tol = bf16 ? 2e-2 : 1e-3;
  uint64_t state = seed;
  auto pick = [&](int n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((state >> 33) % static_cast<uint64_t>(n));
  };
  for (int r = 0; r < kSpotRows; ++r) {
    // The last token of some request (the longest row) and random ones.
    const int b = pick(layout.requests), h = pick(kHeads);
    const int t = r == 0 ? layout.newTokens - 1 : pick(layout.newTokens);
    const std::vector<float> want =
        causalAttentionRow(layout, q, pool, kHeads, kKvHeads, headDim, b, t, h);
    const size_t row = (static_cast<size_t>(layout.queryStart[b] + t) * kHeads + h) * headDim;
    for (int d = 0; d < headDim; ++d) {
      const float got = at(row + d);
      if (!(std::fabs(got - want[d]) <= tol * (1.0 + std::fabs(want[d]))))
        return internalError(caseName + ": out[request " + std::to_string(b) + ", token " +
                             std::to_string(t) + ", head " + std::to_string(h) + "][" +
                             std::to_string(d) + "] = " + std::to_string(got) +
                             ", host reference " + std::to_string(want[d]));
    }
  }
  return okStatus();
}

/// Launch parameters for `layout` over device q / pool / tables, one layer.
attn::PagedAttentionParams pagedParams(const PagedLayout &layout, const DeviceMemory &q,
                                       const DeviceMemory &pool, const DeviceMemory &tables,
                                       const DeviceMemory &lens, const DeviceMemory &starts,
                                       const DeviceMemory &out, int headDim) {
  attn::PagedAttentionParams p{};
  p.q = q.as<void>();
  p.kv_cache = pool.as<void>();
  p.out = out.as<void>();
  p.block_tables = tables.as<int>();
  p.seq_lens = lens.as<int>();
  p.query_start = starts.as<int>();
  p.num_requests = layout.requests;
  p.num_tokens = layout.tokens();
  p.num_heads = kHeads;
  p.num_kv_heads = kKvHeads;
  p.num_layers = 1;
  p.layer = 0;
  p.block_size = kBenchBlockSize;
  p.max_blocks = layout.maxBlocks;
  p.num_splits = 1;
  p.keys_per_split = layout.seqLen + codegen::kDecodeKeyTile;
  p.scale = 1.0f / std::sqrt(static_cast<float>(headDim));
  return p;
}

/// Prefill cases of one head dim: every sequence length over the same q and pool.
Status benchPrefill(Gpu &gpu, CUmodule module, int headDim, const std::vector<int> &seqs, int reps,
                    uint64_t seed) {
  CudaDriver &cu = *gpu.cu;
  const PrefillInstance instance{headDim, kGroup};
  std::vector<uint16_t> q(static_cast<size_t>(kPrefillTokens) * kHeads * headDim);
  fillRandomBf16(q, seed, kQueryAmplitude);
  INGOT_ASSIGN_OR_RETURN(DeviceMemory dq, gpu.upload(q));
  INGOT_ASSIGN_OR_RETURN(DeviceMemory out, gpu.alloc(q.size() * 2));
  const uint32_t zero = 0;
  INGOT_ASSIGN_OR_RETURN(DeviceMemory error, gpu.upload(&zero, 4));
  std::vector<uint16_t> pool;
  std::unique_ptr<DeviceMemory> dpool;
  for (int seq : seqs) {
    const int batch = static_cast<int>(prefillBatch(seq, kPrefillTokens));
    const std::string name = prefillCaseName(headDim, seq, batch);
    INGOT_ASSIGN_OR_RETURN(PagedLayout layout,
                           makePagedLayout(batch, seq, seq, kSpareBlocks, seed + seq));
    if (!dpool || static_cast<int64_t>(pool.size()) != poolElements(layout, kKvHeads, headDim)) {
      pool.assign(poolElements(layout, kKvHeads, headDim), 0);
      fillRandomBf16(pool, seed ^ 0x5eedull);
      dpool.reset();
      INGOT_ASSIGN_OR_RETURN(DeviceMemory m, gpu.upload(pool));
      dpool = std::make_unique<DeviceMemory>(std::move(m));
    }
    INGOT_ASSIGN_OR_RETURN(DeviceMemory tables, gpu.upload(layout.blockTables));
    INGOT_ASSIGN_OR_RETURN(DeviceMemory lens, gpu.upload(layout.seqLens));
    INGOT_ASSIGN_OR_RETURN(DeviceMemory starts, gpu.upload(layout.queryStart));
    attn::PagedAttentionParams p =
        pagedParams(layout, dq, *dpool, tables, lens, starts, out, headDim);
    setPrefillTiles(p, seq, kGroup, seq);
    INGOT_ASSIGN_OR_RETURN(DeviceMemory classes, gpu.alloc(static_cast<size_t>(batch) * kKvHeads *
                                                           p.q_tiles * p.k_tiles));
    p.block_classes = classes.as<unsigned char>();
    rgn::RegionOperands ops{};
    ops.error = error.as<uint32_t>();
    INGOT_RETURN_IF_ERROR(
        cu.check("cuMemsetD8Async", cu.memsetD8Async(out.ptr(), 0xFF, out.bytes(), gpu.stream)));
    INGOT_ASSIGN_OR_RETURN(double maskMs, medianMs(gpu, reps, [&] {
                             return launchBlockMask(cu, module, kVariant, instance, p, ops,
                                                    gpu.stream);
                           }));
    INGOT_ASSIGN_OR_RETURN(double ms, medianMs(gpu, reps, [&] {
                             return launchPrefill(cu, module, kVariant, instance, p, ops,
                                                  gpu.stream);
                           }));
    INGOT_RETURN_IF_ERROR(
        checkOutput(gpu, out, error, true, layout, q, pool, headDim, seed + seq, name));
    const double tflops = causalAttentionFlops(batch, kHeads, seq, headDim) / (ms * 1e-3) / 1e12;
    std::cerr << name << ": " << ms << " ms, " << tflops << " TFLOP/s (block mask " << maskMs
              << " ms, once per step)\n";
    emit("ingot", name, tflops, "TFLOP/s");
    emit("ingot_block_mask", name, maskMs, "ms");
  }
  return okStatus();
}

/// Paged decode at kDecodeBatch x kDecodeLen in bf16 and f32 (the same values), and a
/// device-to-device copy of the same K/V bytes.
Status benchDecode(Gpu &gpu, CUmodule module, int reps, uint64_t seed) {
  CudaDriver &cu = *gpu.cu;
  const int D = kDecodeHeadDim;
  INGOT_ASSIGN_OR_RETURN(PagedLayout layout,
                         makePagedLayout(kDecodeBatch, kDecodeLen, 1, kSpareBlocks, seed));
  std::vector<uint16_t> q(static_cast<size_t>(layout.tokens()) * kHeads * D);
  std::vector<uint16_t> pool(poolElements(layout, kKvHeads, D));
  fillRandomBf16(q, seed + 1, kQueryAmplitude);
  fillRandomBf16(pool, seed + 2);
  INGOT_ASSIGN_OR_RETURN(DeviceMemory tables, gpu.upload(layout.blockTables));
  INGOT_ASSIGN_OR_RETURN(DeviceMemory lens, gpu.upload(layout.seqLens));
  INGOT_ASSIGN_OR_RETURN(DeviceMemory starts, gpu.upload(layout.queryStart));
  const uint32_t zero = 0;
  INGOT_ASSIGN_OR_RETURN(DeviceMemory error, gpu.upload(&zero, 4));
  // The CUDA backend's split plan for this step (runtime/backend/cuda/step_pack.h).
  const SplitPlan split =
      chooseSplits(kDecodeLen, int64_t{kDecodeBatch} * kKvHeads, gpu.sms, codegen::kDecodeKeyTile);
  const size_t partials = static_cast<size_t>(layout.tokens()) * kHeads * split.num_splits;
  INGOT_ASSIGN_OR_RETURN(DeviceMemory po, gpu.alloc(partials * D * 4));
  INGOT_ASSIGN_OR_RETURN(DeviceMemory pm, gpu.alloc(partials * 4));
  INGOT_ASSIGN_OR_RETURN(DeviceMemory ps, gpu.alloc(partials * 4));
  for (AttentionDtype dtype : {AttentionDtype::kBF16, AttentionDtype::kF32}) {
    const bool bf16 = dtype == AttentionDtype::kBF16;
    const size_t elem = bf16 ? 2 : 4;
    const std::string name = decodeCaseName(bf16 ? "bf16" : "f32", D, kDecodeBatch, kDecodeLen);
    std::unique_ptr<DeviceMemory> dq, dpool;
    if (bf16) {
      INGOT_ASSIGN_OR_RETURN(DeviceMemory a, gpu.upload(q));
      INGOT_ASSIGN_OR_RETURN(DeviceMemory b, gpu.upload(pool));
      dq = std::make_unique<DeviceMemory>(std::move(a));
      dpool = std::make_unique<DeviceMemory>(std::move(b));
    } else {  // widen in chunks: f32 holds exactly the bf16 values
      auto widen = [&](const std::vector<uint16_t> &src) -> StatusOr<DeviceMemory> {
        INGOT_ASSIGN_OR_RETURN(DeviceMemory m, gpu.alloc(src.size() * 4));
        const size_t chunk = size_t{16} << 20;
        std::vector<float> buf;
        for (size_t i = 0; i < src.size(); i += chunk) {
          const size_t n = std::min(chunk, src.size() - i);
          buf.resize(n);
          for (size_t j = 0; j < n; ++j) buf[j] = fromBf16(src[i + j]);
          INGOT_RETURN_IF_ERROR(
              cu.check("cuMemcpyHtoD", cu.memcpyHtoD(m.ptr() + i * 4, buf.data(), n * 4)));
          INGOT_RETURN_IF_ERROR(
              cu.check("cuCtxSynchronize", cu.ctxSynchronize()));  // buf is reused
        }
        return m;
      };
      INGOT_ASSIGN_OR_RETURN(DeviceMemory a, widen(q));
      INGOT_ASSIGN_OR_RETURN(DeviceMemory b, widen(pool));
      dq = std::make_unique<DeviceMemory>(std::move(a));
      dpool = std::make_unique<DeviceMemory>(std::move(b));
    }
    INGOT_ASSIGN_OR_RETURN(DeviceMemory out, gpu.alloc(q.size() * elem));
    INGOT_RETURN_IF_ERROR(
        cu.check("cuMemsetD8Async", cu.memsetD8Async(out.ptr(), 0xFF, out.bytes(), gpu.stream)));
    attn::PagedAttentionParams p = pagedParams(layout, *dq, *dpool, tables, lens, starts, out, D);
    p.num_splits = split.num_splits;
    p.keys_per_split =
        split.num_splits == 1 ? kDecodeLen + codegen::kDecodeKeyTile : split.keys_per_split;
    p.partial_out = po.as<float>();
    p.partial_max = pm.as<float>();
    p.partial_sum = ps.as<float>();
    rgn::RegionOperands ops{};
    ops.error = error.as<uint32_t>();
    const DecodeInstance instance{dtype, D, kGroup};
    INGOT_ASSIGN_OR_RETURN(double ms, medianMs(gpu, reps, [&] {
                             return launchDecode(cu, module, kVariant, instance, p, ops,
                                                 gpu.stream);
                           }));
    INGOT_RETURN_IF_ERROR(checkOutput(gpu, out, error, bf16, layout, q, pool, D, seed + 3, name));
    const int64_t bytes = kvBytesRead(kDecodeBatch, kDecodeLen, kKvHeads, D, elem);
    INGOT_ASSIGN_OR_RETURN(DeviceMemory copy, gpu.alloc(bytes));
    INGOT_ASSIGN_OR_RETURN(double copyMs, medianMs(gpu, reps, [&] {
                             return cu.check(
                                 "cuMemcpyDtoDAsync",
                                 cu.memcpyDtoDAsync(copy.ptr(), dpool->ptr(), bytes, gpu.stream));
                           }));
    const double gbps = bytes / (ms * 1e-3) / 1e9;
    const double copyGbps = 2.0 * bytes / (copyMs * 1e-3) / 1e9;
    std::cerr << name << ": " << split.num_splits << " split(s) of " << p.keys_per_split
              << " keys, " << ms << " ms, " << gbps << " GB/s; copy of the same "
              << bytes / double(1 << 30) << " GiB " << copyMs << " ms, " << copyGbps
              << " GB/s (read + written)\n";
    emit("ingot", name, gbps, "GB/s");
    emit("ingot_copy", name, copyGbps, "GB/s");
    emit("ingot_vs_copy", name, gbps / copyGbps, "ratio");
  }
  return okStatus();
}

int run(bool quick) {
  Unavailable unavailable;
  StatusOr<std::unique_ptr<Gpu>> opened = openGpu(unavailable);
  if (!opened.ok()) {
    std::cerr << "ingot_attention_gpu_bench: "
              << (unavailable.why.empty() ? opened.status().message() : unavailable.why)
              << (unavailable.why.empty() ? "" : " (this benchmark needs an NVIDIA GPU)") << "\n";
    return unavailable.why.empty() ? 1 : 2;
  }
  Gpu &gpu = **opened;
  std::cout << "# device: " << gpu.name << ", sm_" << gpu.major << gpu.minor << ", " << gpu.sms
            << " SMs" << (gpu.cu->emulated() ? " (emulated: times are CPU time, meaningless)" : "")
            << "\n";
  if (gpu.cu->emulated()) {
    kPrefillTokens = 512;
    kDecodeBatch = 2;
    kDecodeLen = 256;
    quick = true;
  }
  auto fail = [](const Status &s) {
    std::cerr << "ingot_attention_gpu_bench: error: " << s.message() << "\n";
    return 1;
  };
  // One translation unit with the causal variant's four kernels, compiled for this GPU.
  StatusOr<std::string> variant =
      codegen::emitAttentionVariantHeader(kVariant, causalMaskBytecode(), {}, "region_examples.cc");
  if (!variant.ok()) return fail(variant.status());
  StatusOr<std::string> source =
      codegen::attentionKernelSource(*variant, kVariant,
                                     {{AttentionDtype::kBF16, kDecodeHeadDim, kGroup},
                                      {AttentionDtype::kF32, kDecodeHeadDim, kGroup}},
                                     {{64, kGroup}, {128, kGroup}});
  if (!source.ok()) return fail(source.status());
  StatusOr<CUmodule> module = loadKernelModule(*gpu.cu, *source, "attention_bench",
                                               kernelTarget(gpu.target()));
  if (!module.ok()) return fail(module.status());

  const uint64_t seed = 0x1b07u;
  const std::vector<int> seqs = gpu.cu->emulated() ? std::vector<int>{256}
                                : quick            ? std::vector<int>{1024, 8192}
                                                   : std::vector<int>{1024, 2048, 4096, 8192};
  const int prefillReps = gpu.cu->emulated() ? 1 : quick ? 3 : 10;
  const int decodeReps = gpu.cu->emulated() ? 1 : quick ? 5 : 20;
  for (int d : {64, 128}) {
    Status s = benchPrefill(gpu, *module, d, seqs, prefillReps, seed + d);
    if (!s.ok()) return fail(s);
  }
  Status s = benchDecode(gpu, *module, decodeReps, seed);
  if (!s.ok()) return fail(s);
  gpu.cu->moduleUnload(*module);
  return 0;
}

}  // namespace
}  // namespace ingot::bench

int main(int argc, char **argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::cerr << "ingot_attention_gpu_bench: unknown argument '" << argv[i]
                << "'\nusage: ingot_attention_gpu_bench [--quick]\n";
      return 2;
    }
  }
  return ingot::bench::run(quick);
}
