// NcclCommunicator: one GPU rank of a tensor-parallel group on NCCL, with bounded waits.
#include "runtime/dist/nccl_communicator.h"

#include <algorithm>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

namespace ingot {
namespace {

using Clock = std::chrono::steady_clock;

/// A waiting call first re-polls with only a yield in between for this long: a decode-step
/// all-reduce completes in tens of microseconds, and sleeping would add a scheduler tick.
constexpr std::chrono::microseconds kSpinFor(200);
/// Then it sleeps between polls, doubling from the first value up to the cap, which bounds
/// how late a completed step or long collective is noticed: a decode step of a few ms would
/// lose a tenth of its time to a 1 ms cap (0.5 ms late on average).
constexpr std::chrono::microseconds kFirstSleep(20);
constexpr std::chrono::microseconds kMaxSleep(100);
/// How often a waiting init asks NcclGroupOptions::join_probe.
constexpr std::chrono::milliseconds kProbeEvery(5);

ncclDataType_t ncclType(CollectiveDtype dtype) {
  return dtype == CollectiveDtype::kBf16 ? ncclBfloat16 : ncclFloat32;
}

size_t elementBytes(CollectiveDtype dtype) { return dtype == CollectiveDtype::kBf16 ? 2 : 4; }

/// Polls `done` (returns true when finished, or an error) until the deadline, spinning
/// briefly and then sleeping with backoff. Returns false in `finished` at the deadline.
template <typename Poll>
Status pollUntil(Clock::time_point deadline, bool& finished, Poll poll) {
  const auto spinUntil = Clock::now() + kSpinFor;
  auto sleep = kFirstSleep;
  for (;;) {
    INGOT_RETURN_IF_ERROR(poll(finished));
    if (finished) return okStatus();
    auto now = Clock::now();
    if (now >= deadline) return okStatus();
    if (now < spinUntil) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::min<Clock::duration>(sleep, deadline - now));
      sleep = std::min(sleep * 2, kMaxSleep);
    }
  }
}

}  // namespace

const char* collectiveDtypeName(CollectiveDtype dtype) {
  return dtype == CollectiveDtype::kBf16 ? "bf16" : "f32";
}

NcclCommunicator::NcclCommunicator(CudaDriver& cuda, std::shared_ptr<const NcclLibrary> nccl,
                                   NcclGroupOptions options)
    : cuda_(cuda), nccl_(std::move(nccl)), options_(std::move(options)) {}

StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create(
    CudaDriver& cuda, TcpStoreClient& store, const NcclGroupOptions& options) {
  const std::string who = "nccl group '" + options.group_name + "' rank " +
                          std::to_string(options.rank) + " of " +
                          std::to_string(options.world_size);
  if (options.world_size < 1)
    return invalidArgument(who + ": world size must be at least 1");
  if (options.rank < 0 || options.rank >= options.world_size)
    return invalidArgument(who + ": rank must be in [0, " + std::to_string(options.world_size) +
                           ")");
  if (options.timeout.count() <= 0)
    return invalidArgument(who + ": the timeout must be positive, got " +
                           std::to_string(options.timeout.count()) + " ms");
  if (options.group_name.empty()) return invalidArgument(who + ": empty group name");
  int devices = 0;
  INGOT_RETURN_IF_ERROR(cuda.check("cuDeviceGetCount", cuda.deviceGetCount(&devices))
                            .withPrefix(who));
  if (options.device < 0 || options.device >= devices)
    return invalidArgument(who + ": device " + std::to_string(options.device) +
                           " does not exist (this machine has " + std::to_string(devices) +
                           " CUDA device" + (devices == 1 ? "" : "s") + ")");
  INGOT_ASSIGN_OR_RETURN(std::shared_ptr<const NcclLibrary> nccl, NcclLibrary::load());
  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator(cuda, std::move(nccl), options));
  INGOT_RETURN_IF_ERROR(comm->init(store).withPrefix(who));
  return comm;
}

