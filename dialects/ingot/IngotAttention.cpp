// ingot.attention: operand/region verifiers, ingot.region_load, and region canonicalization.
#include "dialects/ingot/IngotDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ingot;

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

static bool dimsAgree(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

LogicalResult AttentionOp::verify() {
  int64_t heads = getNumHeadsAttr().getInt();
  int64_t kvHeads = getNumKvHeadsAttr().getInt();
  int64_t headDim = getHeadDimAttr().getInt();
  if (heads <= 0 || kvHeads <= 0 || headDim <= 0)
    return emitOpError() << "num_heads, num_kv_heads and head_dim must be > 0";
  if (heads % kvHeads != 0)
    return emitOpError() << "num_heads (" << heads
                         << ") must be a multiple of num_kv_heads (" << kvHeads
                         << ")";
  RankedTensorType query = getQuery().getType();
  if (query.getRank() != 2)
    return emitOpError() << "expects query to be a [tokens, num_heads * "
                            "head_dim] tensor, got "
                         << query;
  if (!dimsAgree(query.getDimSize(1), heads * headDim))
    return emitOpError() << "query has " << query.getDimSize(1)
                         << " features, expected num_heads * head_dim = "
                         << heads * headDim;
  KvCacheType cache = getCache().getType();
  if (int64_t(cache.getNumKvHeads()) != kvHeads ||
      int64_t(cache.getHeadDim()) != headDim)
    return emitOpError() << "num_kv_heads = " << kvHeads << ", head_dim = "
                         << headDim << " do not match the cache's "
                         << cache.getNumKvHeads() << " KV heads of "
                         << cache.getHeadDim();
  int64_t layer = getLayerAttr().getInt();
  if (layer < 0 || layer >= int64_t(cache.getNumLayers()))
    return emitOpError() << "layer " << layer << " is out of range for a "
                         << cache.getNumLayers() << "-layer cache";
  if (!getScale().isFinite())
    return emitOpError() << "scale must be finite";
  int64_t requests = getSeqLens().getType().getDimSize(0);
  int64_t tableRows = getBlockTables().getType().getDimSize(0);
  int64_t offsets = getQueryStart().getType().getDimSize(0);
  if (!dimsAgree(requests, tableRows))
    return emitOpError() << "block_tables has " << tableRows
                         << " rows but there are " << requests << " requests";
  if (!ShapedType::isDynamic(requests) && !dimsAgree(offsets, requests + 1))
    return emitOpError() << "query_start must hold num_requests + 1 = "
                         << requests + 1 << " offsets, got " << offsets;
  return success();
}

/// Verifies the entry block signature of a region: `expected` argument types.
static LogicalResult verifyRegionSignature(AttentionOp op, Region &region,
                                           StringRef name,
                                           ArrayRef<Type> expected,
                                           StringRef spelled) {
  Block &block = region.front();
  if (!llvm::equal(block.getArgumentTypes(), expected))
    return op.emitOpError() << name << " region must take " << spelled
                            << ", got " << block.getNumArguments()
                            << " argument(s)";
  return success();
}

/// Verifies the body of a region: allowed ops, value types, one yielded value.
static LogicalResult verifyRegionBody(AttentionOp op, Region &region,
                                      StringRef name, Type yieldType) {
  for (Operation &inner : region.front()) {
    if (auto yield = dyn_cast<YieldOp>(inner)) {
      if (yield.getValues().size() != 1 ||
          yield.getValues().front().getType() != yieldType)
        return yield.emitOpError() << "in the " << name
                                   << " region must yield exactly one "
                                   << yieldType;
      continue;
    }
    StringRef dialect = inner.getDialect() ? inner.getDialect()->getNamespace()
                                           : StringRef();
    if (!isa<RegionLoadOp>(inner) && dialect != "arith" && dialect != "math")
      return inner.emitOpError()
             << "is not allowed in an attention " << name
             << " region (only arith and math ops, ingot.region_load and "
                "ingot.yield)";
    for (Type type : llvm::concat<const Type>(inner.getOperandTypes(),
                                              inner.getResultTypes())) {
      if (!isRegionValueType(type))
        return inner.emitOpError()
               << "uses a value of type " << type << " in an attention " << name
               << " region (allowed: i1, i8, i16, i32, i64, index, f32)";
    }
  }
  return success();
}

LogicalResult AttentionOp::verifyRegions() {
  Builder b(getContext());
  Type index = b.getIndexType();
  if (hasMask()) {
    Type args[] = {index, index, index, index};
    if (failed(verifyRegionSignature(*this, getMask(), "mask", args,
                                     "(index b, index h, index q, index kv)")) ||
        failed(verifyRegionBody(*this, getMask(), "mask", b.getI1Type())))
      return failure();
  }
  if (hasScore()) {
    Type args[] = {b.getF32Type(), index, index, index, index};
    if (failed(verifyRegionSignature(
            *this, getScore(), "score", args,
            "(f32 score, index b, index h, index q, index kv)")) ||
        failed(verifyRegionBody(*this, getScore(), "score", b.getF32Type())))
      return failure();
  }
  return success();
}

LogicalResult RegionLoadOp::verify() {
  auto attention = cast<AttentionOp>((*this)->getParentOp());
  int64_t index = getOperandIndexAttr().getInt();
  int64_t numExtra = attention.getExtra().size();
  if (index < 0 || index >= numExtra)
    return emitOpError() << "reads extra operand #" << index
                         << " but the attention op has " << numExtra
                         << " extra operand(s)";
  auto operand = cast<RankedTensorType>(attention.getExtra()[index].getType());
  if (int64_t(getIndices().size()) != operand.getRank())
    return emitOpError() << "needs " << operand.getRank()
                         << " indices for extra operand #" << index << " ("
                         << operand << "), got " << getIndices().size();
  if (getResult().getType() != operand.getElementType())
    return emitOpError() << "result type " << getResult().getType()
                         << " does not match the element type "
                         << operand.getElementType() << " of extra operand #"
                         << index;
  return success();
}

void AttentionOp::getAsmBlockArgumentNames(Region &region,
                                           OpAsmSetValueNameFn setNameFn) {
  if (region.empty())
    return;
  static const char *const maskNames[] = {"b", "h", "q", "kv"};
  static const char *const scoreNames[] = {"score", "b", "h", "q", "kv"};
  ArrayRef<const char *> names =
      &region == &getMask() ? ArrayRef(maskNames) : ArrayRef(scoreNames);
  for (auto [arg, name] : llvm::zip(region.front().getArguments(), names))
    setNameFn(arg, name);
}

//===----------------------------------------------------------------------===//
// Canonicalization
//===----------------------------------------------------------------------===//

namespace {

/// The single value a non-empty region yields.
Value yieldedValue(Region &region) {
  auto yield = cast<YieldOp>(region.front().getTerminator());
  return yield.getValues().size() == 1 ? yield.getValues().front() : Value();
}

/// The finite float constant `value` holds, if any.
std::optional<double> finiteConstant(Value value) {
  APFloat constant(0.0f);
  if (!value || !matchPattern(value, m_ConstantFloat(&constant)) ||
      !constant.isFinite())
    return std::nullopt;
  return constant.convertToDouble();
}

/// A mask that yields `true` everywhere (after folding) hides nothing: drop it.
struct DropAlwaysTrueMask : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasMask() || !matchPattern(yieldedValue(op.getMask()), m_One()))
      return failure();
    rewriter.eraseBlock(&op.getMask().front());
    return success();
  }
};

