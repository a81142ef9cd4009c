// ShmProcessGroup: rendezvous on a futex in a POSIX shm region, peers watched through pidfds.
#include "runtime/dist/shm_process_group.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <new>
#include <random>
#include <thread>

#include "runtime/base/duration_text.h"
#include "runtime/dist/tcp_store.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // the same number on every Linux architecture
#endif

namespace ingot {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kMagic = 0x31505447544f474eull;  // "NGOTGTP1"
constexpr uint32_t kLayoutVersion = 1;
/// The header's bytes (one page): counters, then the first error's text.
constexpr size_t kHeaderBytes = 4096;
constexpr size_t kErrorBytes = 2048;
constexpr size_t kLine = 64;
/// Polls of the arrival counters before a waiting rank sleeps (as SharedMemoryGroup: a
/// rendezvous of ranks that finish together completes within microseconds).
constexpr int kSpinPolls = 512;
/// Longest futex sleep between looks at the peers' pidfds: bounds how long a rank that
/// exited goes unnoticed.
constexpr int kSliceMs = 10;
/// Floats per slice of a sum: whole cache lines, so two ranks never write one line.
constexpr int64_t kSliceGrain = 16;
/// Largest chunk_floats accepted (1 GiB of staging per rank).
constexpr int64_t kMaxChunkFloats = int64_t{1} << 28;

enum State : uint32_t { kHealthy = 0, kBreaking = 1, kBroken = 2 };

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

std::string errnoText() { return std::strerror(errno); }

/// Whether process `pid` has exited (a zombie counts), for kernels without pidfds.
bool exitedByProc(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return !stat.good();
  const char state = text[paren + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the shared region needs address-free (lock-free) atomics");

struct ShmProcessGroup::Header {
  uint64_t magic = 0;
  uint32_t version = 0;
  int32_t world_size = 0;
  int64_t chunk_floats = 0;
  uint64_t region_bytes = 0;
  /// Bumped on every arrival and when the group breaks; sleepers wait on it.
  alignas(kLine) std::atomic<uint32_t> futex{0};
  std::atomic<uint32_t> sleepers{0};
  /// kHealthy, kBreaking (the first error is being written), kBroken.
  std::atomic<uint32_t> state{kHealthy};
  int32_t error_code = 0;
  char error[kErrorBytes] = {};
};

struct ShmProcessGroup::RankSlot {
  /// Rendezvous this rank has reached (the join is 1).
  alignas(kLine) std::atomic<uint64_t> arrived{0};
  std::atomic<int32_t> pid{0};
  /// The collective this rank is in, written before its first rendezvous.
  uint32_t kind = 0;
  int64_t n = 0;
  uint64_t seq = 0;
};

ShmProcessGroup::ShmProcessGroup(int rank, int world_size, const ShmProcessGroupOptions& options)
    : rank_(rank), world_size_(world_size), options_(options), pidfds_(world_size, -1) {}

ShmProcessGroup::~ShmProcessGroup() {
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
  if (region_) ::munmap(region_, region_bytes_);
  if (rank_ == 0 && !unlinked_ && !shm_name_.empty()) ::shm_unlink(shm_name_.c_str());
}

StatusOr<std::unique_ptr<ShmProcessGroup>> ShmProcessGroup::join(
    TcpStoreClient& store, int rank, int world_size, const ShmProcessGroupOptions& options) {
  if (world_size < 1)
    return invalidArgument("process group: world size must be at least 1, got " +
                           std::to_string(world_size));
  if (rank < 0 || rank >= world_size)
    return invalidArgument("process group: rank " + std::to_string(rank) +
                           " is outside a world of " + std::to_string(world_size));
  if (options.timeout.count() <= 0)
    return invalidArgument("process group: the collective timeout must be positive, got " +
                           std::to_string(options.timeout.count()) + " ms");
  if (options.chunk_floats < kSliceGrain || options.chunk_floats > kMaxChunkFloats)
    return invalidArgument("process group: chunk_floats must be in [" +
                           std::to_string(kSliceGrain) + ", " + std::to_string(kMaxChunkFloats) +
                           "], got " + std::to_string(options.chunk_floats));
  std::unique_ptr<ShmProcessGroup> g(new ShmProcessGroup(rank, world_size, options));
  INGOT_RETURN_IF_ERROR(g->mapRegion(store));
  INGOT_RETURN_IF_ERROR(g->completeJoin());
  return g;
}

size_t ShmProcessGroup::regionBytes() const {
  static_assert(sizeof(Header) <= kHeaderBytes, "the header must fit its page");
  const size_t slots = roundUp(sizeof(RankSlot) * world_size_, kLine);
  const size_t area = roundUp(static_cast<size_t>(options_.chunk_floats) * sizeof(float), kLine);
  return kHeaderBytes + slots + area * (world_size_ + 1);
}

ShmProcessGroup::RankSlot& ShmProcessGroup::slot(int r) const {
  return reinterpret_cast<RankSlot*>(static_cast<char*>(region_) + kHeaderBytes)[r];
}

float* ShmProcessGroup::stage(int r) const {
  const size_t slots = roundUp(sizeof(RankSlot) * world_size_, kLine);
  const size_t area = roundUp(static_cast<size_t>(options_.chunk_floats) * sizeof(float), kLine);
  return reinterpret_cast<float*>(static_cast<char*>(region_) + kHeaderBytes + slots + area * r);
}

float* ShmProcessGroup::sums() const { return stage(world_size_); }

Status ShmProcessGroup::mapRegion(TcpStoreClient& store) {
  const std::string key = options_.name + "/shm";
  region_bytes_ = regionBytes();
  int fd = -1;
  if (rank_ == 0) {
    std::random_device device;
    const uint64_t id = (uint64_t{device()} << 32) ^ device();
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(id));
    shm_name_ = "/ingot-" + std::to_string(::getpid()) + "-" + hex;
    fd = ::shm_open(shm_name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return ioError("process group: shm_open(" + shm_name_ + "): " + errnoText());
    if (::ftruncate(fd, static_cast<off_t>(region_bytes_)) != 0) {
      const std::string why = errnoText();
      ::close(fd);
      return ioError("process group: sizing " + shm_name_ + " to " +
                     std::to_string(region_bytes_) + " bytes: " + why +
                     " (is /dev/shm large enough?)");
    }
  } else {
    StatusOr<std::vector<uint8_t>> name = store.get(key, options_.timeout);
    if (!name.ok()) return name.status().withPrefix("process group rank " + std::to_string(rank_));
    shm_name_.assign(name->begin(), name->end());
    fd = ::shm_open(shm_name_.c_str(), O_RDWR, 0);
    if (fd < 0)
      return ioError("process group rank " + std::to_string(rank_) + ": shm_open(" + shm_name_ +
                     ") published under '" + key + "': " + errnoText() +
                     " (are all ranks on one host?)");
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != region_bytes_) {
      ::close(fd);
      return invalidArgument("process group rank " + std::to_string(rank_) + ": region " +
                             shm_name_ + " has " + std::to_string(st.st_size) +
                             " bytes, this rank expects " + std::to_string(region_bytes_) +
                             ": do all ranks agree on the world size (" +
                             std::to_string(world_size_) + ") and chunk_floats (" +
                             std::to_string(options_.chunk_floats) + ")?");
    }
  }
  void* p = ::mmap(nullptr, region_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const std::string why = errnoText();
  ::close(fd);
  if (p == MAP_FAILED) return ioError("process group: mmap of " + shm_name_ + ": " + why);
  region_ = p;
  if (rank_ == 0) {
    header_ = new (region_) Header();
    header_->version = kLayoutVersion;
    header_->world_size = world_size_;
    header_->chunk_floats = options_.chunk_floats;
    header_->region_bytes = region_bytes_;
    for (int r = 0; r < world_size_; ++r) new (&slot(r)) RankSlot();
    std::atomic_thread_fence(std::memory_order_release);
    header_->magic = kMagic;
    const std::vector<uint8_t> value(shm_name_.begin(), shm_name_.end());
    Status set = store.set(key, value, options_.timeout);
    if (!set.ok()) return set.withPrefix("process group rank 0: publishing the region name");
    return okStatus();
  }
  header_ = reinterpret_cast<Header*>(region_);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (header_->magic != kMagic || header_->version != kLayoutVersion ||
      header_->world_size != world_size_ || header_->chunk_floats != options_.chunk_floats)
    return invalidArgument("process group rank " + std::to_string(rank_) + ": region " +
                           shm_name_ + " holds world size " +
                           std::to_string(header_->world_size) + ", chunk_floats " +
                           std::to_string(header_->chunk_floats) + ", layout " +
                           std::to_string(header_->version) + "; this rank has " +
                           std::to_string(world_size_) + ", " +
                           std::to_string(options_.chunk_floats) + ", " +
                           std::to_string(kLayoutVersion));
  return okStatus();
}

Status ShmProcessGroup::completeJoin() {
  slot(rank_).pid.store(static_cast<int32_t>(::getpid()), std::memory_order_relaxed);
  Status joined = arrive(Kind::kJoin, 0, 0, false);
  if (rank_ == 0 && ::shm_unlink(shm_name_.c_str()) == 0) unlinked_ = true;
  if (!joined.ok()) return joined;
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_) continue;
    const pid_t pid = slot(r).pid.load(std::memory_order_relaxed);
    pidfds_[r] = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfds_[r] < 0 && errno == ESRCH) {
      breakGroup(failedPrecondition("join: rank " + std::to_string(r) + " (pid " +
                                    std::to_string(pid) + ") exited right after joining"));
      return groupStatus();
    }
  }
  return okStatus();
}

