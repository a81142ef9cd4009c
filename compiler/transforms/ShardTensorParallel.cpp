//===- ShardTensorParallel.cpp - ingot-shard-tensor-parallel -------------===//
//
// Splits the serving step over `tp` ranks, Megatron-style, by the rules of
// docs/tensor-parallel.md: column-parallel q/k/v and gate/up projections, row-parallel o
// and down projections followed by `ingot.all_reduce`, attention heads dealt out at kv-head
// granularity (kv heads replicated when there are fewer than ranks), a vocab-parallel
// embedding (all_reduce) and output head (all_gather). The result is one function per rank,
// `@step_tp<r>`, whose sharded weights are `ingot.weight` ops with an `#ingot.shard`.
// It runs after ingot-quantize-weights: a quantized linear's packed weight and its scale
// tensors are sliced like its weight (rows, or K on whole quantization blocks), keeping
// their `#ingot.encoding`, so every rank's tensors are slices of the whole tensor's codes.
//
//===----------------------------------------------------------------------===//
#include "compiler/transforms/Passes.h"

#include <map>
#include <tuple>

#include "compiler/transforms/Fusion.h"
#include "compiler/transforms/TensorParallelLayout.h"
#include "dialects/ingot/IngotDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/STLExtras.h"

namespace ingot::compiler {
#define GEN_PASS_DEF_SHARDTENSORPARALLEL
#include "compiler/transforms/Passes.h.inc"
} // namespace ingot::compiler

namespace ingot::compiler {
namespace {

using namespace mlir;
namespace ig = mlir::ingot;

/// One attention block of the step: its projections, optional ropes and the KV write.
struct AttentionBlock {
  ig::AttentionOp attention;
  ig::LinearOp q, k, v, o;
  ig::RopeOp qRope, kRope; // null where the model applies no rope
  ig::KvWriteOp write;
};

/// One gated MLP: act(gate(x)) * up(x), then down.
struct MlpBlock {
  ig::LinearOp gate, up, down;
  Operation *activation;
};

/// What the pass found in the (unsharded) step function.
struct StepStructure {
  SmallVector<AttentionBlock> attention;
  SmallVector<MlpBlock> mlps;
  SmallVector<ig::EmbeddingOp> embeddings;
  SmallVector<ig::LogitsOp> heads;
  int64_t numHeads = 0, numKvHeads = 0, headDim = 0;
};

/// `value`'s only user, or null when it has none or several.
Operation *soleUser(Value value) {
  return value.hasOneUse() ? *value.getUsers().begin() : nullptr;
}

/// The tensor type `type` with its dimension `dim` set to `size`.
RankedTensorType withDim(Type type, int64_t dim, int64_t size) {
  auto ranked = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(ranked.getShape());
  shape[dim] = size;
  return RankedTensorType::get(shape, ranked.getElementType());
}

/// Sets the feature (last) dimension of a [tokens, features] value.
void setWidth(Value value, int64_t width) {
  value.setType(withDim(value.getType(), 1, width));
}

/// Rewrites one rank's clone of the step: local weights, widths, heads and cache type,
/// and the collectives after the row-parallel and vocab-parallel ops.
class RankRewriter {
public:
  RankRewriter(MLIRContext *ctx, const StepStructure &s, IRMapping &mapping, int64_t rank,
               int64_t n)
      : s(s), mapping(mapping), rank(rank), n(n), b(ctx) {}

  /// Fails (with an error on the op) when a row-parallel cut falls inside a quantization
  /// block.
  LogicalResult run(func::FuncOp fn) {
    HeadAssignment heads = assignHeads(s.numHeads, s.numKvHeads, n, rank);
    for (const AttentionBlock &block : s.attention)
      if (failed(shardAttention(block, heads)))
        return failure();
    for (const MlpBlock &block : s.mlps)
      if (failed(shardMlp(block)))
        return failure();
    for (ig::EmbeddingOp embedding : s.embeddings)
      shardEmbedding(map(embedding));
    for (ig::LogitsOp head : s.heads)
      shardHead(map(head));
    updateCacheType(fn, heads.kv.count);
    // The unsharded weights the rank no longer uses.
    fn.walk([](ig::WeightOp w) {
      if (w.use_empty())
        w.erase();
    });
    return success();
  }

private:
  template <typename OpT> OpT map(OpT op) {
    return cast<OpT>(mapping.lookup(op->getResult(0)).getDefiningOp());
  }

