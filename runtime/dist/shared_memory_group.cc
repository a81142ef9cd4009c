// SharedMemoryGroup: rendezvous with timeouts, rank-ordered sums and gathers between threads.
#include "runtime/dist/shared_memory_group.h"

#include <algorithm>
#include <cstring>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "runtime/base/duration_text.h"
#endif

namespace ingot {
namespace {

/// Polls of the completion counter before a waiting rank sleeps: a rendezvous between
/// ranks that finish together completes within microseconds, a sleep/wake-up costs tens
/// of them. Short enough not to starve a rank still computing on a loaded machine.
constexpr int kSpinPolls = 512;
/// Floats per slice of a sum: whole cache lines, so two ranks never write one line.
constexpr int64_t kSliceGrain = 16;

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

/// One rank's view: its sequence of collectives and the rendezvous it has passed.
class SharedMemoryGroup::RankCommunicator final : public Communicator {
 public:
  RankCommunicator(SharedMemoryGroup& group, int rank) : group_(group), rank_(rank) {}

  int rank() const override { return rank_; }
  int worldSize() const override { return group_.world_size_; }
  Status allReduceSum(float* data, int64_t n) override {
    return group_.allReduceSum(rank_, passed_, seq_++, data, n);
  }
  Status allGather(const float* in, int64_t n_per_rank, float* out) override {
    return group_.allGather(rank_, passed_, seq_++, in, n_per_rank, out);
  }
  Status barrier() override {
    return group_.arrive(rank_, passed_, {Kind::kBarrier, 0, seq_++}, true);
  }
  void abort(const Status& error) override { group_.abort(error); }
  Status groupStatus() const override { return group_.status(); }

 private:
  SharedMemoryGroup& group_;
  const int rank_;
  uint64_t seq_ = 0;     // collectives called
  uint64_t passed_ = 0;  // rendezvous passed
};

StatusOr<std::unique_ptr<SharedMemoryGroup>> SharedMemoryGroup::create(
    int world_size, std::chrono::milliseconds timeout) {
  if (world_size < 1)
    return invalidArgument("shared-memory group: world size must be at least 1, got " +
                           std::to_string(world_size));
  if (timeout.count() <= 0)
    return invalidArgument("shared-memory group: the collective timeout must be positive, got " +
                           std::to_string(timeout.count()) + " ms");
  return std::unique_ptr<SharedMemoryGroup>(new SharedMemoryGroup(world_size, timeout));
}

SharedMemoryGroup::SharedMemoryGroup(int world_size, std::chrono::milliseconds timeout)
    : world_size_(world_size),
      timeout_(timeout),
      arrived_(world_size, 0),
      calls_(world_size),
      io_(world_size, nullptr),
      in_(world_size, nullptr) {
  for (int r = 0; r < world_size; ++r)
    ranks_.push_back(std::make_unique<RankCommunicator>(*this, r));
}

SharedMemoryGroup::~SharedMemoryGroup() = default;

Communicator* SharedMemoryGroup::communicator(int rank) {
  return rank >= 0 && rank < world_size_ ? ranks_[rank].get() : nullptr;
}

Status SharedMemoryGroup::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void SharedMemoryGroup::abort(const Status& error) {
  std::lock_guard<std::mutex> lock(mu_);
  breakLocked(error.ok() ? internalError("tensor-parallel group aborted") : error);
}

void SharedMemoryGroup::breakLocked(Status error) {
  if (broken_.load(std::memory_order_relaxed)) return;
  error_ = std::move(error);
  broken_.store(true, std::memory_order_release);
  cv_.notify_all();
}

std::string SharedMemoryGroup::label(const Call& call) const {
  const char* name = call.kind == Kind::kAllReduce   ? "all_reduce"
                     : call.kind == Kind::kAllGather ? "all_gather"
                                                     : "barrier";
  return std::string(name) + " #" + std::to_string(call.seq);
}


Status SharedMemoryGroup::arrive(int rank, uint64_t& passed, const Call& call, bool first) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  const uint64_t target = passed + 1;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (broken_.load(std::memory_order_relaxed)) return error_;
    if (first) {
      // Every rank must call the same collective with the same size; the first to arrive
      // sets what the others are checked against.
      for (int r = 0; r < world_size_; ++r) {
        if (!arrived_[r]) continue;
        const Call& other = calls_[r];
        if (other.kind != call.kind || other.n != call.n || other.seq != call.seq) {
          breakLocked(internalError(
              "tensor-parallel group: ranks disagree on the collective: rank " +
              std::to_string(r) + " called " + label(other) + " (" + std::to_string(other.n) +
              " floats), rank " + std::to_string(rank) + " called " + label(call) + " (" +
              std::to_string(call.n) + " floats)"));
          return error_;
        }
        break;
      }
      if (call.kind == Kind::kAllReduce) {
        std::vector<float>& sums = sums_[call.seq & 1];
        if (static_cast<int64_t>(sums.size()) < call.n) sums.resize(call.n);
      }
    }
    calls_[rank] = call;
    arrived_[rank] = 1;
    if (++arrived_count_ == world_size_) {
      arrived_count_ = 0;
      std::fill(arrived_.begin(), arrived_.end(), 0);
      completed_.store(target, std::memory_order_release);
      cv_.notify_all();
      passed = target;
      return okStatus();
    }
  }
  for (int i = 0; i < kSpinPolls; ++i) {
    if (completed_.load(std::memory_order_acquire) >= target) {
      passed = target;
      return okStatus();
    }
    if (broken_.load(std::memory_order_acquire)) break;
    cpuRelax();
  }
  std::unique_lock<std::mutex> lock(mu_);
  while (completed_.load(std::memory_order_acquire) < target &&
         !broken_.load(std::memory_order_relaxed)) {
    if (cv_.wait_until(lock, deadline) != std::cv_status::timeout) continue;
    if (completed_.load(std::memory_order_acquire) >= target ||
        broken_.load(std::memory_order_relaxed))
      break;
    std::string missing;
    int count = 0;
    for (int r = 0; r < world_size_; ++r)
      if (!arrived_[r]) missing += (count++ ? ", " : "") + std::to_string(r);
    breakLocked(failedPrecondition(label(calls_[rank]) + ": rank" + (count > 1 ? "s " : " ") +
                                   missing + " did not arrive within " + durationText(timeout_)));
  }
  // A rendezvous that completed stays complete even if the group broke afterwards.
  if (completed_.load(std::memory_order_acquire) >= target) {
    passed = target;
    return okStatus();
  }
  return error_;
}