pid_t ShmProcessGroup::pidOf(int r) const {
  return r >= 0 && r < world_size_ ? slot(r).pid.load(std::memory_order_relaxed) : 0;
}

std::string ShmProcessGroup::label(Kind kind, uint64_t seq) const {
  switch (kind) {
    case Kind::kJoin: return "join of a " + std::to_string(world_size_) + "-rank process group";
    case Kind::kAllReduce: return "all_reduce #" + std::to_string(seq);
    case Kind::kAllGather: return "all_gather #" + std::to_string(seq);
    case Kind::kBarrier: return "barrier #" + std::to_string(seq);
  }
  return "collective #" + std::to_string(seq);
}


void ShmProcessGroup::wakeAll() {
  header_->futex.fetch_add(1, std::memory_order_seq_cst);
  if (header_->sleepers.load(std::memory_order_seq_cst) > 0)
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header_->futex), FUTEX_WAKE, INT_MAX,
              nullptr, nullptr, 0);
}

void ShmProcessGroup::breakGroup(const Status& error) {
  uint32_t expected = kHealthy;
  if (!header_->state.compare_exchange_strong(expected, kBreaking)) return;
  header_->error_code = static_cast<int32_t>(error.code());
  const std::string& text = error.message();
  const size_t n = std::min(text.size(), kErrorBytes - 1);
  std::memcpy(header_->error, text.data(), n);
  header_->error[n] = '\0';
  header_->state.store(kBroken, std::memory_order_release);
  wakeAll();
}

