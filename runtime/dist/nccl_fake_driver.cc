// A fake libcuda + libnccl in one shared object, for testing NcclCommunicator without a GPU.
// The driver part is the shared fake of runtime/backend/cuda/fake_libcuda.cc.
//
// Built with the soname libcuda.so.1: a test that opens it first by path makes the
// runtime's dlopen("libcuda.so.1") return it, and passes its path as the NCCL library.
// Device memory is host memory; a one-rank collective copies its input as NCCL would; the
// fake*() controls make init, enqueue or completion hang, lag or fail, the way a dead or slow
// peer makes real NCCL behave (in-progress states, ncclRemoteError, a stream that never
// drains), so the communicator's timeouts and aborts can be checked on any machine.
#include <cuda.h>
#include <nccl.h>

#include <cstring>

namespace {

/// What the next init and collectives do (set by the test through fakeSetModes).
int gInitMode = 0;        // 0 completes after a few polls, 1 never completes, 2 fails
int gCollectiveMode = 0;  // 0 completes, 1 never completes, 2 peer dies, 3 enqueue in progress
int gAborts = 0, gDestroys = 0, gLastBlocking = -1, gCollectives = 0;
/// Polls of cuStreamQuery before the stream drains (-1: never).
int gStreamBusyPolls = 0;

struct FakeComm {
  int nranks = 1;
  int rank = 0;
  int pollsLeft = 0;                 // polls that still read ncclInProgress
  ncclResult_t state = ncclSuccess;  // then this
};

size_t typeBytes(ncclDataType_t type) {
  return type == ncclBfloat16 || type == ncclFloat16 ? 2 : type == ncclFloat64 ? 8 : 4;
}

ncclResult_t collective(const void* send, void* recv, size_t bytes, FakeComm* comm) {
  ++gCollectives;
  if (comm->nranks == 1 && send != recv) std::memmove(recv, send, bytes);
  gStreamBusyPolls = gCollectiveMode == 0 ? 3 : gCollectiveMode == 3 ? 1 : -1;
  if (gCollectiveMode == 2) {  // NCCL notices the dead peer a few polls later
    comm->pollsLeft = 3;
    comm->state = ncclRemoteError;
  }
  if (gCollectiveMode == 3) {  // nonblocking enqueue: in progress, then success
    comm->pollsLeft = 2;
    comm->state = ncclSuccess;
    return ncclInProgress;
  }
  return ncclSuccess;
}

}  // namespace

extern "C" {

// ------------------------------------------------------------------ controls for the test
void fakeSetModes(int init, int collective) {
  gInitMode = init;
  gCollectiveMode = collective;
}
int fakeAborts() { return gAborts; }
int fakeDestroys() { return gDestroys; }
int fakeLastBlocking() { return gLastBlocking; }
int fakeCollectives() { return gCollectives; }

// ------------------------------------------------------------------ CUDA driver
// Every other driver entry point comes from runtime/backend/cuda/fake_libcuda.cc, linked into
// this library; the stream query is here because the collectives above decide when it drains.
CUresult cuStreamQuery(CUstream) {
  if (gStreamBusyPolls == 0) return CUDA_SUCCESS;
  if (gStreamBusyPolls > 0) --gStreamBusyPolls;
  return CUDA_ERROR_NOT_READY;
}

// ------------------------------------------------------------------ NCCL
ncclResult_t ncclGetVersion(int* version) { *version = NCCL_VERSION_CODE; return ncclSuccess; }
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) id->internal[i] = static_cast<char>(i * 7);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId, int rank,
                                    ncclConfig_t* config) {
  gLastBlocking = config ? config->blocking : -1;
  auto* c = new FakeComm();
  c->nranks = nranks;
  c->rank = rank;
  c->pollsLeft = gInitMode == 1 ? 1 << 30 : 3;
  c->state = gInitMode == 2 ? ncclSystemError : ncclSuccess;
  *comm = reinterpret_cast<ncclComm_t>(c);
  return ncclInProgress;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  auto* c = reinterpret_cast<FakeComm*>(comm);
  if (c->pollsLeft > 0) {
    --c->pollsLeft;
    *state = ncclInProgress;
  } else {
    *state = c->state;
  }
  return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  auto* c = reinterpret_cast<FakeComm*>(comm);
  c->pollsLeft = 2;
  c->state = ncclSuccess;
  return ncclInProgress;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  ++gDestroys;
  delete reinterpret_cast<FakeComm*>(comm);
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  ++gAborts;
  gStreamBusyPolls = 0;  // aborting ends the kernels still waiting on peers
  delete reinterpret_cast<FakeComm*>(comm);
  return ncclSuccess;
}
ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t, ncclComm_t comm, cudaStream_t) {
  return collective(send, recv, count * typeBytes(type), reinterpret_cast<FakeComm*>(comm));
}
ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t) {
  return collective(send, recv, count * typeBytes(type), reinterpret_cast<FakeComm*>(comm));
}
const char* ncclGetErrorString(ncclResult_t result) {
  return result == ncclRemoteError ? "remote process exited or there was a network error"
                                   : "fake NCCL error";
}
const char* ncclGetLastError(ncclComm_t) { return "fake: peer 1 closed its connection"; }

}  // extern "C"
