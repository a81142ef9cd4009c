// Emulated device memory: page-granular allocations in one reserved range, with guard pages.
//
// The range is reserved once (PROT_NONE, nothing committed); an allocation commits its pages,
// fills them with 0xFF (NaN in f32, bf16 and E4M3, so unwritten memory shows in results) and
// is followed by an unmapped guard page. A page table maps every page of the range to its
// allocation, so a kernel's access is classified in O(1): inside one allocation, past its
// end, or in no allocation (freed or a gap). Freed pages are unmapped again: a host access
// faults, a kernel access is reported.

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "codegen/cuda/emulator/simt_internal.h"

namespace ingot {
namespace simt {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kReserveBytes = size_t{64} << 30;  ///< address range of the device
constexpr size_t kMaxAllocations = size_t{1} << 20;

size_t parseBytes(const char *text, size_t fallback) {
  if (!text || !*text) return fallback;
  char *end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || value <= 0) return fallback;
  double scale = 1;
  if (*end == 'k' || *end == 'K') scale = 1024.0;
  if (*end == 'm' || *end == 'M') scale = 1024.0 * 1024;
  if (*end == 'g' || *end == 'G') scale = 1024.0 * 1024 * 1024;
  return static_cast<size_t>(value * scale);
}

class Heap {
 public:
  static Heap &get() {
    static Heap *heap = new Heap();  // never destroyed: kernels may run during teardown
    return *heap;
  }

  void *alloc(size_t bytes) {
    if (bytes == 0) return nullptr;
    const size_t pages = (bytes + kPage - 1) / kPage;
    std::lock_guard<std::mutex> lock(mutex_);
    if (used_ + pages * kPage > total_ || freeIds_.empty() && nextId_ >= kMaxAllocations)
      return nullptr;
    auto it = free_.begin();
    while (it != free_.end() && it->second < (pages + 1) * kPage) ++it;
    if (it == free_.end()) return nullptr;
    const uintptr_t base = it->first;
    const size_t left = it->second - (pages + 1) * kPage;
    free_.erase(it);
    if (left > 0) free_[base + (pages + 1) * kPage] = left;
    void *p = reinterpret_cast<void *>(base);
    if (mprotect(p, pages * kPage, PROT_READ | PROT_WRITE) != 0) return nullptr;
    std::memset(p, 0xff, pages * kPage);
    uint32_t id;
    if (!freeIds_.empty()) {
      id = freeIds_.back();
      freeIds_.pop_back();
    } else {
      id = static_cast<uint32_t>(nextId_++);
    }
    allocs_[id] = Allocation{base, bytes, pages};
    const size_t first = (base - start_) / kPage;
    for (size_t i = 0; i < pages; ++i) owner_[first + i].store(id + 1, std::memory_order_relaxed);
    used_ += pages * kPage;
    return p;
  }

  void release(void *pointer) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(pointer);
    if (!pointer || base - start_ >= kReserveBytes) return;
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t first = (base - start_) / kPage;
    const uint32_t owner = owner_[first].load(std::memory_order_relaxed);
    if (owner == 0 || allocs_[owner - 1].base != base) return;  // not an allocation's start
    const Allocation a = allocs_[owner - 1];
    for (size_t i = 0; i < a.pages; ++i) owner_[first + i].store(0, std::memory_order_relaxed);
    freeIds_.push_back(owner - 1);
    mmap(pointer, a.pages * kPage, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
         -1, 0);
    used_ -= a.pages * kPage;
    // Back to the free ranges, merged with its neighbours (the guard page comes along).
    uintptr_t start = base;
    size_t size = (a.pages + 1) * kPage;
    auto next = free_.lower_bound(start);
    if (next != free_.end() && next->first == start + size) {
      size += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == start) {
        start = prev->first;
        size += prev->second;
        free_.erase(prev);
      }
    }
    free_[start] = size;
  }

  int classify(uintptr_t address, size_t bytes, uintptr_t *base, size_t *size) const {
    if (address - start_ >= kReserveBytes) return 3;
    const uint32_t owner = owner_[(address - start_) / kPage].load(std::memory_order_relaxed);
    if (owner == 0) return 2;
    const Allocation &a = allocs_[owner - 1];
    *base = a.base;
    *size = a.bytes;
    return address + bytes <= a.base + a.bytes ? 0 : 1;
  }

  size_t total() const { return total_; }
  size_t used() {
    std::lock_guard<std::mutex> lock(mutex_);
    return used_;
  }

 private:
  struct Allocation {
    uintptr_t base;
    size_t bytes;
    size_t pages;
  };

  Heap() {
    total_ = parseBytes(std::getenv("INGOT_SIMT_DEVICE_MEMORY"), size_t{4} << 30);
    void *range = mmap(nullptr, kReserveBytes, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *owners = mmap(nullptr, kReserveBytes / kPage * sizeof(std::atomic<uint32_t>),
                        PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *allocs = mmap(nullptr, kMaxAllocations * sizeof(Allocation), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (range == MAP_FAILED || owners == MAP_FAILED || allocs == MAP_FAILED) {
      std::fprintf(stderr, "ingot simt: cannot reserve the emulated device's address range\n");
      std::abort();
    }
    start_ = reinterpret_cast<uintptr_t>(range);
    owner_ = static_cast<std::atomic<uint32_t> *>(owners);  // zero pages: every page free
    allocs_ = static_cast<Allocation *>(allocs);
    free_[start_] = kReserveBytes;
  }

  std::mutex mutex_;
  uintptr_t start_ = 0;
  std::atomic<uint32_t> *owner_ = nullptr;
  Allocation *allocs_ = nullptr;
  size_t nextId_ = 0;
  std::vector<uint32_t> freeIds_;
  std::map<uintptr_t, size_t> free_;
  size_t total_ = 0, used_ = 0;
};

}  // namespace

void *deviceAlloc(size_t bytes) { return Heap::get().alloc(bytes); }
void deviceFree(void *pointer) { Heap::get().release(pointer); }
bool isDevicePointer(const void *pointer) {
  uintptr_t base;
  size_t size;
  return Heap::get().classify(reinterpret_cast<uintptr_t>(pointer), 1, &base, &size) == 0;
}
size_t deviceMemoryTotal() { return Heap::get().total(); }
size_t deviceMemoryUsed() { return Heap::get().used(); }

int classifyDeviceRange(uintptr_t address, size_t bytes, uintptr_t *base, size_t *size) {
  return Heap::get().classify(address, bytes, base, size);
}

}  // namespace simt
}  // namespace ingot