void ShmProcessGroup::abort(const Status& error) {
  breakGroup(error.ok() ? internalError("tensor-parallel group aborted") : error);
}

Status ShmProcessGroup::groupStatus() const {
  uint32_t state = header_->state.load(std::memory_order_acquire);
  // The rank that broke the group is copying its message in: a few microseconds.
  for (int i = 0; state == kBreaking && i < 100000; ++i) {
    std::this_thread::yield();
    state = header_->state.load(std::memory_order_acquire);
  }
  if (state == kHealthy) return okStatus();
  if (state == kBreaking)
    return failedPrecondition("tensor-parallel group broken by a rank that exited while "
                              "writing its error");
  return Status(static_cast<StatusCode>(header_->error_code), std::string(header_->error));
}

Status ShmProcessGroup::arrive(Kind kind, int64_t n, uint64_t seq, bool first) {
  if (header_->state.load(std::memory_order_acquire) != kHealthy) return groupStatus();
  RankSlot& mine = slot(rank_);
  if (first) {
    mine.kind = static_cast<uint32_t>(kind);
    mine.n = n;
    mine.seq = seq;
  }
  const uint64_t target = passed_ + 1;
  mine.arrived.store(target, std::memory_order_seq_cst);
  wakeAll();
  INGOT_RETURN_IF_ERROR(waitAll(target, label(kind, seq), kind == Kind::kJoin));
  passed_ = target;
  if (!first) return okStatus();
  // Every rank must call the same collective with the same size. The others cannot leave
  // this collective before this rank arrives at its next rendezvous, so their calls hold.
  for (int r = 0; r < world_size_; ++r) {
    const RankSlot& other = slot(r);
    if (other.kind == mine.kind && other.n == n && other.seq == seq) continue;
    breakGroup(internalError(
        "tensor-parallel group: ranks disagree on the collective: rank " + std::to_string(r) +
        " called " + label(static_cast<Kind>(other.kind), other.seq) + " (" +
        std::to_string(other.n) + " floats), rank " + std::to_string(rank_) + " called " +
        label(kind, seq) + " (" + std::to_string(n) + " floats)"));
    return groupStatus();
  }
  return okStatus();
}