Status SharedMemoryGroup::allReduceSum(int rank, uint64_t& passed, uint64_t seq, float* data,
                                       int64_t n) {
  const Call call{Kind::kAllReduce, n, seq};
  if (n < 0 || (n > 0 && !data))
    return invalidArgument(label(call) + ": bad buffer (" + std::to_string(n) + " floats)");
  io_[rank] = data;
  INGOT_RETURN_IF_ERROR(arrive(rank, passed, call, true));
  if (world_size_ == 1 || n == 0) return okStatus();
  // This rank's slice of the sum, over the ranks in order.
  float* sums = sums_[seq & 1].data();
  const int64_t slices = (n + kSliceGrain - 1) / kSliceGrain;
  const int64_t begin = std::min(n, slices * rank / world_size_ * kSliceGrain);
  const int64_t end = std::min(n, slices * (rank + 1) / world_size_ * kSliceGrain);
  for (int64_t i = begin; i < end; ++i) sums[i] = io_[0][i];
  for (int r = 1; r < world_size_; ++r) {
    const float* x = io_[r];
    for (int64_t i = begin; i < end; ++i) sums[i] += x[i];
  }
  INGOT_RETURN_IF_ERROR(arrive(rank, passed, call, false));
  std::memcpy(data, sums, static_cast<size_t>(n) * sizeof(float));
  return okStatus();
}

Status SharedMemoryGroup::allGather(int rank, uint64_t& passed, uint64_t seq, const float* in,
                                    int64_t n, float* out) {
  const Call call{Kind::kAllGather, n, seq};
  if (n < 0 || (n > 0 && (!in || !out)))
    return invalidArgument(label(call) + ": bad buffers (" + std::to_string(n) + " floats)");
  in_[rank] = in;
  INGOT_RETURN_IF_ERROR(arrive(rank, passed, call, true));
  for (int r = 0; r < world_size_; ++r)
    if (n > 0) std::memcpy(out + r * n, in_[r], static_cast<size_t>(n) * sizeof(float));
  // The inputs stay untouched until every rank has copied them.
  return arrive(rank, passed, call, false);
}

}  // namespace ingot