  /// The rank's slice [offset, offset + size) along `dim` of weight `value`; one
  /// `ingot.weight` per distinct slice of a source.
  Value slice(Value value, int64_t dim, int64_t offset, int64_t size) {
    auto source = value.getDefiningOp<ig::WeightOp>();
    RankedTensorType type = source.getResult().getType();
    auto key = std::make_tuple(source.getOperation(), dim, offset, size);
    if (auto it = slices.find(key); it != slices.end())
      return it->second;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(source);
    auto shard = ig::ShardAttr::get(b.getContext(), dim, offset, size, type.getDimSize(dim));
    // source_quant is dropped: it describes whole [N, K] blocks of the source, and
    // quantization does not run on sharded modules. An encoding stays: the slice is of the
    // whole tensor's quantized part.
    Value sliced = ig::WeightOp::create(b, source.getLoc(), withDim(type, dim, size),
                                        source.getName(), source.getHandle(), nullptr,
                                        source.getEncodingAttr(), shard);
    slices.emplace(key, sliced);
    return sliced;
  }

  /// True for an NVFP4 linear's per-tensor global scale (its second scale operand): the
  /// whole tensor's, replicated on every rank.
  static bool isGlobalScale(ig::LinearOp linear, unsigned index) {
    return linear.getQuantAttr().getKind() == ig::QuantKind::NvFp4 && index == 1;
  }

  /// Column-parallel: the rank keeps output features [offset, offset + size), with their
  /// rows of every per-row scale tensor.
  void columnParallel(ig::LinearOp linear, int64_t offset, int64_t size) {
    linear.getWeightMutable().assign(slice(linear.getWeight(), 0, offset, size));
    if (Value bias = linear.getBias())
      linear.getBiasMutable().assign(slice(bias, 0, offset, size));
    MutableOperandRange scales = linear.getScalesMutable();
    for (unsigned i = 0; i < scales.size(); ++i)
      if (!isGlobalScale(linear, i))
        scales[i].set(slice(scales[i].get(), 0, offset, size));
    setWidth(linear.getResult(), size);
  }

  /// Row-parallel: the rank multiplies input features [offset, offset + size) and the
  /// group sums the partial results; the bias is added once, on rank 0. A block-scaled
  /// weight's cut must fall on its blocks; its [N, K / block] scales are cut with it, and
  /// per-channel and global scales stay whole.
  LogicalResult rowParallel(ig::LinearOp linear, int64_t offset, int64_t size) {
    if (ig::QuantSchemeAttr quant = linear.getQuantAttr(); quant && quant.isBlockScaled()) {
      const int64_t block = quant.getBlockSize();
      if (offset % block != 0 || size % block != 0)
        return linear.emitError()
               << "ingot-shard-tensor-parallel: rank " << rank << " of " << n
               << " takes input features [" << offset << ", " << offset + size << ") of '"
               << linear.getWeight().getDefiningOp<ig::WeightOp>().getName()
               << "', which cut its " << quant << " blocks of " << block
               << " (quantize with a block that divides the split, or choose another --tp)";
      MutableOperandRange scales = linear.getScalesMutable();
      for (unsigned i = 0; i < scales.size(); ++i)
        if (!isGlobalScale(linear, i))
          scales[i].set(slice(scales[i].get(), 1, offset / block, size / block));
    }
    linear.getWeightMutable().assign(slice(linear.getWeight(), 1, offset, size));
    if (linear.getBias() && rank != 0)
      linear.getBiasMutable().clear();
    sumAfter(linear);
    return success();
  }

  /// Inserts an all_reduce after `op` and makes every user read the sum.
  void sumAfter(Operation *op) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(op);
    Value partial = op->getResult(0);
    auto sum = ig::AllReduceOp::create(b, op->getLoc(), partial.getType(), partial);
    partial.replaceAllUsesExcept(sum.getResult(), sum);
  }

  LogicalResult shardAttention(const AttentionBlock &original, const HeadAssignment &heads) {
    const int64_t d = s.headDim;
    columnParallel(map(original.q), heads.q.start * d, heads.q.count * d);
    columnParallel(map(original.k), heads.kv.start * d, heads.kv.count * d);
    columnParallel(map(original.v), heads.kv.start * d, heads.kv.count * d);
    for (auto [rope, count] : {std::pair{original.qRope, heads.q.count},
                               std::pair{original.kRope, heads.kv.count}}) {
      if (!rope)
        continue;
      ig::RopeOp local = map(rope);
      local.setNumHeads(count);
      setWidth(local.getResult(), count * d);
    }
    ig::AttentionOp attn = map(original.attention);
    attn.setNumHeads(heads.q.count);
    attn.setNumKvHeads(heads.kv.count);
    setWidth(attn.getResult(), heads.q.count * d);
    return rowParallel(map(original.o), heads.q.start * d, heads.q.count * d);
  }

