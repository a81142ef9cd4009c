// The fake CUDA driver's memory, streams, events and graphs: its entry points that move
// data and order work (fake_libcuda.cc has the rest and says what the fake does), over the
// state of fake_libcuda_state.h.
#include <cuda.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "testing/cuda/fake_libcuda_state.h"

#ifdef INGOT_FAKE_CUDA_EXECUTING
#include "core/simt/emulator.h"
#endif

using namespace ingot::fake_cuda;  // the entry points below use the shared state unqualified

namespace {

/// Runs `op` now, or records it into the open capture.
CUresult streamOp(std::function<void()> op) {
  {
    std::lock_guard<std::mutex> lock(gMutex);
    if (gCapturing) {
      gCaptured.push_back(FakeGraphNode{FakeLaunch{}, std::move(op)});
      return CUDA_SUCCESS;
    }
  }
  op();
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

// ------------------------------------------------------------------ memory (host memory)
CUresult cuMemGetInfo(size_t* free, size_t* total) {
#ifdef INGOT_FAKE_CUDA_EXECUTING
  *total = ingot::simt::deviceMemoryTotal();
  *free = *total - ingot::simt::deviceMemoryUsed();
#else
  *total = size_t{16} << 30;
  *free = *total / 2;
#endif
  return CUDA_SUCCESS;
}
CUresult cuMemAlloc(CUdeviceptr* ptr, size_t bytes) {
#ifdef INGOT_FAKE_CUDA_EXECUTING
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  *ptr = reinterpret_cast<CUdeviceptr>(ingot::simt::deviceAlloc(bytes));
#else
  *ptr = reinterpret_cast<CUdeviceptr>(std::malloc(bytes));
#endif
  return *ptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuMemFree(CUdeviceptr ptr) {
#ifdef INGOT_FAKE_CUDA_EXECUTING
  ingot::simt::deviceFree(reinterpret_cast<void*>(ptr));
#else
  std::free(reinterpret_cast<void*>(ptr));
#endif
  return CUDA_SUCCESS;
}
CUresult cuMemAllocHost(void** ptr, size_t bytes) {
  *ptr = std::malloc(bytes);
  return *ptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuMemFreeHost(void* ptr) {
  std::free(ptr);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t bytes) {
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t bytes) {
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream) {
  return streamOp([=] { std::memcpy(reinterpret_cast<void*>(dst), src, bytes); });
}
CUresult cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream) {
  return streamOp([=] { std::memcpy(dst, reinterpret_cast<const void*>(src), bytes); });
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream) {
  return streamOp([=] {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  });
}
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* request, CUstream) {
  if (request->WidthInBytes > request->srcPitch || request->WidthInBytes > request->dstPitch)
    return CUDA_ERROR_INVALID_VALUE;
  const CUDA_MEMCPY2D params = *request;
  return streamOp([params] {
  const CUDA_MEMCPY2D* copy = &params;
  // Device and host memory are both host memory here: every kind copies alike.
  const auto* src = static_cast<const char*>(copy->srcMemoryType == CU_MEMORYTYPE_HOST
                                                 ? copy->srcHost
                                                 : reinterpret_cast<const void*>(copy->srcDevice));
  auto* dst = static_cast<char*>(copy->dstMemoryType == CU_MEMORYTYPE_HOST
                                     ? copy->dstHost
                                     : reinterpret_cast<void*>(copy->dstDevice));
  for (size_t row = 0; row < copy->Height; ++row)
    std::memmove(dst + (copy->dstY + row) * copy->dstPitch + copy->dstXInBytes,
                 src + (copy->srcY + row) * copy->srcPitch + copy->srcXInBytes, copy->WidthInBytes);
  std::lock_guard<std::mutex> lock(gMutex);
  ++gStats.copies2d;
  });
}
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count, CUstream) {
  return streamOp([=] { std::memset(reinterpret_cast<void*>(dst), value, count); });
}
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count, CUstream) {
  return streamOp([=] {
    auto* words = reinterpret_cast<unsigned int*>(dst);
    for (size_t i = 0; i < count; ++i) words[i] = value;
  });
}

