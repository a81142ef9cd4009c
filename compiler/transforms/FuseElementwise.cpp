//===- FuseElementwise.cpp - fuse a layer's elementwise op groups ---------===//
//
// ingot-fuse-elementwise (Passes.td): add + rms_norm -> add_rms_norm; rope (q) + rope (k) +
// kv_write -> rope_kv_write; linear (gate) + linear (up) + silu_mul / gelu_mul ->
// gated_linear.
//
//===----------------------------------------------------------------------===//
#include "compiler/transforms/Passes.h"

#include "compiler/transforms/Fusion.h"

#include <optional>

#include "dialects/ingot/IngotDialect.h"
#include "mlir/IR/Builders.h"

namespace ingot::compiler {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "compiler/transforms/Passes.h.inc"
} // namespace ingot::compiler

namespace ingot::compiler {
namespace {

using mlir::ingot::AddOp;
using mlir::ingot::AddRmsNormOp;
using mlir::ingot::AttentionOp;
using mlir::ingot::GatedLinearOp;
using mlir::ingot::GeluMulOp;
using mlir::ingot::LinearOp;
using mlir::ingot::SiluMulOp;
using mlir::ingot::KvWriteOp;
using mlir::ingot::RmsNormOp;
using mlir::ingot::RopeKvWriteOp;
using mlir::ingot::RopeOp;

/// The add whose sum `norm` normalizes, when the fused op can take the norm's place: the
/// add is in the norm's block and every other use of its sum comes after the norm.
AddOp fusableAdd(RmsNormOp norm) {
  auto add = norm.getInput().getDefiningOp<AddOp>();
  // add_rms_norm normalizes whole rows; a per-head norm stays unfused.
  if (!add || add->getBlock() != norm->getBlock() || norm.getGroupCount() != 1)
    return nullptr;
  for (mlir::Operation *user : add->getUsers()) {
    if (user == norm.getOperation())
      continue;
    mlir::Operation *inBlock = norm->getBlock()->findAncestorOpInBlock(*user);
    if (!inBlock || !norm->isBeforeInBlock(inBlock))
      return nullptr;
  }
  return add;
}

/// Whether every use of `op`'s results other than `except` comes after `anchor` in its block.
bool usedOnlyAfter(mlir::Operation *op, mlir::Operation *anchor, mlir::Operation *except) {
  for (mlir::Operation *user : op->getUsers()) {
    if (user == except)
      continue;
    mlir::Operation *inBlock = anchor->getBlock()->findAncestorOpInBlock(*user);
    if (!inBlock || !anchor->isBeforeInBlock(inBlock))
      return false;
  }
  return true;
}

/// Whether `v` is available at `anchor`: a block argument or the result of an earlier op of
/// its block.
bool definedBefore(mlir::Value v, mlir::Operation *anchor) {
  mlir::Operation *def = v.getDefiningOp();
  if (!def)
    return v.getParentBlock() == anchor->getBlock();
  return def->getBlock() == anchor->getBlock() && def->isBeforeInBlock(anchor);
}

/// The layer's three ops around `write`: the rope of its keys (read by nothing else) and
/// the rope of the queries that an attention over the written cache reads, both with the
/// same positions, theta, scaling and frequency factors; the fused op takes the write's
/// place.
struct RopeKvTriple {
  RopeOp query, key;
  KvWriteOp write;
};
std::optional<RopeKvTriple> fusableRopeKv(KvWriteOp write) {
  auto key = write.getKey().getDefiningOp<RopeOp>();
  if (!key || !key->hasOneUse() || key->getBlock() != write->getBlock() ||
      write.getValue() == key.getResult())
    return std::nullopt;
  for (mlir::Operation *user : write.getResult().getUsers()) {
    auto attention = llvm::dyn_cast<AttentionOp>(user);
    if (!attention || attention.getCache() != write.getResult())
      continue;
    auto query = attention.getQuery().getDefiningOp<RopeOp>();
    if (!query || query == key || query->getBlock() != write->getBlock() ||
        query.getPositions() != key.getPositions() || query.getHeadDim() != key.getHeadDim() ||
        query.getThetaAttr() != key.getThetaAttr() ||
        query.getScalingAttr() != key.getScalingAttr() ||
        query.getFreqFactors() != key.getFreqFactors())
      continue;
    if (!usedOnlyAfter(query, write, nullptr) || !definedBefore(query.getInput(), write) ||
        !definedBefore(key.getInput(), write) ||
        (key.getFreqFactors() && !definedBefore(key.getFreqFactors(), write)))
      continue;
    return RopeKvTriple{query, key, write};
  }
  return std::nullopt;
}

void fuseRopeKv(RopeKvTriple t) {
  mlir::OpBuilder b(t.write);
  auto fused = RopeKvWriteOp::create(
      b, t.write.getLoc(), t.query.getResult().getType(), t.key.getResult().getType(),
      t.write.getResult().getType(), t.query.getInput(), t.key.getInput(), t.write.getValue(),
      t.key.getPositions(), t.write.getCache(), t.write.getSlotMapping(), t.key.getFreqFactors(),
      t.query.getNumHeadsAttr(), t.key.getNumHeadsAttr(), t.key.getHeadDimAttr(),
      t.key.getThetaAttr(), t.key.getScalingAttr(), t.write.getLayerAttr());
  t.write.getResult().replaceAllUsesWith(fused.getResult());
  t.write.erase();
  t.key.getResult().replaceAllUsesWith(fused.getRotatedKey());
  t.key.erase();
  t.query.getResult().replaceAllUsesWith(fused.getRotatedQuery());
  t.query.erase();
}

bool hasFp8Weight(LinearOp op) {
  return llvm::isa<mlir::Float8E4M3FNType>(
      llvm::cast<mlir::RankedTensorType>(op.getWeight().getType()).getElementType());
}

/// A gated MLP's gate and up linears and the silu_mul / gelu_mul of their results: the
/// fused op takes the activation's place.
struct GatedTriple {
  LinearOp gate, up;
  mlir::Operation *act;
};
/// The linears `act` reads, when they fuse: both read one input, have no bias, the same
/// weight type, scheme and scale types, and nothing else reads them. Not where they or a
/// linear reading `act` hold fp8 weights: on CUDA those run W8A8, whose quantizing producers
/// are the norm before and the silu_mul itself (ingot-select-kernels marks them).
std::optional<GatedTriple> fusableGated(mlir::Operation *act) {
  auto gate = act->getOperand(0).getDefiningOp<LinearOp>();
  auto up = act->getOperand(1).getDefiningOp<LinearOp>();
  if (!gate || !up || gate == up)
    return std::nullopt;
  for (LinearOp l : {gate, up})
    if (!l->hasOneUse() || l->getBlock() != act->getBlock() || l.getBias() || hasFp8Weight(l))
      return std::nullopt;
  if (gate.getInput() != up.getInput() ||
      gate.getWeight().getType() != up.getWeight().getType() ||
      gate.getQuantAttr() != up.getQuantAttr() ||
      !llvm::equal(gate.getScales().getTypes(), up.getScales().getTypes()))
    return std::nullopt;
  for (mlir::Operation *user : act->getUsers())
    if (auto down = llvm::dyn_cast<LinearOp>(user); down && hasFp8Weight(down))
      return std::nullopt;
  return GatedTriple{gate, up, act};
}

void fuseGated(GatedTriple t) {
  mlir::OpBuilder b(t.act);
  auto fused = GatedLinearOp::create(
      b, t.act->getLoc(), t.act->getResult(0).getType(), t.gate.getInput(), t.gate.getWeight(),
      t.up.getWeight(), t.gate.getScales(), t.up.getScales(),
      b.getStringAttr(llvm::isa<SiluMulOp>(t.act) ? "silu" : "gelu"), t.gate.getQuantAttr());
  t.act->getResult(0).replaceAllUsesWith(fused.getResult());
  t.act->erase();
  t.up.erase();
  t.gate.erase();
}

class FuseElementwisePass : public impl::FuseElementwiseBase<FuseElementwisePass> {
public:
  using Base::Base;

