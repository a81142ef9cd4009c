// RankBackend: join a process group (shared memory or NCCL) and load one rank's backend.
#include "runtime/backend/tp/rank_backend.h"

#include <optional>
#include <utility>

#include "runtime/dist/shm_process_group.h"
#include "runtime/dist/tcp_process_group.h"
#include "runtime/dist/tcp_store.h"

#ifdef INGOT_TP_CUDA_RANKS
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/cuda_driver.h"
#include "runtime/dist/nccl_communicator.h"
#endif

namespace ingot {

#ifdef INGOT_TP_CUDA_RANKS
struct RankBackend::Cuda {
  std::unique_ptr<CudaDriver> driver;        // declared first: outlives the communicator
  std::unique_ptr<NcclCommunicator> comm;
  const CudaBackend* backend = nullptr;      // RankBackend::backend_
};
#else
struct RankBackend::Cuda {};
#endif

bool cudaRanksBuilt() {
#ifdef INGOT_TP_CUDA_RANKS
  return true;
#else
  return false;
#endif
}

Status checkGpusForRanks(int32_t first_gpu, int32_t world_size) {
  const std::string ranks = std::to_string(world_size) + " tensor-parallel ranks";
#ifdef INGOT_TP_CUDA_RANKS
  StatusOr<std::unique_ptr<CudaDriver>> driver = CudaDriver::load();
  if (!driver.ok()) return driver.status().withPrefix(ranks + " on CUDA");
  int count = 0;
  INGOT_RETURN_IF_ERROR((*driver)->check("cuDeviceGetCount", (*driver)->deviceGetCount(&count)));
  if (first_gpu < 0 || first_gpu + world_size > count)
    return invalidArgument(ranks + " need GPUs " + std::to_string(first_gpu) + ".." +
                           std::to_string(first_gpu + world_size - 1) + " (one per rank, rank r on "
                           "GPU " + std::to_string(first_gpu) + " + r); this machine has " +
                           std::to_string(count) + " GPU" + (count == 1 ? "" : "s"));
  return okStatus();
#else
  (void)first_gpu;
  return unimplemented(ranks + " on CUDA need a build with the CUDA backend and NCCL "
                       "(INGOT_ENABLE_CUDA=ON with nccl.h found)");
#endif
}

RankBackend::RankBackend() = default;
RankBackend::~RankBackend() {
  // The backend reads the communicator until it goes: it goes first.
  backend_.reset();
  wrapped_.reset();
}

StatusOr<std::unique_ptr<RankBackend>> RankBackend::join(TcpStoreClient& store,
                                                         const RankOptions& o) {
  std::unique_ptr<RankBackend> r(new RankBackend());
  r->options_ = o;
  Communicator* inner = nullptr;
  if (o.gpu < 0 && o.nnodes > 1) {
    TcpProcessGroupOptions g;
    g.timeout = o.timeout;
    g.name = o.group;
    g.ranks_per_node = o.world_size / o.nnodes;
    g.join_probe = o.join_probe;
    INGOT_ASSIGN_OR_RETURN(std::unique_ptr<TcpProcessGroup> group,
                           TcpProcessGroup::join(store, o.rank, o.world_size, g));
    r->group_ = std::move(group);
    inner = r->group_.get();
  } else if (o.gpu < 0) {
    ShmProcessGroupOptions g;
    g.timeout = o.timeout;
    g.chunk_floats = o.chunk_floats;
    g.name = o.group;
    g.join_probe = o.join_probe;
    INGOT_ASSIGN_OR_RETURN(std::unique_ptr<ShmProcessGroup> group,
                           ShmProcessGroup::join(store, o.rank, o.world_size, g));
    r->group_ = std::move(group);
    inner = r->group_.get();
  } else {
#ifdef INGOT_TP_CUDA_RANKS
    r->cuda_ = std::make_unique<Cuda>();
    INGOT_ASSIGN_OR_RETURN(r->cuda_->driver, CudaDriver::load());
    NcclGroupOptions g;
    g.rank = o.rank;
    g.world_size = o.world_size;
    g.device = o.gpu;
    g.timeout = o.timeout;
    g.group_name = o.group;
    g.join_probe = o.join_probe;
    INGOT_ASSIGN_OR_RETURN(r->cuda_->comm, NcclCommunicator::create(*r->cuda_->driver, store, g));
    inner = r->cuda_->comm.get();
#else
    (void)store;
    return checkGpusForRanks(o.gpu, o.world_size);
#endif
  }
  r->communicator_ = inner;
  r->options_.join_probe = nullptr;  // the join's only
  if (o.wrap_communicator) {
    r->wrapped_ = o.wrap_communicator(inner);
    if (r->wrapped_) r->communicator_ = r->wrapped_.get();
  }
  return r;
}

Status RankBackend::load(const Artifact& artifact) {
  if (options_.gpu < 0) {
    CpuBackendOptions cpu = options_.cpu;
    cpu.tp_rank = options_.rank;
    cpu.communicator = communicator_;
    INGOT_ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> b, CpuBackend::create(artifact, cpu));
    cpu_backend_ = b.get();
    backend_ = std::move(b);
    return okStatus();
  }
#ifdef INGOT_TP_CUDA_RANKS
  CudaBackendOptions c;
  // Each rank's pool holds its own kv heads, so an fp8 pool's per-block-head scales need no
  // agreement between ranks; the artifact must carry the fp8 kernels (CudaBackend says so).
  c.kv_dtype = options_.cpu.kv_dtype;
  c.device = options_.gpu;
  c.gpu_memory_utilization = options_.gpu_memory_utilization;
  c.num_kv_blocks = options_.cpu.num_kv_blocks;
  c.max_model_len = options_.max_model_len;
  c.tp_rank = options_.rank;
  c.communicator = communicator_;
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> b, CudaBackend::create(artifact, c));
  cuda_->backend = b.get();
  backend_ = std::move(b);
  return okStatus();
#else
  (void)artifact;
  return checkGpusForRanks(options_.gpu, options_.world_size);
#endif
}

bool RankBackend::stepStarted() const {
  if (cpu_backend_) return cpu_backend_->stepStarted();
#ifdef INGOT_TP_CUDA_RANKS
  if (cuda_ && cuda_->backend) return cuda_->backend->stepStarted();
#endif
  return false;
}

std::string RankBackend::deviceName() const {
  return options_.gpu < 0 ? "cpu" : "cuda:" + std::to_string(options_.gpu);
}

std::string RankBackend::describe() const {
#ifdef INGOT_TP_CUDA_RANKS
  if (cuda_ && cuda_->backend) return cuda_->backend->describe();
#endif
  return "";
}

}  // namespace ingot
