// Warp collectives of the SIMT emulator: shuffles, votes, __syncwarp and the tensor-core MMAs.
//
// A lane that reaches a collective records its operands and waits; the last lane of the
// mask to arrive computes every lane's result and releases them all. CUDA's rules are
// checks here: the mask must name the calling lane and only lanes that exist and have not
// exited, all lanes of a mask must meet at the same collective, and a shuffle must read a
// lane of its mask.
//
// Tensor cores. mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 places its operands as
// the PTX ISA's "Matrix Fragments for mma.m16n8k16 with floating point type" (PTX ISA 8.7,
// section 9.7.14.5.8) gives them, with groupID = lane >> 2 and threadID_in_group = lane % 4:
//   A (16 x 16), a0..a7 in 4 registers (a0 the low half of the first):
//     row = groupID + 8 * ((i >> 1) & 1), col = 2 * threadID_in_group + (i & 1) + 8 * (i >> 2)
//   B (16 x 8), b0..b3 in 2 registers:
//     row = 2 * threadID_in_group + (i & 1) + 8 * (i >> 1), col = groupID
//   C, D (16 x 8), c0..c3:
//     row = groupID + 8 * (i >> 1), col = 2 * threadID_in_group + (i & 1)
// CUDA C++ leaves the nvcuda::wmma fragment layout unspecified (CUDA C++ Programming Guide,
// "Warp Matrix Functions"); the emulator composes the 16x16x16 fragments from two m16n8k16
// halves (x[0..3]: columns 0-7, x[4..7]: columns 8-15 of B and the accumulator; A as a0..a7),
// which is how sm_80+ executes wmma.m16n16k16 (two HMMA.16816). Products are exact (bf16 x
// bf16 fits f32) and each output sums its 16 products and C in double, rounded once to f32:
// a GPU's tensor core rounds differently, by a few f32 ulp (docs/simt-emulator.md).

#include <cstring>

#include "codegen/cuda/emulator/simt_internal.h"