/// A score region that returns its score argument unchanged is the identity.
struct DropIdentityScore : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasScore() ||
        yieldedValue(op.getScore()) != op.getScore().front().getArgument(0))
      return failure();
    rewriter.eraseBlock(&op.getScore().front());
    return success();
  }
};

/// A score region yielding one finite constant gives every visible key the same
/// weight, exactly as `scale = 0` without a score region does.
struct FoldConstantScore : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasScore() || !finiteConstant(yieldedValue(op.getScore())))
      return failure();
    rewriter.modifyOpInPlace(
        op, [&] { op.setScaleAttr(rewriter.getF32FloatAttr(0.0f)); });
    rewriter.eraseBlock(&op.getScore().front());
    return success();
  }
};

/// softmax(s + c) == softmax(s) for a constant c: a score region ending in
/// `arith.addf x, c` (or `subf x, c`) may yield `x` instead.
struct StripConstantScoreShift : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasScore())
      return failure();
    Value result = yieldedValue(op.getScore());
    Operation *def = result ? result.getDefiningOp() : nullptr;
    Value kept;
    if (auto add = dyn_cast_or_null<arith::AddFOp>(def)) {
      if (finiteConstant(add.getRhs()))
        kept = add.getLhs();
      else if (finiteConstant(add.getLhs()))
        kept = add.getRhs();
    } else if (auto sub = dyn_cast_or_null<arith::SubFOp>(def)) {
      if (finiteConstant(sub.getRhs()))
        kept = sub.getLhs();
    }
    if (!kept)
      return failure();
    Operation *yield = op.getScore().front().getTerminator();
    rewriter.modifyOpInPlace(yield, [&] { yield->setOperand(0, kept); });
    return success();
  }
};

/// A score region yielding `s * c` (or `s / c`) for the score argument `s` and
/// a finite constant c folds c into the op's softmax scale.
struct FoldScoreScaleIntoScale : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasScore())
      return failure();
    Value score = op.getScore().front().getArgument(0);
    Value result = yieldedValue(op.getScore());
    Operation *def = result ? result.getDefiningOp() : nullptr;
    std::optional<double> factor;
    if (auto mul = dyn_cast_or_null<arith::MulFOp>(def)) {
      if (mul.getLhs() == score)
        factor = finiteConstant(mul.getRhs());
      else if (mul.getRhs() == score)
        factor = finiteConstant(mul.getLhs());
    } else if (auto div = dyn_cast_or_null<arith::DivFOp>(def)) {
      std::optional<double> divisor =
          div.getLhs() == score ? finiteConstant(div.getRhs()) : std::nullopt;
      if (divisor && *divisor != 0.0)
        factor = 1.0 / *divisor;
    }
    if (!factor)
      return failure();
    double scale = op.getScale().convertToDouble() * *factor;
    if (!std::isfinite(scale))
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      op.setScaleAttr(rewriter.getF32FloatAttr(static_cast<float>(scale)));
    });
    Operation *yield = op.getScore().front().getTerminator();
    rewriter.modifyOpInPlace(yield, [&] { yield->setOperand(0, score); });
    return success();
  }
};

} // namespace

void AttentionOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<DropAlwaysTrueMask, DropIdentityScore, FoldConstantScore,
              StripConstantScoreShift, FoldScoreScaleIntoScale>(context);
}