  void runOnOperation() override {
    llvm::SmallVector<std::pair<AddOp, RmsNormOp>> pairs;
    getOperation().walk([&](RmsNormOp norm) {
      if (AddOp add = fusableAdd(norm))
        pairs.push_back({add, norm});
    });
    for (auto [add, norm] : pairs) {
      mlir::OpBuilder b(norm);
      mlir::Type type = norm.getResult().getType();
      auto fused = AddRmsNormOp::create(b, norm.getLoc(), type, type, add.getRhs(),
                                        add.getLhs(), norm.getWeight(), norm.getEpsilonAttr());
      norm.getResult().replaceAllUsesWith(fused.getResult());
      norm.erase();
      add.getResult().replaceAllUsesWith(fused.getSum());
      add.erase();
    }
    llvm::SmallVector<RopeKvTriple> triples;
    getOperation().walk([&](KvWriteOp write) {
      if (std::optional<RopeKvTriple> t = fusableRopeKv(write))
        triples.push_back(*t);
    });
    for (RopeKvTriple t : triples)
      fuseRopeKv(t);
    llvm::SmallVector<GatedTriple> gated;
    getOperation().walk([&](mlir::Operation *op) {
      if (llvm::isa<SiluMulOp, GeluMulOp>(op))
        if (std::optional<GatedTriple> t = fusableGated(op))
          gated.push_back(*t);
    });
    for (GatedTriple t : gated)
      fuseGated(t);
  }
};

} // namespace
void unfuseElementwise(mlir::Operation *root) {
  llvm::SmallVector<mlir::Operation *> fused;
  root->walk([&](mlir::Operation *op) {
    if (llvm::isa<AddRmsNormOp, RopeKvWriteOp, GatedLinearOp>(op))
      fused.push_back(op);
  });
  for (mlir::Operation *op : fused) {
    mlir::OpBuilder b(op);
    if (auto n = llvm::dyn_cast<AddRmsNormOp>(op)) {
      auto add = AddOp::create(b, n.getLoc(), n.getResidual(), n.getInput());
      auto norm = RmsNormOp::create(b, n.getLoc(), add.getResult(), n.getWeight(),
                                    n.getEpsilonAttr());
      n.getSum().replaceAllUsesWith(add.getResult());
      n.getResult().replaceAllUsesWith(norm.getResult());
    } else if (auto g = llvm::dyn_cast<GatedLinearOp>(op)) {
      mlir::Type type = g.getResult().getType();
      auto linear = [&](mlir::Value weight, mlir::ValueRange scales) {
        return LinearOp::create(b, g.getLoc(), type, g.getInput(), weight, mlir::Value(), scales,
                                g.getQuantAttr());
      };
      LinearOp gate = linear(g.getGateWeight(), g.getGateScales());
      LinearOp up = linear(g.getUpWeight(), g.getUpScales());
      mlir::Value act =
          g.getActivation() == "gelu"
              ? GeluMulOp::create(b, g.getLoc(), gate.getResult(), up.getResult()).getResult()
              : SiluMulOp::create(b, g.getLoc(), gate.getResult(), up.getResult()).getResult();
      g.getResult().replaceAllUsesWith(act);
    } else {
      auto f = llvm::cast<RopeKvWriteOp>(op);
      auto rope = [&](mlir::Value x, mlir::IntegerAttr heads) {
        return RopeOp::create(b, f.getLoc(), x.getType(), x, f.getPositions(),
                              f.getFreqFactors(), heads, f.getHeadDimAttr(), f.getThetaAttr(),
                              f.getScalingAttr());
      };
      RopeOp q = rope(f.getQuery(), f.getNumHeadsAttr());
      RopeOp k = rope(f.getKey(), f.getNumKvHeadsAttr());
      auto write = KvWriteOp::create(b, f.getLoc(), f.getCache(), k.getResult(), f.getValue(),
                                     f.getSlotMapping(), f.getLayerAttr());
      f.getRotatedQuery().replaceAllUsesWith(q.getResult());
      f.getRotatedKey().replaceAllUsesWith(k.getResult());
      f.getResult().replaceAllUsesWith(write.getResult());
    }
    op->erase();
  }
}

} // namespace ingot::compiler