Status NcclCommunicator::init(TcpStoreClient& store) {
  const auto deadline = Clock::now() + options_.timeout;
  INGOT_RETURN_IF_ERROR(cuda_.check("cuDeviceGet", cuda_.deviceGet(&device_, options_.device)));
  INGOT_RETURN_IF_ERROR(cuda_.check("cuDevicePrimaryCtxRetain",
                                    cuda_.primaryCtxRetain(&context_, device_)));
  contextRetained_ = true;
  INGOT_RETURN_IF_ERROR(cuda_.check("cuCtxSetCurrent", cuda_.ctxSetCurrent(context_)));
  CUresult cr = nccl_->streamCreate(&stream_, CU_STREAM_NON_BLOCKING);
  if (cr != CUDA_SUCCESS) return internalError(nccl_->describeCuda("cuStreamCreate", cr));
  INGOT_RETURN_IF_ERROR(cuda_.check("cuMemAlloc", cuda_.memAlloc(&scratch_, sizeof(float))));

  // The unique id carries rank 0's bootstrap address; everyone needs the same 128 bytes.
  const std::string key = options_.group_name + "/nccl_unique_id";
  ncclUniqueId id;
  if (options_.rank == 0) {
    ncclResult_t r = nccl_->getUniqueId(&id);
    if (r != ncclSuccess) return internalError(nccl_->describe("ncclGetUniqueId", r, nullptr));
    std::vector<uint8_t> bytes(sizeof(id.internal));
    std::memcpy(bytes.data(), id.internal, bytes.size());
    INGOT_RETURN_IF_ERROR(store.set(key, bytes, options_.timeout));
  } else {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    auto got = store.get(key, std::max(left, std::chrono::milliseconds(0)));
    if (!got.ok() && got.status().code() == StatusCode::kNotFound)
      return notFound(got.status().message() + " (rank 0 publishes it: is rank 0 running, "
                                               "with the same master address and group?)");
    if (!got.ok()) return got.status();
    std::vector<uint8_t> bytes = std::move(got).value();
    if (bytes.size() != sizeof(id.internal))
      return dataLoss("store key '" + key + "' holds " + std::to_string(bytes.size()) +
                      " bytes, not a " + std::to_string(sizeof(id.internal)) +
                      "-byte NCCL unique id");
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init and enqueues return ncclInProgress; we poll with a deadline
  config.commName = "ingot-tp";
  ncclComm_t comm = nullptr;
  ncclResult_t r = nccl_->commInitRankConfig(&comm, options_.world_size, id, options_.rank,
                                             &config);
  {
    std::lock_guard<std::mutex> lock(mu_);
    comm_ = comm;  // set even on error: an initializing communicator must be aborted
  }
  if (r != ncclSuccess && r != ncclInProgress)
    return breakGroup(internalError(nccl_->describe("ncclCommInitRankConfig", r, comm)));
  Status s = waitAsync("init (waiting for all " + std::to_string(options_.world_size) +
                           " ranks to connect to rank 0)",
                       deadline, options_.join_probe);
  options_.join_probe = nullptr;  // the init's only: it may refer to the caller's state
  if (!s.ok()) return breakGroup(s);
  return okStatus();
}

NcclCommunicator::~NcclCommunicator() {
  if (contextRetained_) (void)cuda_.ctxSetCurrent(context_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (comm_ && error_.ok()) {
      // A healthy shutdown: finalize (flushes work, nonblocking here), then destroy.
      ncclResult_t r = nccl_->commFinalize(comm_);
      ncclResult_t state = r;
      const auto deadline = Clock::now() + options_.timeout;
      bool finished = false;
      if (r == ncclSuccess || r == ncclInProgress) {
        (void)pollUntil(deadline, finished, [&](bool& done) {
          nccl_->commGetAsyncError(comm_, &state);
          done = state != ncclInProgress;
          return okStatus();
        });
      }
      if (finished && state == ncclSuccess) {
        nccl_->commDestroy(comm_);
        comm_ = nullptr;
      }
    }
    abortCommLocked();  // whatever is left: a broken group, or a finalize that failed
  }
  // The owner destroyed its graphs before this (CudaBackend goes first), so the abort ends.
  if (aborter_.joinable()) aborter_.join();
  if (stream_) nccl_->streamDestroy(stream_);
  if (scratch_) cuda_.memFree(scratch_);
  if (contextRetained_) cuda_.primaryCtxRelease(device_);
}

void NcclCommunicator::abortCommLocked() {
  if (!comm_) return;
  ncclComm_t comm = comm_;
  comm_ = nullptr;
  // ncclCommAbort raises the device abort flag first (kernels waiting on peers exit), then
  // (NCCL 2.26+) blocks until every CUDA graph that captured this communicator is destroyed.
  // Those graphs are the caller's (a CudaBackend drops them when its step fails), and the
  // caller may be the thread that must drop them: so the abort runs on a thread of its own,
  // never under mu_, and the destructor joins it.
  std::shared_ptr<const NcclLibrary> nccl = nccl_;
  CudaDriver* cuda = &cuda_;
  CUcontext context = context_;
  try {
    aborter_ = std::thread([nccl, cuda, context, comm] {
      if (context) (void)cuda->ctxSetCurrent(context);
      nccl->commAbort(comm);  // blocking even on a nonblocking communicator
    });
  } catch (const std::system_error&) {
    nccl_->commAbort(comm);  // no thread to be had: here, as the last resort
  }
}

Status NcclCommunicator::breakGroup(Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok()) error_ = std::move(error);
  broken_.store(true);
  abortCommLocked();
  return error_;
}

