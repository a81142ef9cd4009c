// A fake libcuda + libnccl in one shared object, for testing NcclCommunicator without a GPU.
// The driver part is the shared fake of testing/cuda/fake_libcuda.cc.
//
// Built with the soname libcuda.so.1: a test that opens it first by path makes the
// runtime's dlopen("libcuda.so.1") return it, and passes its path as the NCCL library.
// Device memory is host memory; a one-rank collective copies its input as NCCL would, and a
// group of N ranks behaves as if every rank held this rank's input ("mirrored" ranks: a sum
// is N times the input, a gather N copies of it), so data can be followed through it. A
// collective enqueued while the fake driver captures a graph runs when the graph is launched
// (fakeCudaDefer), and every collective that runs is logged among the kernel launches as
// "ncclAllReduce" / "ncclAllGather" with dims {count, a hash of its input bytes, ranks}. The
// fake*() controls make init, enqueue or completion hang, lag or fail, the way a dead or slow
// peer makes real NCCL behave (in-progress states, ncclRemoteError, a stream that never
// drains), so the communicator's timeouts and aborts can be checked on any machine.
// Like NCCL 2.26 and newer, ncclCommAbort returns only once every graph that captured one of
// the communicator's collectives is destroyed; the fake waits 2 s for that and then counts
// a hang (fakeAbortHangs) instead of blocking for good.
//
// Executing mode (INGOT_FAKE_CUDA_EXECUTING, in the emulated CUDA stack): the ranks are real.
// Every ncclGetUniqueId is a new group; a communicator's init completes once all its ranks
// (threads of this process, one per emulated GPU) have joined; a collective waits for every
// rank's call and then sums (f32 and bf16, in f32) or concatenates their inputs into every
// rank's output, as NCCL does, at once or when a graph holding it is launched.
#include <cuda.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "testing/cuda/fake_libcuda.h"

namespace {

/// What the next init and collectives do (set by the test through fakeSetModes).
int gInitMode = 0;        // 0 completes after a few polls, 1 never completes, 2 fails
int gCollectiveMode = 0;  // 0 completes, 1 never completes, 2 peer dies, 3 enqueue in progress
int gAborts = 0, gDestroys = 0, gLastBlocking = -1, gCollectives = 0;
/// Polls of cuStreamQuery before the stream drains (-1: never).
int gStreamBusyPolls = 0;

struct Group;

struct FakeComm {
  int nranks = 1;
  int rank = 0;
  int pollsLeft = 0;                 // polls that still read ncclInProgress
  ncclResult_t state = ncclSuccess;  // then this
  int persistentRefs = 0;            // captured collectives whose graphs still exist
  Group* group = nullptr;            // executing mode: the ranks it reduces with
};

/// Executing mode: the ranks of one unique id. Never freed (communicators are not either).
struct Group {
  int nranks = 0;
  std::mutex mutex;
  std::condition_variable changed;
  int joined = 0;
  bool aborted = false;
  // The collective being met: each rank's call, and how many calls have completed.
  std::vector<const struct FakeCollective*> calls;
  int arrived = 0;
  uint64_t completed = 0;
};
std::mutex gGroupsMutex;
std::vector<std::pair<std::string, Group*>> gGroups;
uint64_t gNextId = 0;

/// Guards the communicators' persistentRefs; signalled when one drops.
std::mutex gRefsMutex;
std::condition_variable gRefsDropped;
int gAbortHangs = 0;

/// Every communicator made, never freed before exit: a captured graph may replay a collective
/// of a communicator that was aborted since (real NCCL then fails it; the fake copies).
std::mutex gCommsMutex;
std::vector<std::unique_ptr<FakeComm>> gComms;

size_t typeBytes(ncclDataType_t type) {
  return type == ncclBfloat16 || type == ncclFloat16 ? 2 : type == ncclFloat64 ? 8 : 4;
}

/// One collective, as enqueued.
struct FakeCollective {
  bool gather;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  FakeComm* comm;
  bool captured = false;  // holds a persistent reference on comm until its graphs go
};

/// FNV-1a of `bytes` bytes: the log's fingerprint of a collective's input.
unsigned hashBytes(const void* data, size_t bytes) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ static_cast<const uint8_t*>(data)[i]) * 16777619u;
  return h;
}

/// Multiplies `count` values of `type` by `factor` in place (the mirrored ranks' sum).
void scale(void* data, size_t count, ncclDataType_t type, int factor) {
  if (type == ncclFloat32) {
    auto* v = static_cast<float*>(data);
    for (size_t i = 0; i < count; ++i) v[i] *= static_cast<float>(factor);
  } else if (type == ncclBfloat16) {  // bf16 = the high half of an f32
    auto* v = static_cast<uint16_t*>(data);
    for (size_t i = 0; i < count; ++i) {
      uint32_t bits = uint32_t{v[i]} << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      f *= static_cast<float>(factor);
      std::memcpy(&bits, &f, 4);
      v[i] = static_cast<uint16_t>(bits >> 16);
    }
  }
}

