// Paged attention vs. a dense naive reference: random block tables, GQA ratios, decode,
// prefill, chunked prefill, mixed batches, every example attention variant; f32 and fp8 KV.
#include "runtime/backend/cpu/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <cstring>

#include "core/region/region_examples.h"
#include "runtime/backend/cpu/quant_formats.h"

namespace ingot {
namespace {

const float kPoison = std::numeric_limits<float>::quiet_NaN();

/// One request of a test batch: KV length after the step and how many tokens are new.
struct Req {
  int len;
  int fresh;
};

/// A batch with dense K/V per request, scattered into a paged pool.
struct Batch {
  int64_t H, Hkv, D, layer = 1;
  KvCacheLayout layout;
  std::vector<Req> reqs;
  std::vector<std::vector<float>> k, v;  // [b][slot][hk][d]
  std::vector<float> q;                  // [T][H][D]
  std::vector<float> pool;
  std::vector<int32_t> block_tables, seq_lens, query_start;
  int64_t max_blocks = 0, T = 0, max_len = 0;
  // Extra operands of the document and tree masks.
  std::vector<int32_t> doc_ids, tree_start, tree_bits;
  int64_t tree_nodes = 0, tree_words = 0;
};

Batch makeBatch(std::vector<Req> reqs, int64_t Hkv, int64_t group, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  Batch b;
  b.Hkv = Hkv;
  b.H = Hkv * group;
  b.D = 16;
  b.layout = {2, 4, Hkv, b.D};  // 2 layers, blocks of 4 tokens
  b.reqs = reqs;
  int64_t totalBlocks = 0;
  b.query_start.push_back(0);
  for (const Req& r : reqs) {
    b.max_blocks = std::max<int64_t>(b.max_blocks, (r.len + 3) / 4);
    b.max_len = std::max<int64_t>(b.max_len, r.len);
    totalBlocks += (r.len + 3) / 4;
    b.T += r.fresh;
    b.query_start.push_back(static_cast<int32_t>(b.T));
    b.seq_lens.push_back(r.len);
  }
  const int64_t poolBlocks = totalBlocks + 3;  // a few blocks nobody uses
  std::vector<int32_t> ids(poolBlocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  b.pool.assign(poolBlocks * b.layout.blockFloats(), kPoison);
  b.block_tables.assign(reqs.size() * b.max_blocks, -1);
  size_t next = 0;
  for (size_t r = 0; r < reqs.size(); ++r) {
    const int len = reqs[r].len;
    for (int i = 0; i < (len + 3) / 4; ++i) b.block_tables[r * b.max_blocks + i] = ids[next++];
    b.k.emplace_back(len * Hkv * b.D);
    b.v.emplace_back(len * Hkv * b.D);
    for (float& x : b.k.back()) x = dist(rng) * 2;
    for (float& x : b.v.back()) x = dist(rng);
    for (int s = 0; s < len; ++s) {
      const int64_t block = b.block_tables[r * b.max_blocks + s / 4];
      for (int kv = 0; kv < 2; ++kv) {
        // [block][layer][K/V][offset][head][dim], written out longhand.
        float* dst = &b.pool[((((block * 2 + b.layer) * 2 + kv) * 4) + s % 4) * Hkv * b.D];
        const std::vector<float>& src = kv == 0 ? b.k.back() : b.v.back();
        std::copy(&src[s * Hkv * b.D], &src[(s + 1) * Hkv * b.D], dst);
      }
    }
  }
  b.q.resize(b.T * b.H * b.D);
  for (float& x : b.q) x = dist(rng) * 2;

  // Documents: runs of random length over each request's slots.
  b.doc_ids.assign(reqs.size() * b.max_len, 0);
  for (size_t r = 0; r < reqs.size(); ++r) {
    int doc = 0;
    for (int s = 0; s < b.max_len; ++s) {
      if (s > 0 && rng() % 5 == 0) ++doc;
      b.doc_ids[r * b.max_len + s] = doc;
    }
  }
  // Trees over each request's new tokens: random parents, ancestor-or-self bits.
  b.tree_nodes = 1;
  for (const Req& r : reqs) b.tree_nodes = std::max<int64_t>(b.tree_nodes, r.fresh);
  b.tree_words = (b.tree_nodes + 31) / 32;
  b.tree_bits.assign(reqs.size() * b.tree_nodes * b.tree_words, 0);
  for (size_t r = 0; r < reqs.size(); ++r) {
    b.tree_start.push_back(reqs[r].len - reqs[r].fresh);
    std::vector<int> parent(reqs[r].fresh, -1);
    for (int i = 1; i < reqs[r].fresh; ++i) parent[i] = static_cast<int>(rng() % i);
    for (int i = 0; i < reqs[r].fresh; ++i)
      for (int a = i; a >= 0; a = parent[a])
        b.tree_bits[(r * b.tree_nodes + i) * b.tree_words + a / 32] |= 1u << (a % 32);
  }
  return b;
}

using MaskFn = std::function<bool(const Batch&, int64_t b, int64_t h, int64_t q, int64_t kv)>;
using ScoreFn = std::function<double(double s, int64_t h, int64_t q, int64_t kv)>;

/// The dense reference: naive loops over each request's own K/V, in double.
std::vector<double> denseAttention(const Batch& bt, float scale, const MaskFn& mask,
                                   const ScoreFn& score) {
  const int64_t H = bt.H, D = bt.D, group = bt.H / bt.Hkv;
  std::vector<double> out(bt.T * H * D, 0.0);
  for (size_t b = 0; b < bt.reqs.size(); ++b) {
    const int len = bt.reqs[b].len;
    for (int i = 0; i < bt.reqs[b].fresh; ++i) {
      const int64_t t = bt.query_start[b] + i;
      const int64_t qs = len - bt.reqs[b].fresh + i;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t hk = h / group;
        std::vector<double> s(len, -INFINITY);
        double mx = -INFINITY;
        for (int kv = 0; kv < len; ++kv) {
          if (mask && !mask(bt, b, h, qs, kv)) continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += double(bt.q[(t * H + h) * D + d]) * bt.k[b][(kv * bt.Hkv + hk) * D + d];
          s[kv] = score ? score(scale * dot, h, qs, kv) : scale * dot;
          mx = std::max(mx, s[kv]);
        }
        if (mx == -INFINITY) continue;
        double sum = 0;
        for (int kv = 0; kv < len; ++kv) sum += s[kv] == -INFINITY ? 0 : std::exp(s[kv] - mx);
        for (int kv = 0; kv < len; ++kv) {
          if (s[kv] == -INFINITY) continue;
          const double p = std::exp(s[kv] - mx) / sum;
          for (int64_t d = 0; d < D; ++d)
            out[(t * H + h) * D + d] += p * bt.v[b][(kv * bt.Hkv + hk) * D + d];
        }
      }
    }
  }
  return out;
}

/// The batch's K/V written token by token into an fp8 pool (kv_fp8.h), and the same batch
/// with K/V replaced by what that pool decodes to (its f32 pool holds those values).
struct Fp8Batch {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  Batch decoded;
};

Fp8Batch makeFp8Batch(const Batch& bt) {
  Fp8Batch f;
  const int64_t blocks = static_cast<int64_t>(bt.pool.size()) / bt.layout.blockFloats();
  const int64_t bs = bt.layout.block_size;
  f.codes.assign(blocks * bt.layout.blockFloats(), 0);
  f.scales.assign(blocks * bt.layout.blockScales(), fp8KvMinScale());
  f.decoded = bt;
  const Fp8KvPool pool{f.codes.data(), f.scales.data()};
  for (size_t r = 0; r < bt.reqs.size(); ++r) {
    std::vector<int32_t> slots(bt.reqs[r].len);
    for (int s = 0; s < bt.reqs[r].len; ++s)
      slots[s] = bt.block_tables[r * bt.max_blocks + s / bs] * static_cast<int32_t>(bs) + s % bs;
    kvWriteRowsFp8(pool, bt.layout, bt.layer, bt.k[r].data(), bt.v[r].data(), slots.data(),
                   bt.reqs[r].len, 0, 2 * bt.Hkv);
    for (int s = 0; s < bt.reqs[r].len; ++s)
      for (int kv = 0; kv < 2; ++kv) {
        const int64_t block = slots[s] / bs;
        const int64_t at = bt.layout.rowOffset(block, bt.layer, kv, s % bs);
        std::vector<float>& dense = kv == 0 ? f.decoded.k[r] : f.decoded.v[r];
        for (int64_t h = 0; h < bt.Hkv; ++h)
          for (int64_t d = 0; d < bt.D; ++d) {
            const float x = e4m3fnToF32(f.codes[at + h * bt.D + d]) *
                            f.scales[bt.layout.scaleIndex(block, bt.layer, kv, h)];
            dense[(s * bt.Hkv + h) * bt.D + d] = x;
            f.decoded.pool[at + h * bt.D + d] = x;
          }
      }
  }
  return f;
}

/// A bound on |fp8 attention - exact attention| per output row (t, h): a score moved by at
/// most e (score and mask regions here are 1-Lipschitz) changes each softmax weight by a
/// factor within e^(+-2e), so the output moves by at most (e^(2e) - 1) max|v| plus the
/// largest change of a value.
double fp8RowBound(const Batch& bt, const Batch& dec, float scale, int64_t b, int64_t t,
                   int64_t h) {
  const int64_t group = bt.H / bt.Hkv, hk = h / group, D = bt.D;
  double e = 0, vmax = 0, dv = 0;
  for (int kv = 0; kv < bt.reqs[b].len; ++kv) {
    double ds = 0;
    for (int64_t d = 0; d < D; ++d) {
      const int64_t i = (kv * bt.Hkv + hk) * D + d;
      ds += double(bt.q[(t * bt.H + h) * D + d]) * (double(dec.k[b][i]) - bt.k[b][i]);
      vmax = std::max(vmax, std::fabs(double(bt.v[b][i])));
      dv = std::max(dv, std::fabs(double(dec.v[b][i]) - bt.v[b][i]));
    }
    e = std::max(e, std::fabs(scale * ds));
  }
  return std::expm1(2 * e) * vmax + dv;
}

struct Variant {
  std::string name;
  std::vector<uint8_t> mask, score;
  MaskFn maskRef;
  ScoreFn scoreRef;
  bool docOperand = false, treeOperands = false;
};

std::vector<Variant> variants(int64_t H) {
  auto causal = [](const Batch&, int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; };
  std::vector<Variant> v;
  v.push_back({"none", {}, {}, nullptr, nullptr});
  v.push_back({"causal", causalMaskBytecode(), {}, causal, nullptr});
  v.push_back({"sliding_window", slidingWindowMaskBytecode(4), {},
               [](const Batch&, int64_t, int64_t, int64_t q, int64_t kv) {
                 return kv <= q && q - kv < 4;
               },
               nullptr});
  v.push_back({"alibi", causalMaskBytecode(), alibiScoreBytecode(H), causal,
               [H](double s, int64_t h, int64_t q, int64_t kv) {
                 const double slope = std::pow(2.0, -8.0 * (h + 1) / double(H));
                 return s - slope * double(q - kv);
               }});
  v.push_back({"softcap", causalMaskBytecode(), softcapScoreBytecode(3.0f), causal,
               [](double s, int64_t, int64_t, int64_t) { return 3.0 * std::tanh(s / 3.0); }});
  Variant doc{"document_mask", documentMaskBytecode(), {},
              [](const Batch& bt, int64_t b, int64_t, int64_t q, int64_t kv) {
                return kv <= q && bt.doc_ids[b * bt.max_len + q] == bt.doc_ids[b * bt.max_len + kv];
              },
              nullptr};
  doc.docOperand = true;
  v.push_back(doc);
  Variant tree{"tree_mask", treeMaskBytecode(), {},
               [](const Batch& bt, int64_t b, int64_t, int64_t q, int64_t kv) {
                 if (kv > q) return false;
                 const int64_t start = bt.tree_start[b];
                 if (kv < start) return true;
                 const int64_t nq = q - start, nkv = kv - start;
                 const uint32_t word = static_cast<uint32_t>(
                     bt.tree_bits[(b * bt.tree_nodes + nq) * bt.tree_words + nkv / 32]);
                 return ((word >> (nkv % 32)) & 1u) != 0;
               },
               nullptr};
  tree.treeOperands = true;
  v.push_back(tree);
  // Gemma 3's local layers: the tree mask within a 5-key window.
  Variant treeWindow{"tree_window", treeMaskBytecode(5), {},
                     [ref = tree.maskRef](const Batch& bt, int64_t b, int64_t h, int64_t q,
                                          int64_t kv) { return ref(bt, b, h, q, kv) && q - kv < 5; },
                     nullptr};
  treeWindow.treeOperands = true;
  v.push_back(treeWindow);
  return v;
}

void runCase(const std::vector<Req>& reqs, int64_t group, uint32_t seed) {
  std::mt19937 rng(seed);
  ThreadPool pool(3);
  Batch bt = makeBatch(reqs, 2, group, rng);
  const Fp8Batch fp8 = makeFp8Batch(bt);
  for (const Variant& var : variants(bt.H)) {
    StatusOr<RegionProgram> mask = var.mask.empty() ? StatusOr<RegionProgram>(RegionProgram())
                                                    : decodeRegionBytecode(var.mask);
    ASSERT_TRUE(mask.ok()) << mask.status().message();
    StatusOr<RegionProgram> score = var.score.empty() ? StatusOr<RegionProgram>(RegionProgram())
                                                      : decodeRegionBytecode(var.score);
    ASSERT_TRUE(score.ok()) << score.status().message();
    AttentionParams p;
    p.layer = bt.layer;
    p.num_heads = bt.H;
    p.num_kv_heads = bt.Hkv;
    p.head_dim = bt.D;
    p.scale = 0.25f;
    p.variant.mask = var.mask.empty() ? nullptr : &*mask;
    p.variant.score = var.score.empty() ? nullptr : &*score;
    p.variant.analyze();
    EXPECT_EQ(p.variant.mask_is_causal, var.name == "causal" || var.name == "alibi" ||
                                            var.name == "softcap" || var.name == "sliding_window");
    // The tree mask is causal and shows every key before the tree without evaluation.
    EXPECT_EQ(p.variant.mask_implies_causal, var.name != "none");
    const bool tree = var.name == "tree_mask" || var.name == "tree_window";
    EXPECT_EQ(p.variant.prefix_bound_reg >= 0, tree);
    // A window is seen through: keys before it are neither evaluated nor read.
    EXPECT_EQ(p.variant.window, var.name == "sliding_window" ? 4 : var.name == "tree_window" ? 5 : 0);
    const int64_t docShape[2] = {static_cast<int64_t>(reqs.size()), bt.max_len};
    const int64_t startShape[1] = {static_cast<int64_t>(reqs.size())};
    const int64_t bitsShape[3] = {static_cast<int64_t>(reqs.size()), bt.tree_nodes, bt.tree_words};
    std::vector<RegionOperandView> extra;
    if (var.docOperand) extra.push_back({RegionType::kI32, docShape, 2, bt.doc_ids.data()});
    if (var.treeOperands) {
      extra.push_back({RegionType::kI32, startShape, 1, bt.tree_start.data()});
      extra.push_back({RegionType::kI32, bitsShape, 3, bt.tree_bits.data()});
    }
    p.extra = extra.data();
    p.num_extra = extra.size();
    AttentionBatch batch{bt.block_tables.data(), bt.max_blocks, bt.seq_lens.data(),
                         bt.query_start.data(), static_cast<int64_t>(reqs.size()), bt.T};
    const std::vector<double> want = denseAttention(bt, 0.25f, var.maskRef, var.scoreRef);
    for (int l = 0; l <= static_cast<int>(detectSimdLevel()); ++l) {
      SCOPED_TRACE(var.name + " group " + std::to_string(group) + " " +
                   simdLevelName(static_cast<SimdLevel>(l)));
      AttentionScratch scratch;
      std::vector<float> out(bt.T * bt.H * bt.D, kPoison);
      Status st = pagedAttention(bt.q.data(), bt.pool.data(), bt.layout, batch, p, out.data(),
                                 pool, cpuKernels(static_cast<SimdLevel>(l)), scratch);
      ASSERT_TRUE(st.ok()) << st.message();
      for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 2e-5) << "element " << i;

      // fp8 KV: exactly the f32 result over the decoded values (same kernels, same order),
      // and within the propagated quantization error of the exact f64 attention.
      std::vector<float> ref(out.size(), kPoison);
      ASSERT_TRUE(pagedAttention(bt.q.data(), fp8.decoded.pool.data(), bt.layout, batch, p,
                                 ref.data(), pool, cpuKernels(static_cast<SimdLevel>(l)), scratch)
                      .ok());
      KvCacheView view;
      view.codes = fp8.codes.data();
      view.scales = fp8.scales.data();
      view.decode = fp8RowsDecoder(static_cast<SimdLevel>(l));
      std::vector<float> got(out.size(), kPoison);
      st = pagedAttention(bt.q.data(), view, bt.layout, batch, p, got.data(), pool,
                          cpuKernels(static_cast<SimdLevel>(l)), scratch);
      ASSERT_TRUE(st.ok()) << st.message();
      ASSERT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0);
      for (size_t b = 0; b < reqs.size(); ++b)
        for (int64_t t = bt.query_start[b]; t < bt.query_start[b + 1]; ++t)
          for (int64_t h = 0; h < bt.H; ++h) {
            const double bound = fp8RowBound(bt, fp8.decoded, 0.25f, b, t, h) + 2e-5;
            for (int64_t d = 0; d < bt.D; ++d) {
              const size_t i = (t * bt.H + h) * bt.D + d;
              ASSERT_LE(std::fabs(got[i] - want[i]), bound) << "fp8 element " << i;
            }
          }
    }
    if (p.variant.window > 0) {
      // KV blocks wholly before every new token's window are never read: NaN there
      // changes nothing (a NaN value row would reach the output even at weight 0).
      SCOPED_TRACE(var.name + " with NaN before the window");
      Batch poisoned = bt;
      const int64_t bs = bt.layout.block_size;
      for (size_t r = 0; r < reqs.size(); ++r) {
        const int64_t first = std::max<int64_t>(0, reqs[r].len - reqs[r].fresh - p.variant.window + 1);
        for (int64_t i = 0; i < first / bs; ++i) {
          const int64_t block = bt.block_tables[r * bt.max_blocks + i];
          for (int64_t kv = 0; kv < 2; ++kv)
            std::fill_n(poisoned.pool.begin() + bt.layout.rowOffset(block, bt.layer, kv, 0),
                        bs * bt.layout.rowFloats(), std::numeric_limits<float>::quiet_NaN());
        }
      }
      AttentionScratch scratch;
      std::vector<float> clean(bt.T * bt.H * bt.D), dirty(clean.size());
      ASSERT_TRUE(pagedAttention(bt.q.data(), bt.pool.data(), bt.layout, batch, p, clean.data(),
                                 pool, cpuKernels(detectSimdLevel()), scratch).ok());
      ASSERT_TRUE(pagedAttention(bt.q.data(), poisoned.pool.data(), bt.layout, batch, p,
                                 dirty.data(), pool, cpuKernels(detectSimdLevel()), scratch).ok());
      ASSERT_EQ(std::memcmp(clean.data(), dirty.data(), clean.size() * sizeof(float)), 0);
    }
  }
}