namespace ingot {
namespace simt {
namespace {

std::atomic<bool> gScrambled{false};

BlockRun &blockOf(Thread *t) { return *static_cast<BlockRun *>(t->block); }

const char *opName(int op) {
  switch (op) {
    case kWarpSync: return "__syncwarp";
    case kWarpShflIdx: return "__shfl_sync";
    case kWarpShflUp: return "__shfl_up_sync";
    case kWarpShflDown: return "__shfl_down_sync";
    case kWarpShflXor: return "__shfl_xor_sync";
    case kWarpBallot: return "__ballot_sync";
    case kWarpMmaM16N8K16Bf16: return "mma.sync.m16n8k16";
    case kWarpWmmaLoad: return "wmma::load_matrix_sync";
    case kWarpWmmaStore: return "wmma::store_matrix_sync";
    case kWarpWmmaMma: return "wmma::mma_sync";
    case kWarpActiveMask: return "__activemask";
  }
  return "a warp collective";
}

std::string hex(unsigned v) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", v);
  return text;
}

float bf16Value(unsigned short bits) {
  const unsigned x = static_cast<unsigned>(bits) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// ---- fragment layouts (see the file comment) -------------------------------------------------

/// The tensor core's view of the A operand: under the mutation (setScrambledFragmentLayout)
/// it reads each lane's A registers as if they held the rows of the next lane group, which
/// a kernel must notice; loads and stores of wmma fragments keep the true layout (a layout
/// both sides share consistently is invisible to a program, as CUDA leaves it unspecified).
int gidOf(unsigned lane, bool tensorCore) {
  const int gid = static_cast<int>(lane >> 2);
  return tensorCore && gScrambled.load(std::memory_order_relaxed) ? (gid + 1) % 8 : gid;
}
int tigOf(unsigned lane) { return static_cast<int>(lane & 3u); }
void aPosition(unsigned lane, int i, int *row, int *col, bool tensorCore = true) {
  *row = gidOf(lane, tensorCore) + 8 * ((i >> 1) & 1);
  *col = 2 * tigOf(lane) + (i & 1) + 8 * (i >> 2);
}
void bPosition(unsigned lane, int i, int *row, int *col) {
  *row = 2 * tigOf(lane) + (i & 1) + 8 * (i >> 1);
  *col = static_cast<int>(lane >> 2);
}
void cPosition(unsigned lane, int i, int *row, int *col) {
  *row = static_cast<int>(lane >> 2) + 8 * (i >> 1);
  *col = 2 * tigOf(lane) + (i & 1);
}
/// wmma 16x16x16: element i of lane's fragment of `use` (`tensorCore`: as mma_sync reads it).
void wmmaPosition(int use, unsigned lane, int i, int *row, int *col, bool tensorCore = true) {
  if (use == kWmmaA) return aPosition(lane, i, row, col, tensorCore);
  if (use == kWmmaB) bPosition(lane, i & 3, row, col);
  else cPosition(lane, i & 3, row, col);
  *col += 8 * (i >> 2);
}

/// One output of an MMA: C + sum of products, in double, rounded once to f32.
float dot(const float *a, const float *b, int k, int strideB, float c) {
  double sum = c;
  for (int i = 0; i < k; ++i) sum += static_cast<double>(a[i]) * b[i * strideB];
  return static_cast<float>(sum);
}

void mmaM16N8K16(BlockRun &b, unsigned warpBase) {
  float A[16][16], B[16][8], C[16][8];
  for (unsigned lane = 0; lane < 32; ++lane) {
    const MmaFragments &f = *static_cast<const MmaFragments *>(b.slots[warpBase + lane].in);
    for (int i = 0; i < 8; ++i) {
      int r, c;
      aPosition(lane, i, &r, &c);
      A[r][c] = bf16Value(static_cast<unsigned short>(f.a[i / 2] >> (16 * (i % 2))));
    }
    for (int i = 0; i < 4; ++i) {
      int r, c;
      bPosition(lane, i, &r, &c);
      B[r][c] = bf16Value(static_cast<unsigned short>(f.b[i / 2] >> (16 * (i % 2))));
      cPosition(lane, i, &r, &c);
      C[r][c] = f.c[i];
    }
  }
  for (unsigned lane = 0; lane < 32; ++lane) {
    const MmaFragments &f = *static_cast<const MmaFragments *>(b.slots[warpBase + lane].in);
    for (int i = 0; i < 4; ++i) {
      int r, c;
      cPosition(lane, i, &r, &c);
      f.c[i] = dot(A[r], &B[0][c], 16, 8, C[r][c]);
    }
  }
  b.counters.tensor_flops += 2ull * 16 * 8 * 16;
}

void wmmaMma(BlockRun &b, unsigned warpBase) {
  float A[16][16], B[16][16], C[16][16];
  for (unsigned lane = 0; lane < 32; ++lane) {
    const WmmaMmaFragments &f = *static_cast<const WmmaMmaFragments *>(b.slots[warpBase + lane].in);
    for (int i = 0; i < 8; ++i) {
      int r, c;
      wmmaPosition(kWmmaA, lane, i, &r, &c);
      A[r][c] = bf16Value(f.a[i]);
      wmmaPosition(kWmmaB, lane, i, &r, &c);
      B[r][c] = bf16Value(f.b[i]);
      wmmaPosition(kWmmaAcc, lane, i, &r, &c);
      C[r][c] = f.c[i];
    }
  }
  for (unsigned lane = 0; lane < 32; ++lane) {
    const WmmaMmaFragments &f = *static_cast<const WmmaMmaFragments *>(b.slots[warpBase + lane].in);
    for (int i = 0; i < 8; ++i) {
      int r, c;
      wmmaPosition(kWmmaAcc, lane, i, &r, &c);
      f.d[i] = dot(A[r], &B[0][c], 16, 16, C[r][c]);
    }
  }
  b.counters.tensor_flops += 2ull * 16 * 16 * 16;
}

/// wmma::load_matrix_sync / store_matrix_sync: every lane moves its own 8 elements (checked
/// and counted as its accesses); all lanes must name the same tile.
void wmmaMemory(Thread *caller, BlockRun &b, unsigned warpBase, bool store, const Site &site) {
  const WmmaMemory &first = *static_cast<const WmmaMemory *>(b.slots[warpBase].in);
  for (unsigned lane = 1; lane < 32; ++lane) {
    const WmmaMemory &m = *static_cast<const WmmaMemory *>(b.slots[warpBase + lane].in);
    if (m.pointer != first.pointer || m.ldm != first.ldm || m.rowMajor != first.rowMajor)
      fail(caller, Diagnostic::Kind::kWarpDivergence,
           std::string(store ? "wmma::store_matrix_sync" : "wmma::load_matrix_sync") +
               ": lanes of the warp name different tiles (lane 0 and lane " +
               std::to_string(lane) + ")",
           &site);
  }
  const size_t element = first.use == kWmmaAcc ? 4 : 2;
  for (unsigned lane = 0; lane < 32; ++lane) {
    const WmmaMemory &m = *static_cast<const WmmaMemory *>(b.slots[warpBase + lane].in);
    Thread *t = b.worker->record(warpBase + lane);
    for (int i = 0; i < 8; ++i) {
      int r, c;
      wmmaPosition(m.use, lane, i, &r, &c, /*tensorCore=*/false);
      const unsigned long long offset =
          m.rowMajor ? static_cast<unsigned long long>(r) * m.ldm + c
                     : static_cast<unsigned long long>(c) * m.ldm + r;
      unsigned char *address = static_cast<unsigned char *>(m.pointer) + offset * element;
      checkAccess(t, address, element | (store ? kAccessWrite : 0ull), &site);
      unsigned char *slot = static_cast<unsigned char *>(m.fragment) + i * element;
      if (store) std::memcpy(address, slot, element);
      else std::memcpy(slot, address, element);
    }
  }
}

/// Computes every lane's result of a complete collective. Not inlined: its fragment buffers
/// would otherwise grow the frame of every lane's warpCollective, 32 fiber stacks deep.
__attribute__((noinline)) void complete(Thread *caller, BlockRun &b, unsigned warpIndex, const PendingCollective &g) {
  const unsigned base = warpIndex * 32;
  switch (g.op) {
    case kWarpSync:
      break;
    case kWarpBallot: {
      unsigned ballot = 0;
      for (unsigned lane = 0; lane < 32; ++lane)
        if ((g.mask >> lane & 1u) && *static_cast<const int *>(b.slots[base + lane].in) != 0)
          ballot |= 1u << lane;
      for (unsigned lane = 0; lane < 32; ++lane)
        if (g.mask >> lane & 1u) b.slots[base + lane].result = static_cast<int>(ballot);
      break;
    }
    case kWarpShflIdx:
    case kWarpShflUp:
    case kWarpShflDown:
    case kWarpShflXor: {
      for (unsigned lane = 0; lane < 32; ++lane) {
        if (!(g.mask >> lane & 1u)) continue;
        const ThreadSlot &s = b.slots[base + lane];
        const int width = s.b;
        if (width < 1 || width > 32 || (width & (width - 1)) != 0)
          fail(caller, Diagnostic::Kind::kWarpMask,
               std::string(opName(g.op)) + ": width " + std::to_string(width) +
                   " is not a power of two in 1..32",
               &g.site);
        const int segment = static_cast<int>(lane) & ~(width - 1);
        const int inSegment = static_cast<int>(lane) - segment;
        int src = static_cast<int>(lane);
        if (g.op == kWarpShflIdx) src = segment + ((s.a % width) + width) % width;
        else if (g.op == kWarpShflUp) src = inSegment >= s.a ? static_cast<int>(lane) - s.a : src;
        else if (g.op == kWarpShflDown) src = inSegment + s.a < width ? static_cast<int>(lane) + s.a : src;
        else {
          const int x = static_cast<int>(lane) ^ s.a;
          src = x >= 0 && x < 32 && x < segment + width ? x : src;  // later groups: own value
        }
        if (!(g.mask >> src & 1u))
          fail(caller, Diagnostic::Kind::kWarpMask,
               std::string(opName(g.op)) + ": lane " + std::to_string(lane) + " reads lane " +
                   std::to_string(src) + ", which is not in the mask " + hex(g.mask),
               &g.site);
        std::memcpy(s.out, b.slots[base + src].in, 8);
      }
      break;
    }
    case kWarpMmaM16N8K16Bf16:
      mmaM16N8K16(b, base);
      break;
    case kWarpWmmaMma:
      wmmaMma(b, base);
      break;
    case kWarpWmmaLoad:
    case kWarpWmmaStore:
      wmmaMemory(caller, b, base, g.op == kWarpWmmaStore, g.site);
      break;
  }
  Warp &w = b.warps[warpIndex];
  ++w.syncs;
  ++b.counters.warp_collectives;
  for (unsigned lane = 0; lane < 32; ++lane)
    if (g.mask >> lane & 1u) makeReady(b, base + lane);
}

}  // namespace

bool scrambledFragmentLayout() { return gScrambled.load(); }
void setScrambledFragmentLayout(bool scrambled) { gScrambled.store(scrambled); }

void activeMaskCheck(BlockRun &b, unsigned warpIndex) {
  Warp &w = b.warps[warpIndex];
  if (w.at_activemask == 0) return;  // the common case: nobody to release
  unsigned waiting = 0;
  for (unsigned lane = 0; lane < 32; ++lane) {
    if (!(w.exists >> lane & 1u) || (w.exited >> lane & 1u)) continue;
    const ThreadSlot &s = b.slots[warpIndex * 32 + lane];
    if (s.state == ThreadState::kReady) return;  // it can still run and get here
    if (s.state == ThreadState::kInWarp && s.op == kWarpActiveMask) waiting |= 1u << lane;
  }
  w.at_activemask &= ~waiting;
  for (unsigned lane = 0; lane < 32; ++lane)
    if (waiting >> lane & 1u) {
      b.slots[warpIndex * 32 + lane].result = static_cast<int>(waiting);
      makeReady(b, warpIndex * 32 + lane);
    }
}

unsigned warpCollective(Thread *t, int op, unsigned mask, const void *in, void *out, int a,
                        int bArg, const Site *site) {
  BlockRun &b = blockOf(t);
  const unsigned warpIndex = t->linear / 32, lane = t->lane, bit = 1u << lane;
  Warp &w = b.warps[warpIndex];
  if (op == kWarpActiveMask) {
    ThreadSlot &slot = b.slots[t->linear];
    slot.state = ThreadState::kInWarp;
    slot.site = *site;
    slot.op = op;
    slot.mask = 0;
    w.at_activemask |= bit;
    activeMaskCheck(b, warpIndex);
    yieldToScheduler(t);
    return static_cast<unsigned>(slot.result);
  }
  const bool whole = op == kWarpMmaM16N8K16Bf16 || op >= kWarpWmmaLoad;
  if (whole && mask != 0xffffffffu)
    fail(t, Diagnostic::Kind::kWarpMask, std::string(opName(op)) + " needs the whole warp", site);
  if (!(mask & bit))
    fail(t, Diagnostic::Kind::kWarpMask,
         std::string(opName(op)) + ": the mask " + hex(mask) + " does not name the calling lane " +
             std::to_string(lane),
         site);
  if (mask & ~w.exists)
    fail(t, Diagnostic::Kind::kWarpMask,
         std::string(opName(op)) + ": the mask " + hex(mask) + " names lanes " +
             hex(mask & ~w.exists) + " the block does not have",
         site);
  if (mask & w.exited)
    fail(t, Diagnostic::Kind::kWarpMask,
         std::string(opName(op)) + ": the mask " + hex(mask) + " names exited lanes " +
             hex(mask & w.exited),
         site);
  size_t index = 0;
  while (index < w.pending.size() && w.pending[index].mask != mask) ++index;
  if (index == w.pending.size()) w.pending.push_back(PendingCollective{mask, 0u, op, *site});
  PendingCollective &g = w.pending[index];
  if (g.op != op)
    fail(t, Diagnostic::Kind::kWarpDivergence,
         "lanes of mask " + hex(mask) + " meet at different collectives: " + opName(g.op) +
             " at " + where(&g.site) + " and " + opName(op),
         site);
  ThreadSlot &slot = b.slots[t->linear];
  slot.state = ThreadState::kInWarp;
  slot.site = *site;
  slot.op = op;
  slot.mask = mask;
  slot.in = in;
  slot.out = out;
  slot.a = a;
  slot.b = bArg;
  g.arrived |= bit;
  if (g.arrived == mask) {
    const PendingCollective done = g;
    w.pending.erase(w.pending.begin() + static_cast<long>(index));
    complete(t, b, warpIndex, done);
  }
  activeMaskCheck(b, warpIndex);  // this lane can no longer run on
  yieldToScheduler(t);
  return static_cast<unsigned>(slot.result);
}

void warpLaneExited(Thread *t, Warp &warp, unsigned lane) {
  for (const PendingCollective &g : warp.pending)
    if (g.mask >> lane & 1u)
      fail(t, Diagnostic::Kind::kWarpMask,
           "lane " + std::to_string(lane) + " exits while lanes " + hex(g.arrived) + " wait for it at " +
               opName(g.op) + " (mask " + hex(g.mask) + ") at " + where(&g.site),
           &g.site);
}

std::string describeWaits(const BlockRun &b) {
  std::string text;
  unsigned i = 0;
  while (i < b.num_threads) {
    const ThreadSlot &s = b.slots[i];
    if (s.state == ThreadState::kExited || s.state == ThreadState::kReady) {
      ++i;
      continue;
    }
    unsigned j = i + 1;
    while (j < b.num_threads && b.slots[j].state == s.state && b.slots[j].op == s.op &&
           b.slots[j].site.line == s.site.line && b.slots[j].mask == s.mask)
      ++j;
    if (!text.empty()) text += "; ";
    text += "threads " + std::to_string(i) + (j - 1 > i ? ".." + std::to_string(j - 1) : "") +
            " wait at " +
            (s.state == ThreadState::kAtBarrier ? std::string("__syncthreads")
                                                : std::string(opName(s.op)) + " (mask " + hex(s.mask) + ")") +
            " at " + where(&s.site);
    i = j;
  }
  return text;
}

}  // namespace simt
}  // namespace ingot