#ifdef INGOT_FAKE_CUDA_EXECUTING
/// `count` values of `type` at `data`, element i as f32.
float valueAt(const void* data, ncclDataType_t type, size_t i) {
  if (type == ncclBfloat16) {
    const uint32_t bits = uint32_t{static_cast<const uint16_t*>(data)[i]} << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  return static_cast<const float*>(data)[i];
}
void storeAt(void* data, ncclDataType_t type, size_t i, float v) {
  if (type == ncclBfloat16) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits += 0x7fffu + ((bits >> 16) & 1u);  // to nearest even (finite sums)
    static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(bits >> 16);
  } else {
    static_cast<float*>(data)[i] = v;
  }
}

/// Meets the other ranks' calls of the group's current collective; the last to arrive
/// computes every rank's output. False when the group was aborted or a peer never came.
bool meet(const FakeCollective& c) {
  Group& g = *c.comm->group;
  std::unique_lock<std::mutex> lock(g.mutex);
  if (g.aborted) return false;
  g.calls[c.comm->rank] = &c;
  const uint64_t round = g.completed;
  if (++g.arrived == g.nranks) {
    const size_t bytes = c.count * typeBytes(c.type);
    if (c.gather) {
      for (const FakeCollective* out : g.calls)
        for (int r = 0; r < g.nranks; ++r)
          std::memmove(static_cast<char*>(out->recv) + static_cast<size_t>(r) * bytes, g.calls[r]->send,
                       bytes);
    } else {
      std::vector<float> sum(c.count, 0.0f);
      for (const FakeCollective* in : g.calls)  // rank order: every rank gets the same bits
        for (size_t i = 0; i < c.count; ++i) sum[i] += valueAt(in->send, c.type, i);
      for (const FakeCollective* out : g.calls)
        for (size_t i = 0; i < c.count; ++i) storeAt(out->recv, c.type, i, sum[i]);
    }
    g.arrived = 0;
    ++g.completed;
    g.changed.notify_all();
    return true;
  }
  // A peer that never comes: real NCCL hangs until its abort; the fake gives up after
  // 120 s with an error on the communicator.
  if (!g.changed.wait_for(lock, std::chrono::seconds(120),
                          [&] { return g.completed != round || g.aborted; }) ||
      g.aborted) {
    c.comm->state = g.aborted ? ncclRemoteError : ncclSystemError;
    return false;
  }
  return true;
}
#endif

/// Runs one collective on the fake device (at enqueue, or at a graph launch).
void execute(void* arg) {
  const auto& c = *static_cast<const FakeCollective*>(arg);
#ifdef INGOT_FAKE_CUDA_EXECUTING
  {
    const size_t bytes = c.count * typeBytes(c.type);
    const unsigned dims[6] = {static_cast<unsigned>(c.count), hashBytes(c.send, bytes),
                              static_cast<unsigned>(c.comm->nranks), 0, 0, 0};
    fakeCudaLogOp(c.gather ? "ncclAllGather" : "ncclAllReduce", dims);
    if (c.comm->group) {
      meet(c);
    } else if (c.send != c.recv) {
      std::memmove(c.recv, c.send, bytes);
    }
    gStreamBusyPolls = 0;  // the stream has drained: the collective is done
    return;
  }
#endif
  const size_t bytes = c.count * typeBytes(c.type);
  const unsigned dims[6] = {static_cast<unsigned>(c.count), hashBytes(c.send, bytes),
                            static_cast<unsigned>(c.comm->nranks), 0, 0, 0};
  fakeCudaLogOp(c.gather ? "ncclAllGather" : "ncclAllReduce", dims);
  if (c.gather) {
    for (int r = 0; r < c.comm->nranks; ++r)
      std::memmove(static_cast<char*>(c.recv) + static_cast<size_t>(r) * bytes, c.send, bytes);
  } else {
    if (c.send != c.recv) std::memmove(c.recv, c.send, bytes);
    if (c.comm->nranks > 1) scale(c.recv, c.count, c.type, c.comm->nranks);
  }
  // How the collective ends is decided when it runs (a replayed one too).
  gStreamBusyPolls = gCollectiveMode == 0 ? 3 : gCollectiveMode == 3 ? 1 : -1;
  if (gCollectiveMode == 2) {  // NCCL notices the dead peer a few polls later
    c.comm->pollsLeft = 3;
    c.comm->state = ncclRemoteError;
  }
}
void release(void* arg) {
  auto* c = static_cast<FakeCollective*>(arg);
  if (c->captured) {
    std::lock_guard<std::mutex> lock(gRefsMutex);
    --c->comm->persistentRefs;
    gRefsDropped.notify_all();
  }
  delete c;
}

