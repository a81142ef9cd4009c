// TpCpuBackend: lock-step dispatch of each call to N rank threads, one CpuBackend per rank.
#include "runtime/backend/cpu/tp_cpu_backend.h"

#include <algorithm>
#include <string>

namespace ingot {
namespace {

/// After the group breaks, how long step() still waits for the ranks to finish (each
/// fails at its next collective at once, unless it is the one that stopped answering).
constexpr std::chrono::milliseconds kBrokenGrace{200};
/// How often a waiting step() looks at the group while ranks run.
constexpr std::chrono::milliseconds kPollGroup{20};

size_t elementBytes(RegionType type) {
  switch (type) {
    case RegionType::kI16: return 2;
    case RegionType::kI32:
    case RegionType::kF32: return 4;
    case RegionType::kI64:
    case RegionType::kIndex: return 8;
    default: return 1;  // i1 (one byte per element), i8
  }
}

}  // namespace

int32_t tensorParallelWorldSize(const Artifact& artifact) {
  const schema::TensorParallelDef* tp = artifact.manifest().tensor_parallel();
  return tp ? tp->world_size() : 1;
}

StatusOr<std::unique_ptr<TpCpuBackend>> TpCpuBackend::create(const Artifact& artifact,
                                                             const TpCpuBackendOptions& options) {
  const int world = tensorParallelWorldSize(artifact);
  std::unique_ptr<TpCpuBackend> b(new TpCpuBackend());
  INGOT_ASSIGN_OR_RETURN(b->group_, SharedMemoryGroup::create(world, options.collective_timeout));
  int threads = options.cpu.num_threads;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int r = 0; r < world; ++r) {
    Communicator* comm = b->group_->communicator(r);
    if (options.wrap_communicator) {
      b->wrapped_.push_back(options.wrap_communicator(r, comm));
      if (!b->wrapped_.back()) return invalidArgument("wrap_communicator gave no communicator");
      comm = b->wrapped_.back().get();
    }
    CpuBackendOptions o = options.cpu;
    o.num_threads = std::max(1, threads / world + (r < threads % world ? 1 : 0));
    o.tp_rank = r;
    o.communicator = world > 1 ? comm : nullptr;
    StatusOr<std::unique_ptr<CpuBackend>> rank = CpuBackend::create(artifact, o);
    if (!rank.ok()) return rank.status().withPrefix("tp rank " + std::to_string(r));
    b->ranks_.push_back(std::move(rank).value());
  }
  b->logits_.resize(world);
  b->done_seq_.assign(world, 0);
  b->results_.resize(world);
  for (int r = 0; r < world; ++r) b->threads_.emplace_back([p = b.get(), r] { p->rankLoop(r); });
  return b;
}

TpCpuBackend::~TpCpuBackend() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

int TpCpuBackend::numThreads() const {
  int n = 0;
  for (const auto& r : ranks_) n += r->numThreads();
  return n;
}

uint64_t TpCpuBackend::matrixBytes() const {
  uint64_t n = 0;
  for (const auto& r : ranks_) n += r->matrixBytes();
  return n;
}

void TpCpuBackend::rankLoop(int rank) {
  uint64_t seen = 0;
  for (;;) {
    std::function<Status(int)> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || job_seq_ > seen; });
      if (stop_) return;
      seen = job_seq_;
      job = job_;
    }
    Status st = job(rank);
    {
      std::lock_guard<std::mutex> lock(mu_);
      results_[rank] = std::move(st);
      done_seq_[rank] = seen;
    }
    done_cv_.notify_all();
  }
}

Status TpCpuBackend::runOnRanks(std::function<Status(int)> job) {
  if (!failure_.ok()) return failure_;
  const int world = worldSize();
  std::unique_lock<std::mutex> lock(mu_);
  job_ = std::move(job);
  const uint64_t seq = ++job_seq_;
  work_cv_.notify_all();
  auto allDone = [&] {
    for (int r = 0; r < world; ++r)
      if (done_seq_[r] != seq) return false;
    return true;
  };
  while (!allDone()) {
    done_cv_.wait_for(lock, kPollGroup);
    if (allDone() || group_->status().ok()) continue;
    // The group broke: the ranks fail at their next collective; one that stopped
    // answering may never come back, so wait only a little.
    done_cv_.wait_for(lock, kBrokenGrace, allDone);
    break;
  }
  const Status group = group_->status();
  if (!group.ok()) {
    failure_ = group;
    return failure_;
  }
  for (int r = 0; r < world; ++r)
    if (!results_[r].ok()) return results_[r];
  return okStatus();
}

std::vector<std::optional<Status>> TpCpuBackend::lastRankResults() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::optional<Status>> out(ranks_.size());
  for (size_t r = 0; r < ranks_.size(); ++r)
    if (done_seq_[r] == job_seq_) out[r] = results_[r];
  return out;
}

void TpCpuBackend::copyInputs(const StepInputs& given) {
  inputs_ = given;
  const size_t n = given.extra_inputs.size();
  extra_shapes_.resize(n);
  extra_data_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const RegionOperandView& v = given.extra_inputs[i];
    extra_shapes_[i].assign(v.shape, v.shape + v.rank);
    size_t elements = 1;
    for (int64_t d : extra_shapes_[i]) elements *= static_cast<size_t>(std::max<int64_t>(d, 0));
    const uint8_t* data = static_cast<const uint8_t*>(v.data);
    const size_t bytes = data ? elements * elementBytes(v.element_type) : 0;
    extra_data_[i].assign(data, data + bytes);
    inputs_.extra_inputs[i].shape = extra_shapes_[i].data();
    inputs_.extra_inputs[i].data = data ? extra_data_[i].data() : nullptr;
  }
}

Status TpCpuBackend::step(const StepInputs& inputs, std::vector<float>* logits) {
  if (!failure_.ok()) return failure_;
  copyInputs(inputs);
  INGOT_RETURN_IF_ERROR(runOnRanks([this](int r) -> Status {
    Status st = ranks_[r]->step(inputs_, &logits_[r]);
    // Inputs are checked before anything runs, identically on every rank: such an error
    // leaves the group usable. A failure after that means this rank will not join the
    // rest of the step's collectives, so the others must not wait for it.
    if (!st.ok() && ranks_[r]->stepStarted())
      group_->abort(st.withPrefix("tp rank " + std::to_string(r)));
    return st;
  }));
  logits->swap(logits_[0]);
  return okStatus();
}

Status TpCpuBackend::copyKvBlocks(int64_t src, int64_t dst) {
  if (!failure_.ok()) return failure_;
  // Local to each rank's pool (no collective); the rank threads are idle between calls.
  for (auto& r : ranks_) INGOT_RETURN_IF_ERROR(r->copyKvBlocks(src, dst));
  return okStatus();
}

Status TpCpuBackend::copyKvSlots(const std::vector<std::pair<int32_t, int32_t>>& moves) {
  if (!failure_.ok()) return failure_;
  for (auto& r : ranks_) INGOT_RETURN_IF_ERROR(r->copyKvSlots(moves));
  return okStatus();
}

StatusOr<std::unique_ptr<Backend>> createCpuServingBackend(const Artifact& artifact,
                                                           const CpuBackendOptions& options) {
  if (tensorParallelWorldSize(artifact) > 1) {
    TpCpuBackendOptions tp;
    tp.cpu = options;
    INGOT_ASSIGN_OR_RETURN(std::unique_ptr<TpCpuBackend> b, TpCpuBackend::create(artifact, tp));
    return std::unique_ptr<Backend>(std::move(b));
  }
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> b, CpuBackend::create(artifact, options));
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace ingot