void NcclCommunicator::abort(const Status& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok()) return;
  error_ = error.ok() ? internalError("tensor-parallel group aborted") : error;
  broken_.store(true);
  // A collective polling on another thread aborts comm_ itself at its next poll.
  if (!inFlight_) abortCommLocked();
}

Status NcclCommunicator::groupStatus() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::string NcclCommunicator::label(const std::string& op, int64_t n,
                                    CollectiveDtype dtype) const {
  return "nccl " + op + " of " + std::to_string(n) + " " + collectiveDtypeName(dtype) +
         " on rank " + std::to_string(options_.rank) + " of " +
         std::to_string(options_.world_size) + " (device " + std::to_string(options_.device) +
         ")";
}

Status NcclCommunicator::waitAsync(const std::string& what, Clock::time_point deadline,
                                   const std::function<Status()>& probe) {
  bool finished = false;
  ncclResult_t state = ncclInProgress;
  Clock::time_point next_probe = Clock::now();
  INGOT_RETURN_IF_ERROR(pollUntil(deadline, finished, [&](bool& done) {
    if (broken_.load()) return groupStatus();
    ncclResult_t r = nccl_->commGetAsyncError(comm_, &state);
    if (r != ncclSuccess) return internalError(nccl_->describe("ncclCommGetAsyncError", r, comm_));
    done = state != ncclInProgress;
    // Asked only while still waiting, so a wait that just completed is never failed by it.
    if (!done && probe && Clock::now() >= next_probe) {
      INGOT_RETURN_IF_ERROR(probe());
      next_probe = Clock::now() + kProbeEvery;
    }
    return okStatus();
  }));
  if (!finished)
    return failedPrecondition(what + ": did not complete within " +
                              std::to_string(options_.timeout.count()) +
                              " ms; the group is aborted");
  if (state != ncclSuccess)
    return internalError(what + ": " + nccl_->describe("NCCL", state, comm_) +
                         "; the group is aborted");
  return okStatus();
}

Status NcclCommunicator::beginCall() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok()) return error_;
  inFlight_ = true;
  return okStatus();
}

Status NcclCommunicator::endCall(Status result) {
  std::lock_guard<std::mutex> lock(mu_);
  inFlight_ = false;
  if (!result.ok() && error_.ok()) error_ = std::move(result);
  if (!error_.ok()) {
    // Failed here, or abort() came from another thread while this call ran.
    broken_.store(true);
    abortCommLocked();
    return error_;
  }
  return okStatus();
}

template <typename Enqueue>
Status NcclCommunicator::enqueueLocked(const std::string& what, Enqueue enqueue,
                                       Clock::time_point deadline) {
  INGOT_RETURN_IF_ERROR(cuda_.check("cuCtxSetCurrent", cuda_.ctxSetCurrent(context_)));
  ncclResult_t r = enqueue();
  if (r == ncclInProgress) return waitAsync(what + " (enqueue)", deadline);
  if (r != ncclSuccess) return internalError(what + ": " + nccl_->describe("enqueue", r, comm_));
  return okStatus();
}

Status NcclCommunicator::drain(const std::string& what, CUstream stream,
                               Clock::time_point deadline) {
  bool finished = false;
  INGOT_RETURN_IF_ERROR(pollUntil(deadline, finished, [&](bool& done) {
    if (broken_.load()) return groupStatus();
    CUresult q = nccl_->streamQuery(stream);
    if (q == CUDA_SUCCESS) { done = true; return okStatus(); }
    if (q != CUDA_ERROR_NOT_READY)
      return internalError(what + ": " + nccl_->describeCuda("cuStreamQuery", q));
    // A peer that died shows up here (ncclRemoteError, ncclSystemError) long before
    // the deadline.
    ncclResult_t state = ncclSuccess;
    nccl_->commGetAsyncError(comm_, &state);
    if (state != ncclSuccess && state != ncclInProgress)
      return internalError(what + ": " + nccl_->describe("NCCL", state, comm_) +
                           "; the group is aborted");
    return okStatus();
  }));
  if (!finished)
    return failedPrecondition(what + ": did not complete within " +
                              std::to_string(options_.timeout.count()) +
                              " ms (a rank died, hangs, or called a different collective); "
                              "the group is aborted");
  return okStatus();
}

template <typename Enqueue>
Status NcclCommunicator::run(const std::string& what, Enqueue enqueue) {
  INGOT_RETURN_IF_ERROR(beginCall());
  const auto deadline = Clock::now() + options_.timeout;
  Status s = enqueueLocked(what, enqueue, deadline);
  if (s.ok()) s = drain(what, stream_, deadline);
  return endCall(std::move(s));
}

template <typename Enqueue>
Status NcclCommunicator::enqueueOnly(const std::string& what, Enqueue enqueue) {
  INGOT_RETURN_IF_ERROR(beginCall());
  return endCall(enqueueLocked(what, enqueue, Clock::now() + options_.timeout));
}

