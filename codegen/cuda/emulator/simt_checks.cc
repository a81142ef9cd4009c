// Memory checks of the SIMT emulator: shared bounds and races, global bounds, host memory.
//
// Every load, store and atomic of an emulated kernel calls checkAccess first (the
// instrumentation pass inserts the call). The address decides what it is:
//   - the block's shared arena: each byte must belong to a declared __shared__ array (or the
//     launch's dynamic shared memory); the arena's red zones around every array catch the
//     rest. A write and another thread's access to the same byte within one barrier interval
//     is a race, unless both threads are lanes of one warp and a collective of that warp came
//     between them (CUDA orders a warp's accesses across __syncwarp and the shuffles);
//   - device memory: the access must lie within one live allocation; its bytes are counted;
//   - the thread's own stack (local memory) and the module's data: not checked;
//   - anything else (host memory, another thread's stack, freed memory): an error.
// Out-of-bounds and host-memory accesses end the launch before they are made; races are
// reported once per pair of source lines and the launch goes on.

#include <cstring>

#include "codegen/cuda/emulator/simt_internal.h"

namespace ingot {
namespace simt {
namespace {

BlockRun &blockOf(Thread *t) { return *static_cast<BlockRun *>(t->block); }

/// The declared array holding arena offset `offset`, or the nearest one before it.
std::string describeShared(const Launch &launch, size_t offset) {
  const SharedLayout *layout = moduleSharedLayout(*launch.module);
  if (layout && offset >= layout->dynamic_offset)
    return "dynamic shared memory + " + std::to_string(offset - layout->dynamic_offset);
  const SharedVariable *best = nullptr;
  if (layout)
    for (unsigned long long i = 0; i < layout->count; ++i) {
      const SharedVariable &v = layout->variables[i];
      if (v.offset <= offset && (!best || v.offset > best->offset)) best = &v;
    }
  if (!best) return "the red zone before the first array";
  const size_t past = offset - best->offset;
  if (past < best->size)
    return "`" + demangle(best->name) + "` + " + std::to_string(past);
  return std::to_string(past - best->size) + " bytes past the end of `" + demangle(best->name) +
         "` (" + std::to_string(best->size) + " bytes)";
}

std::string accessText(unsigned long long info) {
  return std::string((info & kAccessAtomic) ? "atomic " : "") +
         ((info & kAccessWrite) ? "write" : "read") + " of " +
         std::to_string(static_cast<unsigned>(info)) + " bytes";
}

bool sameWarpSynced(const BlockRun &b, unsigned earlier, unsigned now, uint32_t syncThen) {
  return earlier / 32 == now / 32 && b.warps[now / 32].syncs > syncThen;
}

void raceReport(Thread *t, const Site *site, const Site *other, unsigned otherThread,
                bool otherWrite, bool write, size_t offset) {
  BlockRun &b = blockOf(t);
  Launch &launch = *b.launch;
  const std::string key = where(site) + "|" + where(other);
  {
    std::lock_guard<std::mutex> lock(launch.mutex);
    for (const std::string &k : launch.reported)
      if (k == key) return;
    launch.reported.push_back(key);
  }
  report(t, Diagnostic::Kind::kSharedRace,
         std::string("shared-memory race on ") + describeShared(launch, offset) + ": this " +
             (write ? "write" : "read") + " and a " + (otherWrite ? "write" : "read") +
             " by thread " + dimText(b.worker->record(otherThread)->thread_idx) + " at " +
             where(other) + " with no barrier between them",
         site);
}

void sharedAccess(Thread *t, size_t offset, unsigned long long info, const Site *site) {
  BlockRun &b = blockOf(t);
  Worker &w = *b.worker;
  const size_t size = static_cast<unsigned>(info);
  for (size_t i = 0; i < size; ++i)
    if (offset + i >= w.arena_bytes || !w.arena_valid[offset + i])
      fail(t, Diagnostic::Kind::kSharedOutOfBounds,
           "shared-memory " + accessText(info) + " outside the declared arrays: byte " +
               std::to_string(i) + " is at " + describeShared(*b.launch, offset + i),
           site);
  if (info & kAccessAtomic) return;  // atomics do not race
  const bool write = (info & kAccessWrite) != 0;
  const unsigned me = t->linear;
  const uint32_t interval = b.interval, sync = b.warps[me / 32].syncs;
  for (size_t i = 0; i < size; ++i) {
    ShadowByte &s = w.shadow[offset + i];
    if (s.write_interval == interval && s.writer != me &&
        !sameWarpSynced(b, s.writer, me, s.write_sync)) {
      raceReport(t, site, s.write_site, s.writer, true, write, offset + i);
    } else if (write && s.read_interval == interval &&
               (s.reader != me || s.reader_warp == 0xffff) &&
               !(s.reader_warp == me / 32 && b.warps[me / 32].syncs > s.read_sync)) {
      raceReport(t, site, s.read_site, s.reader, false, true, offset + i);
    }
    if (write) {
      s.write_interval = interval;
      s.write_sync = sync;
      s.writer = static_cast<uint16_t>(me);
      s.write_site = site;
    } else if (s.read_interval != interval) {
      s.read_interval = interval;
      s.read_sync = sync;
      s.reader = static_cast<uint16_t>(me);
      s.reader_warp = static_cast<uint16_t>(me / 32);
      s.read_site = site;
    } else if (s.reader != me) {
      if (s.reader_warp != me / 32) s.reader_warp = 0xffff;
      s.read_sync = sync > s.read_sync ? sync : s.read_sync;
      s.reader = static_cast<uint16_t>(me);
      s.read_site = site;
    }
  }
}

}  // namespace

void prepareArena(Worker &w, const Launch &launch) {
  const SharedLayout *layout = moduleSharedLayout(*launch.module);
  const size_t dynamicOffset = layout ? layout->dynamic_offset : kSharedRedZone;
  const size_t bytes = dynamicOffset + launch.dynamic_shared + kSharedRedZone;
  if (w.arena_storage.size() < bytes + 256) w.arena_storage.resize(bytes + 256);
  const uintptr_t raw = reinterpret_cast<uintptr_t>(w.arena_storage.data());
  w.arena = reinterpret_cast<unsigned char *>((raw + 255) & ~uintptr_t{255});
  w.arena_bytes = bytes;
  w.arena_valid.assign(bytes, 0);
  if (layout)
    for (unsigned long long i = 0; i < layout->count; ++i)
      std::memset(w.arena_valid.data() + layout->variables[i].offset, 1, layout->variables[i].size);
  std::memset(w.arena_valid.data() + dynamicOffset, 1, launch.dynamic_shared);
  if (w.shadow.size() < bytes) w.shadow.resize(bytes);
}

void checkAccess(Thread *t, const void *address, unsigned long long info, const Site *site) {
  BlockRun &b = blockOf(t);
  Worker &w = *b.worker;
  const uintptr_t a = reinterpret_cast<uintptr_t>(address);
  const size_t size = static_cast<unsigned>(info);
  const uintptr_t arena = reinterpret_cast<uintptr_t>(w.arena);
  if (a - arena < w.arena_bytes || (a < arena && arena - a < kSharedRedZone)) {
    if (a < arena)
      fail(t, Diagnostic::Kind::kSharedOutOfBounds,
           "shared-memory " + accessText(info) + " " + std::to_string(arena - a) +
               " bytes before the arena",
           site);
    sharedAccess(t, a - arena, info, site);
    return;
  }
  if (a - b.hit_base < b.hit_bytes && a + size - b.hit_base <= b.hit_bytes) {
    if (info & kAccessWrite) b.counters.global_bytes_written += size;
    else b.counters.global_bytes_read += size;
    return;
  }
  uintptr_t base = 0;
  size_t bytes = 0;
  switch (classifyDeviceRange(a, size, &base, &bytes)) {
    case 0:
      b.hit_base = base;
      b.hit_bytes = bytes;
      if (info & kAccessWrite) b.counters.global_bytes_written += size;
      else b.counters.global_bytes_read += size;
      return;
    case 1:
      fail(t, Diagnostic::Kind::kGlobalOutOfBounds,
           "global " + accessText(info) + " at offset " + std::to_string(a - base) +
               " of an allocation of " + std::to_string(bytes) + " bytes: " +
               std::to_string(a + size - base - bytes) + " bytes past its end",
           site);
    case 2:
      fail(t, Diagnostic::Kind::kGlobalOutOfBounds,
           "global " + accessText(info) + " to device memory that is not allocated (freed, "
           "or between allocations)",
           site);
    default:
      break;
  }
  const uintptr_t region = reinterpret_cast<uintptr_t>(t) - kThreadRecordOffset;
  if (a - region < kStackRegionBytes) return;  // its own local memory
  const uintptr_t stacks = reinterpret_cast<uintptr_t>(w.stacks);
  if (a - stacks < w.stack_bytes)
    fail(t, Diagnostic::Kind::kHostMemory,
         accessText(info) + " of another thread's local memory (thread " +
             std::to_string((a - stacks) / kStackRegionBytes) + ")",
         site);
  if (moduleContains(*b.launch->module, a)) return;  // constants of the module
  char text[32];
  std::snprintf(text, sizeof(text), "%p", address);
  fail(t, Diagnostic::Kind::kHostMemory,
       accessText(info) + " at " + text + ", which is not device memory", site);
}

}  // namespace simt
}  // namespace ingot
