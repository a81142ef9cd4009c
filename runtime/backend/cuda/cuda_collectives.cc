// A CUDA tensor-parallel rank's collective steps: all_reduce / all_gather through the group.
#include <algorithm>
#include <string>
#include <vector>

#include "runtime/backend/cuda/cuda_backend_state.h"
#include "runtime/backend/cuda/cuda_ops.h"
#include "runtime/dist/communicator.h"

namespace ingot {

using schema::OpKind;

Status enqueueCollective(CudaBackendState& s, size_t index, const StepDims& dims) {
  CudaDriver& cu = *s.cu;
  StepBuffers& b = s.buffers;
  const ProgramPlan& plan = *s.plan;
  const PlannedStep& p = plan.steps[index];
  const bool reduce = p.op == OpKind::AllReduce;
  const std::string where =
      "step " + std::to_string(index) + (reduce ? " (all_reduce)" : " (all_gather)");
  const PlannedBuffer& src = plan.buffers[p.inputs[0]];
  const PlannedBuffer& dst = plan.buffers[p.outputs[0]];
  const int64_t rows = src.logit_rows ? dims.logit_rows : dims.tokens;
  const int64_t W = src.width, n = rows * W;
  const CUdeviceptr x = b.slots[src.slot].ptr();
  const CUdeviceptr y =
      dst.kind == schema::BufferKind::Output ? b.logits.ptr() : b.slots[dst.slot].ptr();
  if (n == 0) return okStatus();
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  // A group of one (an unsharded program with collectives): the collective is a copy.
  if (!s.comm || s.world == 1) {
    if (x == y) return okStatus();
    return cu.check("cuMemcpyDtoDAsync", cu.memcpyDtoDAsync(y, x, bytes, s.stream)).withPrefix(where);
  }
  if (s.stream_comm) {
    // Stream-ordered: behind the kernels that produce the input, ahead of those that read
    // the output, with no host wait (the step waits once at its end); capturable.
    if (reduce) {
      if (x != y)
        INGOT_RETURN_IF_ERROR(
            cu.check("cuMemcpyDtoDAsync", cu.memcpyDtoDAsync(y, x, bytes, s.stream)).withPrefix(where));
      return s.stream_comm->enqueueAllReduceSum(y, n, s.stream).withPrefix(where);
    }
    // ensureBuffers sized the slices for every gather of a step that fits the buffers.
    if (b.gathered_slices.bytes() < bytes * static_cast<size_t>(s.world))
      return internalError(where + ": the all_gather slices hold " +
                           std::to_string(b.gathered_slices.bytes()) + " bytes, the step needs " +
                           std::to_string(bytes * static_cast<size_t>(s.world)));
    INGOT_RETURN_IF_ERROR(
        s.stream_comm->enqueueAllGather(x, n, b.gathered_slices.ptr(), s.stream).withPrefix(where));
  } else if (reduce) {
    // In place on the output (the communicator's sum is in place), after a copy of the input.
    if (x != y)
      INGOT_RETURN_IF_ERROR(
          cu.check("cuMemcpyDtoDAsync", cu.memcpyDtoDAsync(y, x, bytes, s.stream)).withPrefix(where));
    // The collective runs on the communicator's own stream and returns when complete: the
    // kernels that produced its input must be finished first, and the ones after it are
    // enqueued only once it returned.
    INGOT_RETURN_IF_ERROR(
        cu.check("cuStreamSynchronize", cu.streamSynchronize(s.stream)).withPrefix(where));
    return s.comm->allReduceSum(reinterpret_cast<float*>(y), n).withPrefix(where);
  } else {
    const size_t gatheredBytes = bytes * static_cast<size_t>(s.world);
    if (b.gathered_slices.bytes() < gatheredBytes) {
      INGOT_RETURN_IF_ERROR(cu.check("cuStreamSynchronize", cu.streamSynchronize(s.stream)));
      INGOT_RETURN_IF_ERROR(b.gathered_slices.allocate(cu, gatheredBytes, "all_gather slices")
                                .withPrefix(where));
    }
    INGOT_RETURN_IF_ERROR(
        cu.check("cuStreamSynchronize", cu.streamSynchronize(s.stream)).withPrefix(where));
    INGOT_RETURN_IF_ERROR(s.comm->allGather(reinterpret_cast<const float*>(x), n,
                                            reinterpret_cast<float*>(b.gathered_slices.ptr()))
                              .withPrefix(where));
  }
  // The slices arrive rank-major, [N][rows][W]; the output is [rows][N * W]: slice r goes
  // to columns [r W, (r + 1) W) of every row, one strided copy per rank.
  const size_t sliceRow = static_cast<size_t>(W) * sizeof(float);
  for (int32_t r = 0; r < s.world; ++r) {
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = b.gathered_slices.ptr() + static_cast<CUdeviceptr>(r) * bytes;
    copy.srcPitch = sliceRow;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = y + static_cast<CUdeviceptr>(r) * sliceRow;
    copy.dstPitch = sliceRow * static_cast<size_t>(s.world);
    copy.WidthInBytes = sliceRow;
    copy.Height = static_cast<size_t>(rows);
    INGOT_RETURN_IF_ERROR(
        cu.check("cuMemcpy2DAsync", cu.memcpy2DAsync(&copy, s.stream)).withPrefix(where));
  }
  return okStatus();
}

StatusOr<int64_t> agreeKvBlocks(CudaBackendState& s, int64_t mine) {
  if (!s.comm || s.world == 1) return mine;
  CudaDriver& cu = *s.cu;
  // Block counts travel as f32 (exact below 2^24 blocks, far more than any GPU holds).
  constexpr int64_t kExactFloatLimit = int64_t{1} << 24;
  const float value = static_cast<float>(std::min(mine, kExactFloatLimit));
  DeviceMemory counts;
  INGOT_RETURN_IF_ERROR(counts.allocate(cu, static_cast<size_t>(s.world + 1) * sizeof(float),
                                        "the KV block counts of the group"));
  INGOT_RETURN_IF_ERROR(cu.check("cuMemcpyHtoD", cu.memcpyHtoD(counts.ptr(), &value, sizeof(float))));
  INGOT_RETURN_IF_ERROR(s.comm->allGather(reinterpret_cast<const float*>(counts.ptr()), 1,
                                          reinterpret_cast<float*>(counts.ptr() + sizeof(float)))
                            .withPrefix("agreeing on the KV pool size"));
  std::vector<float> all(static_cast<size_t>(s.world));
  INGOT_RETURN_IF_ERROR(cu.check("cuMemcpyDtoH", cu.memcpyDtoH(all.data(), counts.ptr() + sizeof(float),
                                                               all.size() * sizeof(float))));
  int64_t least = mine;
  for (size_t r = 0; r < all.size(); ++r) {
    const int64_t theirs = static_cast<int64_t>(all[r]);
    if (theirs < 1)
      return failedPrecondition("tp rank " + std::to_string(r) +
                                " has no room for a KV pool (see its error)");
    least = std::min(least, theirs);
  }
  return least;
}

Status enqueueCollectiveCuda(const CudaLaunch& l, const PlannedStep&, const DeviceStep&) {
  return enqueueCollective(*l.s, l.index, *l.dims);
}

}  // namespace ingot