  /// The intermediate dimension in even blocks of whole quantization blocks of the down
  /// projection (of single features when it is not block-quantized).
  LogicalResult shardMlp(const MlpBlock &original) {
    int64_t width =
        cast<RankedTensorType>(original.activation->getResult(0).getType()).getDimSize(1);
    RankSlice cols = alignedBlock(width, downBlock(original.down), n, rank);
    columnParallel(map(original.gate), cols.start, cols.count);
    columnParallel(map(original.up), cols.start, cols.count);
    Operation *act = mapping.lookup(original.activation->getResult(0)).getDefiningOp();
    setWidth(act->getResult(0), cols.count);
    return rowParallel(map(original.down), cols.start, cols.count);
  }

public:
  /// The unit the intermediate split is made of: the down projection's quantization block,
  /// or 1.
  static int64_t downBlock(ig::LinearOp down) {
    ig::QuantSchemeAttr quant = down.getQuantAttr();
    return quant && quant.isBlockScaled() ? quant.getBlockSize() : 1;
  }

private:
  /// Vocab-parallel embedding: rows [r V/N, (r+1) V/N), other tokens give zeros, summed.
  void shardEmbedding(ig::EmbeddingOp embedding) {
    int64_t vocab = embedding.getTable().getType().getDimSize(0);
    if (vocab % n != 0)
      return;
    int64_t rows = vocab / n;
    embedding.getTableMutable().assign(slice(embedding.getTable(), 0, rank * rows, rows));
    embedding.setVocabStart(rank * rows);
    sumAfter(embedding);
  }

  /// Vocab-parallel head: the rank's logit columns, gathered in rank order.
  void shardHead(ig::LogitsOp head) {
    int64_t vocab = head.getWeight().getType().getDimSize(0);
    if (vocab % n != 0)
      return;
    int64_t rows = vocab / n;
    head.getWeightMutable().assign(slice(head.getWeight(), 0, rank * rows, rows));
    Value full = head.getResult();
    Type fullType = full.getType();
    setWidth(full, rows);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(head);
    auto gathered = ig::AllGatherOp::create(b, head.getLoc(), fullType, full);
    full.replaceAllUsesExcept(gathered.getResult(), gathered);
  }

  /// Gives every KV cache value (arguments, kv_write results) the rank's kv heads.
  void updateCacheType(func::FuncOp fn, int64_t kvHeads) {
    auto retype = [&](Value v) {
      if (auto cache = dyn_cast<ig::KvCacheType>(v.getType()))
        v.setType(ig::KvCacheType::get(cache.getContext(), cache.getNumLayers(), kvHeads,
                                       cache.getHeadDim(), cache.getBlockSize(),
                                       cache.getElementType()));
    };
    Block &entry = fn.getBody().front();
    for (BlockArgument arg : entry.getArguments())
      retype(arg);
    fn.walk([&](ig::KvWriteOp write) { retype(write.getResult()); });
    Operation *ret = entry.getTerminator();
    fn.setFunctionType(FunctionType::get(fn.getContext(), entry.getArgumentTypes(),
                                         ret->getOperandTypes()));
  }

  const StepStructure &s;
  IRMapping &mapping;
  int64_t rank, n;
  OpBuilder b;
  std::map<std::tuple<Operation *, int64_t, int64_t, int64_t>, Value> slices;
};

class ShardTensorParallelPass
    : public impl::ShardTensorParallelBase<ShardTensorParallelPass> {
public:
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tp < 1) {
      module.emitError() << "ingot-shard-tensor-parallel: tp must be >= 1, got " << int64_t(tp);
      return signalPassFailure();
    }
    if (tp == 1)
      return; // one rank: the module is already its own shard
    if (module->hasAttr(ig::kTensorParallelAttrName)) {
      module.emitError() << "ingot-shard-tensor-parallel: the module is already sharded ('"
                         << ig::kTensorParallelAttrName << "' is set)";
      return signalPassFailure();
    }
    // A module printed after `fuse`: back to the ops the split recognises (fusion runs
    // again after this pass).
    unfuseElementwise(module);
    func::FuncOp step = findStep(module);
    if (!step)
      return signalPassFailure();
    StepStructure structure;
    if (failed(analyze(step, structure)))
      return signalPassFailure();