Status NcclCommunicator::enqueueAllReduceSum(CUdeviceptr data, int64_t n, CUstream stream) {
  const std::string what = label("all_reduce", n, CollectiveDtype::kF32) + " (stream-ordered)";
  if (n < 0 || (n > 0 && !data))
    return invalidArgument(what + ": bad buffer (" + std::to_string(n) + " elements)");
  if (n == 0) return okStatus();
  void* p = reinterpret_cast<void*>(data);
  return enqueueOnly(what, [&] {
    return nccl_->allReduce(p, p, static_cast<size_t>(n), ncclFloat32, ncclSum, comm_, stream);
  });
}

Status NcclCommunicator::enqueueAllGather(CUdeviceptr in, int64_t n_per_rank, CUdeviceptr out,
                                          CUstream stream) {
  const std::string what =
      label("all_gather", n_per_rank, CollectiveDtype::kF32) + " (stream-ordered)";
  if (n_per_rank < 0 || (n_per_rank > 0 && (!in || !out)))
    return invalidArgument(what + ": bad buffers (" + std::to_string(n_per_rank) +
                           " elements per rank)");
  const size_t inBytes = static_cast<size_t>(n_per_rank) * sizeof(float);
  const size_t outBytes = inBytes * static_cast<size_t>(options_.world_size);
  if (n_per_rank > 0 && in < out + outBytes && out < in + inBytes)
    return invalidArgument(what + ": input overlaps the output");
  if (n_per_rank == 0) return okStatus();
  return enqueueOnly(what, [&] {
    return nccl_->allGather(reinterpret_cast<const void*>(in), reinterpret_cast<void*>(out),
                            static_cast<size_t>(n_per_rank), ncclFloat32, comm_, stream);
  });
}

Status NcclCommunicator::waitStream(CUstream stream, const std::string& what) {
  const std::string who = what + " on nccl rank " + std::to_string(options_.rank) + " of " +
                          std::to_string(options_.world_size) + " (device " +
                          std::to_string(options_.device) + ")";
  if (!stream) return invalidArgument(who + ": no stream");
  INGOT_RETURN_IF_ERROR(beginCall());
  return endCall(drain(who, stream, Clock::now() + options_.timeout));
}

Status NcclCommunicator::allReduceSum(CollectiveDtype dtype, const void* in, void* out,
                                      int64_t n) {
  const std::string what = label("all_reduce", n, dtype);
  if (n < 0 || (n > 0 && (!in || !out)))
    return invalidArgument(what + ": bad buffers (" + std::to_string(n) + " elements)");
  if (in != out && n > 0) {
    auto a = reinterpret_cast<uintptr_t>(in), b = reinterpret_cast<uintptr_t>(out);
    size_t bytes = static_cast<size_t>(n) * elementBytes(dtype);
    if (a < b + bytes && b < a + bytes)
      return invalidArgument(what + ": input and output overlap without being the same buffer");
  }
  return run(what, [&] {
    return nccl_->allReduce(in, out, static_cast<size_t>(n), ncclType(dtype), ncclSum, comm_,
                            stream_);
  });
}

Status NcclCommunicator::allGather(CollectiveDtype dtype, const void* in, int64_t n_per_rank,
                                   void* out) {
  const std::string what = label("all_gather", n_per_rank, dtype);
  if (n_per_rank < 0 || (n_per_rank > 0 && (!in || !out)))
    return invalidArgument(what + ": bad buffers (" + std::to_string(n_per_rank) +
                           " elements per rank)");
  auto a = reinterpret_cast<uintptr_t>(in), b = reinterpret_cast<uintptr_t>(out);
  size_t inBytes = static_cast<size_t>(n_per_rank) * elementBytes(dtype);
  size_t outBytes = inBytes * static_cast<size_t>(options_.world_size);
  if (n_per_rank > 0 && a < b + outBytes && b < a + inBytes)
    return invalidArgument(what + ": input overlaps the output");
  return run(what, [&] {
    return nccl_->allGather(in, out, static_cast<size_t>(n_per_rank), ncclType(dtype), comm_,
                            stream_);
  });
}

Status NcclCommunicator::allReduceSum(float* data, int64_t n) {
  return allReduceSum(CollectiveDtype::kF32, data, data, n);
}

Status NcclCommunicator::allGather(const float* in, int64_t n_per_rank, float* out) {
  return allGather(CollectiveDtype::kF32, in, n_per_rank, out);
}

Status NcclCommunicator::barrier() {
  void* one = reinterpret_cast<void*>(scratch_);
  return run("nccl barrier on rank " + std::to_string(options_.rank) + " of " +
                 std::to_string(options_.world_size),
             [&] {
               return nccl_->allReduce(one, one, 1, ncclFloat32, ncclSum, comm_, stream_);
             });
}

}  // namespace ingot