// ------------------------------------------------------------------ streams, events, graphs
CUresult cuStreamCreate(CUstream* stream, unsigned int) {
  *stream = reinterpret_cast<CUstream>(new int(0));
  return CUDA_SUCCESS;
}
CUresult cuStreamDestroy(CUstream stream) {
  delete reinterpret_cast<int*>(stream);
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream) { return sticky(); }
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned int) { return CUDA_SUCCESS; }
// An event holds the host time it was recorded at (work is synchronous here).
CUresult cuEventCreate(CUevent* event, unsigned int) {
  *event = reinterpret_cast<CUevent>(new double(0.0));
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy(CUevent event) {
  delete reinterpret_cast<double*>(event);
  return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent event, CUstream) {
  if (!event) return CUDA_ERROR_INVALID_HANDLE;
  *reinterpret_cast<double*>(event) =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
  return CUDA_SUCCESS;
}
CUresult cuEventSynchronize(CUevent) { return sticky(); }
CUresult cuEventElapsedTime(float* milliseconds, CUevent start, CUevent end) {
  // The fake device's work takes no time; the emulated one's takes the emulation's.
  *milliseconds = kExecuting ? static_cast<float>(*reinterpret_cast<double*>(end) -
                                                  *reinterpret_cast<double*>(start))
                             : 0.0f;
  return CUDA_SUCCESS;
}
CUresult cuStreamBeginCapture(CUstream, CUstreamCaptureMode) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gCapturing) return CUDA_ERROR_ILLEGAL_STATE;
  gCapturing = true;
  gCaptured.clear();
  ++gStats.captures;
  return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream, CUgraph* graph) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gCapturing) return CUDA_ERROR_ILLEGAL_STATE;
  gCapturing = false;
  // Moved out: the graph owns what it captured (a fake NCCL collective's reference ends
  // with the last graph holding it, as with real NCCL's persistent references).
  *graph = reinterpret_cast<CUgraph>(new FakeGraph{std::move(gCaptured)});
  gCaptured.clear();
  return CUDA_SUCCESS;
}
CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  std::lock_guard<std::mutex> lock(gMutex);
  *exec = reinterpret_cast<CUgraphExec>(new FakeGraph(*reinterpret_cast<FakeGraph*>(graph)));
  ++gStats.liveGraphExecs;
  return CUDA_SUCCESS;
}
CUresult cuGraphLaunch(CUgraphExec exec, CUstream) {
  std::vector<FakeGraphNode> nodes;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    if (gCapturing) return CUDA_ERROR_ILLEGAL_STATE;  // not on a capturing stream here
    nodes = reinterpret_cast<FakeGraph*>(exec)->nodes;
    ++gStats.graphLaunches;
    gReplaying = true;
  }
  // Operations run outside the lock: they take it themselves (counters, the log).
  CUresult result = CUDA_SUCCESS;
  for (FakeGraphNode& node : nodes) {
    if (node.op) {
      node.op();
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(gMutex);
      node.launch.fromGraph = true;
      gLaunches.push_back(node.launch);
    }
#ifdef INGOT_FAKE_CUDA_EXECUTING
    if (result == CUDA_SUCCESS) result = execute(node.launch);
#endif
  }
  std::lock_guard<std::mutex> lock(gMutex);
  gReplaying = false;
  return result;
}
CUresult cuGraphExecDestroy(CUgraphExec exec) {
  std::lock_guard<std::mutex> lock(gMutex);
  delete reinterpret_cast<FakeGraph*>(exec);
  --gStats.liveGraphExecs;
  return CUDA_SUCCESS;
}
CUresult cuGraphDestroy(CUgraph graph) {
  delete reinterpret_cast<FakeGraph*>(graph);
  return CUDA_SUCCESS;
}

}  // extern "C"