    OpBuilder b(module.getContext());
    for (int64_t rank = 0; rank < tp; ++rank) {
      IRMapping mapping;
      b.setInsertionPoint(step);
      auto shard = cast<func::FuncOp>(b.clone(*step, mapping));
      shard.setSymName(("step_tp" + llvm::Twine(rank)).str());
      shard->setAttr(ig::kTensorParallelRankAttrName, b.getI64IntegerAttr(rank));
      if (failed(RankRewriter(module.getContext(), structure, mapping, rank, tp).run(shard)))
        return signalPassFailure();
    }
    step.erase();
    module->setAttr(ig::kTensorParallelAttrName, b.getI64IntegerAttr(tp));
  }

private:
  /// The function named `step`, or the module's only function.
  func::FuncOp findStep(ModuleOp module) {
    auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
    for (func::FuncOp f : funcs)
      if (f.getSymName() == "step")
        return f;
    if (funcs.size() == 1)
      return funcs.front();
    module.emitError() << "ingot-shard-tensor-parallel: expected a serving-step function "
                          "named 'step' (or exactly one function), found "
                       << funcs.size() << " functions";
    return nullptr;
  }

  /// Reports that `op` is not part of a shape the pass knows how to split.
  LogicalResult unrecognised(Operation *op, const Twine &why) {
    return op->emitError() << "ingot-shard-tensor-parallel: " << why
                           << "; the pass shards Llama-style steps only (attention with "
                              "q/k/v/o projections, gated MLPs, embedding, logits)";
  }

  /// The linear producing `value`, looking through a rope; checks each is used once.
  ig::LinearOp projectionOf(Value value, ig::RopeOp &rope, StringRef what, Operation *user) {
    rope = value.getDefiningOp<ig::RopeOp>();
    if (rope) {
      if (!rope.getResult().hasOneUse()) {
        (void)unrecognised(rope, "the rope of the " + what + " has more than one user");
        return {};
      }
      value = rope.getInput();
    }
    auto linear = value.getDefiningOp<ig::LinearOp>();
    if (!linear || !linear.getResult().hasOneUse()) {
      (void)unrecognised(user, "the " + what + " is not an ingot.linear used only here");
      return {};
    }
    return linear;
  }

  LogicalResult analyzeAttention(ig::AttentionOp attn, StepStructure &s) {
    AttentionBlock block;
    block.attention = attn;
    int64_t hq = attn.getNumHeads(), hkv = attn.getNumKvHeads(), d = attn.getHeadDim();
    if (s.numHeads == 0) {
      s.numHeads = hq;
      s.numKvHeads = hkv;
      s.headDim = d;
    } else if (s.numHeads != hq || s.numKvHeads != hkv || s.headDim != d) {
      return unrecognised(attn, "attention layers differ in num_heads, num_kv_heads or "
                                "head_dim");
    }
    // A region that reads the head index would see local head numbers after the split.
    for (auto [region, headArg] : {std::pair<Region *, unsigned>{&attn.getMask(), 1},
                                   std::pair<Region *, unsigned>{&attn.getScore(), 2}}) {
      if (!region->empty() && !region->front().getArgument(headArg).use_empty())
        return attn.emitError() << "ingot-shard-tensor-parallel: the attention's "
                                << (headArg == 1 ? "mask" : "score")
                                << " region reads the head index, which sharding would "
                                   "renumber per rank (not supported yet)";
    }
    block.q = projectionOf(attn.getQuery(), block.qRope, "query", attn);
    block.write = attn.getCache().getDefiningOp<ig::KvWriteOp>();
    if (!block.q)
      return failure();
    if (!block.write || block.write.getLayer() != attn.getLayer())
      return unrecognised(attn, "the attention's cache does not come from the kv_write of "
                                "its layer");
    ig::RopeOp noRope;
    block.k = projectionOf(block.write.getKey(), block.kRope, "key", block.write);
    block.v = projectionOf(block.write.getValue(), noRope, "value", block.write);
    if (!block.k || !block.v)
      return failure();
    if (noRope)
      return unrecognised(noRope, "a rope on the value is not a Llama-style attention");
    auto o = dyn_cast_or_null<ig::LinearOp>(soleUser(attn.getResult()));
    if (!o || o.getInput() != attn.getResult())
      return unrecognised(attn, "the attention output does not feed exactly one linear "
                                "(the o projection)");
    block.o = o;
    s.attention.push_back(block);
    return success();
  }

  LogicalResult analyzeMlp(Operation *act, StepStructure &s) {
    MlpBlock block;
    block.activation = act;
    block.gate = act->getOperand(0).getDefiningOp<ig::LinearOp>();
    block.up = act->getOperand(1).getDefiningOp<ig::LinearOp>();
    if (!block.gate || !block.up || !block.gate.getResult().hasOneUse() ||
        !block.up.getResult().hasOneUse())
      return unrecognised(act, "the gate and up inputs are not ingot.linear ops used only here");
    block.down = dyn_cast_or_null<ig::LinearOp>(soleUser(act->getResult(0)));
    if (!block.down || block.down.getInput() != act->getResult(0))
      return unrecognised(act, "the activation does not feed exactly one linear (the down "
                               "projection)");
    s.mlps.push_back(block);
    return success();
  }

  LogicalResult analyze(func::FuncOp step, StepStructure &s) {
    WalkResult walked = step.walk([&](Operation *op) {
      LogicalResult result = success();
      if (auto attn = dyn_cast<ig::AttentionOp>(op))
        result = analyzeAttention(attn, s);
      else if (isa<ig::SiluMulOp, ig::GeluMulOp>(op))
        result = analyzeMlp(op, s);
      else if (auto embedding = dyn_cast<ig::EmbeddingOp>(op))
        s.embeddings.push_back(embedding);
      else if (auto head = dyn_cast<ig::LogitsOp>(op))
        s.heads.push_back(head);
      else if (isa<ig::AllReduceOp, ig::AllGatherOp>(op))
        result = op->emitError("ingot-shard-tensor-parallel: the step already holds collectives");
      return failed(result) ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (walked.wasInterrupted())
      return failure();
    if (s.attention.empty())
      return step.emitError("ingot-shard-tensor-parallel: the step has no ingot.attention to "
                            "split heads over");
    if (tp > s.numHeads)
      return step.emitError() << "ingot-shard-tensor-parallel: tp = " << int64_t(tp)
                              << " is more than the model's " << s.numHeads
                              << " attention heads";

    // Every linear must have one role, with an ingot.weight (and bias, and scales).
    llvm::DenseSet<Operation *> known;
    for (const AttentionBlock &a : s.attention)
      for (ig::LinearOp l : {a.q, a.k, a.v, a.o})
        known.insert(l);
    for (const MlpBlock &m : s.mlps) {
      for (ig::LinearOp l : {m.gate, m.up, m.down})
        known.insert(l);
      int64_t width = cast<RankedTensorType>(m.activation->getResult(0).getType()).getDimSize(1);
      if (width < tp)
        return m.activation->emitError() << "ingot-shard-tensor-parallel: the MLP's "
                                         << width << " intermediate features cannot be split "
                                         << "over " << int64_t(tp) << " ranks";
      // A quantized down projection is split on its blocks (whose K it is a multiple of).
      ig::LinearOp down = m.down;
      int64_t block = RankRewriter::downBlock(down);
      if (width % block != 0 || width / block < tp)
        return down.emitError() << "ingot-shard-tensor-parallel: the MLP's " << width
                                  << " intermediate features are " << width / block
                                  << " quantization blocks of " << block << " ("
                                  << down.getQuantAttr() << "), too few to give each of "
                                  << int64_t(tp) << " ranks whole blocks";
    }
    WalkResult linears = step.walk([&](ig::LinearOp linear) {
      LogicalResult result = success();
      if (!known.contains(linear))
        result = unrecognised(linear, "this ingot.linear is neither a q/k/v/o projection of "
                                      "an attention nor a gate/up/down projection of a gated "
                                      "MLP");
      else if (!linear.getWeight().getDefiningOp<ig::WeightOp>() ||
               (linear.getBias() && !linear.getBias().getDefiningOp<ig::WeightOp>()) ||
               llvm::any_of(linear.getScales(),
                            [](Value v) { return !v.getDefiningOp<ig::WeightOp>(); }))
        result = unrecognised(linear, "its weight, bias or scales are not ingot.weight ops");
      return failed(result) ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (linears.wasInterrupted())
      return failure();
    for (Operation *op : llvm::concat<Operation *const>(
             llvm::map_range(s.embeddings, [](ig::EmbeddingOp e) { return e.getOperation(); }),
             llvm::map_range(s.heads, [](ig::LogitsOp l) { return l.getOperation(); }))) {
      Value table = op->getOperand(1); // the embedding's table, the head's weight
      auto weight = table.getDefiningOp<ig::WeightOp>();
      if (!weight || weight.getEncodingAttr())
        return unrecognised(op, "its table is not an unquantized ingot.weight");
      int64_t vocab = weight.getResult().getType().getDimSize(0);
      if (vocab % tp != 0)
        op->emitWarning() << "ingot-shard-tensor-parallel: the vocabulary (" << vocab
                          << ") is not a multiple of tp = " << int64_t(tp) << "; "
                          << op->getName() << " stays replicated";
    }
    return success();
  }

};

} // namespace
} // namespace ingot::compiler