ncclResult_t collective(bool gather, const void* send, void* recv, size_t count,
                        ncclDataType_t type, FakeComm* comm) {
  ++gCollectives;
  auto* c = new FakeCollective{gather, send, recv, count, type, comm};
  {
    // Counted before the fake driver may take it into a graph (and a later destroy drop it).
    std::lock_guard<std::mutex> lock(gRefsMutex);
    c->captured = true;
    ++comm->persistentRefs;
  }
  if (!fakeCudaDefer(execute, c, release)) {
    {
      std::lock_guard<std::mutex> lock(gRefsMutex);
      c->captured = false;
      --comm->persistentRefs;
    }
    execute(c);
    release(c);
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
int fakeAborts() {
  std::lock_guard<std::mutex> lock(gRefsMutex);
  return gAborts;
}
/// Aborts that found graphs holding the communicator for 2 s (a hang on real NCCL).
int fakeAbortHangs() {
  std::lock_guard<std::mutex> lock(gRefsMutex);
  return gAbortHangs;
}
int fakeDestroys() { return gDestroys; }
int fakeLastBlocking() { return gLastBlocking; }
int fakeCollectives() { return gCollectives; }

// ------------------------------------------------------------------ CUDA driver
// Every other driver entry point comes from testing/cuda/fake_libcuda.cc and
// fake_libcuda_streams.cc, linked into this library; the stream query is here because the
// collectives above decide when it drains.
CUresult cuStreamQuery(CUstream) {
  if (gStreamBusyPolls == 0) return CUDA_SUCCESS;
  if (gStreamBusyPolls > 0) --gStreamBusyPolls;
  return CUDA_ERROR_NOT_READY;
}

// ------------------------------------------------------------------ NCCL
ncclResult_t ncclGetVersion(int* version) { *version = NCCL_VERSION_CODE; return ncclSuccess; }
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) id->internal[i] = static_cast<char>(i * 7);
#ifdef INGOT_FAKE_CUDA_EXECUTING
  // A new group each time: the id names it.
  std::lock_guard<std::mutex> lock(gGroupsMutex);
  const uint64_t n = ++gNextId;
  std::memcpy(id->internal, &n, sizeof(n));
#endif
  return ncclSuccess;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  gLastBlocking = config ? config->blocking : -1;
  (void)id;
  auto* c = new FakeComm();
  {
    std::lock_guard<std::mutex> lock(gCommsMutex);
    gComms.emplace_back(c);
  }
  c->nranks = nranks;
  c->rank = rank;
  c->pollsLeft = gInitMode == 1 ? 1 << 30 : 3;
  c->state = gInitMode == 2 ? ncclSystemError : ncclSuccess;
#ifdef INGOT_FAKE_CUDA_EXECUTING
  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  {
    // The group of this id (made by its first rank); the init completes once all joined.
    const std::string key(id.internal, NCCL_UNIQUE_ID_BYTES);
    std::lock_guard<std::mutex> lock(gGroupsMutex);
    for (auto& [k, g] : gGroups)
      if (k == key) c->group = g;
    if (!c->group) {
      c->group = new Group();
      c->group->nranks = nranks;
      c->group->calls.assign(nranks, nullptr);
      gGroups.emplace_back(key, c->group);
    }
    if (c->group->nranks != nranks) return ncclInvalidArgument;
    std::lock_guard<std::mutex> joined(c->group->mutex);
    ++c->group->joined;
    c->group->changed.notify_all();
  }
  c->pollsLeft = 0;
#endif
  *comm = reinterpret_cast<ncclComm_t>(c);
  return ncclInProgress;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  auto* c = reinterpret_cast<FakeComm*>(comm);
#ifdef INGOT_FAKE_CUDA_EXECUTING
  if (c->group) {
    std::lock_guard<std::mutex> lock(c->group->mutex);
    *state = c->state != ncclSuccess                 ? c->state
             : c->group->aborted                     ? ncclRemoteError
             : c->group->joined < c->group->nranks ? ncclInProgress
                                                     : ncclSuccess;
    return ncclSuccess;
  }
#endif
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
ncclResult_t ncclCommDestroy(ncclComm_t) {
  ++gDestroys;  // the FakeComm stays in gComms (see there)
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  gStreamBusyPolls = 0;  // the abort flag first: the kernels still waiting on peers end
  auto* c = reinterpret_cast<FakeComm*>(comm);
#ifdef INGOT_FAKE_CUDA_EXECUTING
  if (c->group) {
    std::lock_guard<std::mutex> lock(c->group->mutex);
    c->group->aborted = true;  // the peers' waiting collectives end
    c->group->changed.notify_all();
  }
#endif
  std::unique_lock<std::mutex> lock(gRefsMutex);
  if (!gRefsDropped.wait_for(lock, std::chrono::seconds(2),
                             [c] { return c->persistentRefs == 0; }))
    ++gAbortHangs;  // real NCCL would wait here for ever
  ++gAborts;
  return ncclSuccess;
}
ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t, ncclComm_t comm, cudaStream_t) {
  return collective(false, send, recv, count, type, reinterpret_cast<FakeComm*>(comm));
}
ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t) {
  return collective(true, send, recv, count, type, reinterpret_cast<FakeComm*>(comm));
}
const char* ncclGetErrorString(ncclResult_t result) {
  return result == ncclRemoteError ? "remote process exited or there was a network error"
                                   : "fake NCCL error";
}
const char* ncclGetLastError(ncclComm_t) { return "fake: peer 1 closed its connection"; }

}  // extern "C"