TEST(PagedAttentionTest, DecodeBatchMatchesDenseReference) {
  for (int64_t g : {1, 3, 4}) runCase({{5, 1}, {17, 1}, {33, 1}}, g, 10 + g);
}

TEST(PagedAttentionTest, PrefillMatchesDenseReference) {
  for (int64_t g : {1, 3, 4}) runCase({{23, 23}}, g, 20 + g);
}

TEST(PagedAttentionTest, ChunkedPrefillMatchesDenseReference) {
  for (int64_t g : {1, 3, 4}) runCase({{30, 7}}, g, 30 + g);
}

TEST(PagedAttentionTest, MixedBatchMatchesDenseReference) {
  for (int64_t g : {1, 3, 4, 6}) runCase({{40, 1}, {9, 9}, {25, 12}, {1, 1}}, g, 40 + g);
}

TEST(PagedAttentionTest, RegionErrorsAreReportedNotIgnored) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  Batch bt = makeBatch({{6, 2}}, 2, 2, rng);
  StatusOr<RegionProgram> doc = decodeRegionBytecode(documentMaskBytecode());
  ASSERT_TRUE(doc.ok());
  AttentionParams p;
  p.layer = bt.layer;
  p.num_heads = bt.H;
  p.num_kv_heads = bt.Hkv;
  p.head_dim = bt.D;
  p.variant.mask = &*doc;
  p.variant.analyze();
  // doc_ids too short for slot 5: the region load is out of range.
  const int64_t shape[2] = {1, 3};
  std::vector<int32_t> ids(3, 0);
  RegionOperandView view{RegionType::kI32, shape, 2, ids.data()};
  p.extra = &view;
  p.num_extra = 1;
  AttentionBatch batch{bt.block_tables.data(), bt.max_blocks, bt.seq_lens.data(),
                       bt.query_start.data(), 1, bt.T};
  AttentionScratch scratch;
  std::vector<float> out(bt.T * bt.H * bt.D);
  EXPECT_FALSE(pagedAttention(bt.q.data(), bt.pool.data(), bt.layout, batch, p, out.data(), pool,
                              cpuKernels(SimdLevel::kScalar), scratch).ok());
  // Missing operands are caught before anything runs.
  p.num_extra = 0;
  EXPECT_FALSE(pagedAttention(bt.q.data(), bt.pool.data(), bt.layout, batch, p, out.data(), pool,
                              cpuKernels(SimdLevel::kScalar), scratch).ok());
}

}  // namespace
}  // namespace ingot