Status ShmProcessGroup::waitAll(uint64_t target, const std::string& label, bool joining) {
  const auto deadline = Clock::now() + options_.timeout;
  auto allArrived = [&] {
    for (int r = 0; r < world_size_; ++r)
      if (slot(r).arrived.load(std::memory_order_acquire) < target) return false;
    return true;
  };
  for (int i = 0; i < kSpinPolls; ++i) {
    if (allArrived()) return okStatus();
    if (header_->state.load(std::memory_order_acquire) != kHealthy) return groupStatus();
    cpuRelax();
  }
  for (;;) {
    const uint32_t word = header_->futex.load(std::memory_order_seq_cst);
    // A rendezvous that completed stays complete even if the group broke afterwards.
    if (allArrived()) return okStatus();
    if (header_->state.load(std::memory_order_acquire) != kHealthy) return groupStatus();
    for (int r = 0; r < world_size_; ++r) {
      if (r == rank_ || slot(r).arrived.load(std::memory_order_acquire) >= target) continue;
      const pid_t pid = slot(r).pid.load(std::memory_order_relaxed);
      bool exited = false;
      if (pidfds_[r] >= 0) {
        pollfd p{pidfds_[r], POLLIN, 0};
        exited = ::poll(&p, 1, 0) > 0;
      } else if (!joining && pid > 0) {
        exited = exitedByProc(pid);
      }
      if (exited) {
        breakGroup(failedPrecondition(label + ": rank " + std::to_string(r) + " (pid " +
                                      std::to_string(pid) + ") exited before arriving"));
        return groupStatus();
      }
    }
    if (joining && options_.join_probe) {
      Status probe = options_.join_probe();
      if (!probe.ok()) {
        breakGroup(probe);
        return groupStatus();
      }
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      std::string missing;
      int count = 0;
      for (int r = 0; r < world_size_; ++r)
        if (slot(r).arrived.load(std::memory_order_acquire) < target)
          missing += (count++ ? ", " : "") + std::to_string(r);
      breakGroup(failedPrecondition(label + ": rank" + (count > 1 ? "s " : " ") + missing +
                                    " did not arrive within " + durationText(options_.timeout)));
      return groupStatus();
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    const int64_t ms = std::max<int64_t>(1, std::min<int64_t>(kSliceMs, left));
    timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000L};
    header_->sleepers.fetch_add(1, std::memory_order_seq_cst);
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header_->futex), FUTEX_WAIT, word, &ts,
              nullptr, 0);
    header_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

Status ShmProcessGroup::allReduceSum(float* data, int64_t n) {
  const uint64_t seq = seq_++;
  if (n < 0 || (n > 0 && !data))
    return invalidArgument(label(Kind::kAllReduce, seq) + ": bad buffer (" + std::to_string(n) +
                           " floats)");
  const int64_t chunk = options_.chunk_floats;
  bool first = true;
  for (int64_t off = 0; first || off < n; off += chunk) {
    const int64_t c = std::min(chunk, n - off);
    if (c > 0) std::memcpy(stage(rank_), data + off, static_cast<size_t>(c) * sizeof(float));
    INGOT_RETURN_IF_ERROR(arrive(Kind::kAllReduce, n, seq, first));
    first = false;
    // This rank's slice of the round's sum, over the ranks in order.
    const int64_t slices = (c + kSliceGrain - 1) / kSliceGrain;
    const int64_t begin = std::min(c, slices * rank_ / world_size_ * kSliceGrain);
    const int64_t end = std::min(c, slices * (rank_ + 1) / world_size_ * kSliceGrain);
    float* out = sums();
    for (int64_t i = begin; i < end; ++i) out[i] = stage(0)[i];
    for (int r = 1; r < world_size_; ++r) {
      const float* x = stage(r);
      for (int64_t i = begin; i < end; ++i) out[i] += x[i];
    }
    INGOT_RETURN_IF_ERROR(arrive(Kind::kAllReduce, n, seq, false));
    // Nobody writes the sums again before every rank arrives at the next round.
    if (c > 0) std::memcpy(data + off, out, static_cast<size_t>(c) * sizeof(float));
  }
  return okStatus();
}

Status ShmProcessGroup::allGather(const float* in, int64_t n_per_rank, float* out) {
  const uint64_t seq = seq_++;
  const int64_t n = n_per_rank;
  if (n < 0 || (n > 0 && (!in || !out)))
    return invalidArgument(label(Kind::kAllGather, seq) + ": bad buffers (" + std::to_string(n) +
                           " floats)");
  const int64_t chunk = options_.chunk_floats;
  bool first = true;
  for (int64_t off = 0; first || off < n; off += chunk) {
    const int64_t c = std::min(chunk, n - off);
    if (c > 0) std::memcpy(stage(rank_), in + off, static_cast<size_t>(c) * sizeof(float));
    INGOT_RETURN_IF_ERROR(arrive(Kind::kAllGather, n, seq, first));
    first = false;
    for (int r = 0; r < world_size_ && c > 0; ++r)
      std::memcpy(out + r * n + off, stage(r), static_cast<size_t>(c) * sizeof(float));
    // The staged inputs stay untouched until every rank has copied them.
    INGOT_RETURN_IF_ERROR(arrive(Kind::kAllGather, n, seq, false));
  }
  return okStatus();
}

Status ShmProcessGroup::barrier() {
  const uint64_t seq = seq_++;
  // Two rendezvous, like every collective: the call check after the first relies on no
  // rank leaving before the second.
  INGOT_RETURN_IF_ERROR(arrive(Kind::kBarrier, 0, seq, true));
  return arrive(Kind::kBarrier, 0, seq, false);
}

}  // namespace ingot
