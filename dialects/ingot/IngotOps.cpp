// Verifiers of the ingot ops outside attention: shapes and element types of each block.
#include "dialects/ingot/IngotDialect.h"

#include <cmath>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::ingot;

#define GET_OP_CLASSES
#include "dialects/ingot/IngotOps.cpp.inc"

namespace {

/// True when two dimensions can be equal at run time (either is `?`, or both
/// static and equal). Token dimensions are usually dynamic.
bool dimsAgree(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// Checks that `type` is a [tokens, features] matrix.
LogicalResult verifyRows(Operation *op, Type type, StringRef what) {
  auto tensor = cast<RankedTensorType>(type);
  if (tensor.getRank() != 2)
    return op->emitOpError() << "expects " << what
                             << " to be a [tokens, features] tensor, got "
                             << type;
  return success();
}

/// Checks a weight operand: static shape of the given rank.
LogicalResult verifyWeight(Operation *op, Type type, int64_t rank,
                           StringRef what) {
  auto tensor = cast<RankedTensorType>(type);
  if (tensor.getRank() != rank)
    return op->emitOpError() << "expects " << what << " of rank " << rank
                             << ", got " << type;
  if (!tensor.hasStaticShape())
    return op->emitOpError() << "expects " << what
                             << " to have a static shape, got " << type;
  return success();
}

/// Checks that the token (first) dimensions of two tensors agree.
LogicalResult verifyTokens(Operation *op, Type a, StringRef aName, Type b,
                           StringRef bName) {
  int64_t ta = cast<RankedTensorType>(a).getDimSize(0);
  int64_t tb = cast<RankedTensorType>(b).getDimSize(0);
  if (!dimsAgree(ta, tb))
    return op->emitOpError() << "token count of " << aName << " (" << ta
                             << ") does not match " << bName << " (" << tb
                             << ")";
  return success();
}

bool isFloatWeightType(Type type) {
  return type.isF32() || type.isF16() || type.isBF16();
}

/// Verifies an `epsilon` attribute of a normalization.
LogicalResult verifyEpsilon(Operation *op, const APFloat &epsilon) {
  if (!(epsilon.convertToFloat() > 0.0f) || !epsilon.isFinite())
    return op->emitOpError() << "epsilon must be a positive finite number";
  return success();
}

/// A rope's optional frequency factors: f32 [head_dim / 2], and not combined with a scaling
/// attribute (both rescale the same frequencies).
LogicalResult verifyFreqFactors(Operation *op, Value factors, int64_t headDim, bool scaled) {
  if (!factors)
    return success();
  auto type = cast<RankedTensorType>(factors.getType());
  if (type.getRank() != 1 || !type.getElementType().isF32() ||
      !dimsAgree(type.getDimSize(0), headDim / 2))
    return op->emitOpError() << "freq_factors must be tensor<" << headDim / 2
                             << "xf32> (one per rotated pair), got " << type;
  if (scaled)
    return op->emitOpError() << "freq_factors and a scaling attribute both rescale the "
                                "frequencies; give one";
  return success();
}

/// Verifies the per-feature parameter vector of a norm against the input.
LogicalResult verifyNormParam(Operation *op, Type input, Type param,
                              StringRef what) {
  if (failed(verifyWeight(op, param, 1, what)))
    return failure();
  int64_t features = cast<RankedTensorType>(input).getDimSize(1);
  int64_t size = cast<RankedTensorType>(param).getDimSize(0);
  if (!dimsAgree(features, size))
    return op->emitOpError() << what << " has " << size
                             << " elements but the input has " << features
                             << " features";
  return success();
}

/// What the type of a quantized weight part must be under its scheme, or "" when
/// `type` is fine. Shapes against the weight are left to `ingot.linear`'s verifier.
StringRef encodedPartMismatch(WeightEncodingAttr encoding, RankedTensorType type) {
  QuantKind kind = encoding.getScheme().getKind();
  Type element = type.getElementType();
  int64_t rank = type.getRank();
  bool scalarF32 = element.isF32() && (rank == 0 || (rank == 1 && type.getDimSize(0) == 1));
  bool floatScale = element.isF32() || element.isF16() || element.isBF16();
  switch (encoding.getPart()) {
  case QuantPart::Weight:
    switch (kind) {
    case QuantKind::PerTensor:
    case QuantKind::PerChannel:
      return rank == 2 && isa<Float8E4M3FNType>(element) ? "" : "an [N, K] f8E4M3FN tensor";
    case QuantKind::NvFp4:
    case QuantKind::MxFp4:
      return rank == 2 && isa<Float4E2M1FNType>(element) ? "" : "an [N, K] f4E2M1FN tensor";
    case QuantKind::Int4:
      return rank == 2 && element.isInteger(4) ? "" : "an [N, K] i4 or ui4 tensor";
    }
    break;
  case QuantPart::Scale:
    switch (kind) {
    case QuantKind::PerTensor:
      return scalarF32 ? "" : "tensor<f32> or tensor<1xf32>";
    case QuantKind::PerChannel:
      return rank == 1 && element.isF32() ? "" : "an [N] f32 tensor";
    case QuantKind::NvFp4:
      return rank == 2 && isa<Float8E4M3FNType>(element) ? "" : "an [N, K/16] f8E4M3FN tensor";
    case QuantKind::MxFp4:
      return rank == 2 && isa<Float8E8M0FNUType>(element) ? ""
                                                          : "an [N, K/32] f8E8M0FNU tensor";
    case QuantKind::Int4:
      return rank == 2 && floatScale ? "" : "an [N, K/group] f16, bf16 or f32 tensor";
    }
    break;
  case QuantPart::Offset:
    return rank == 2 && (floatScale || element.isInteger(4))
               ? ""
               : "an [N, K/group] f16, bf16, f32, i4 or ui4 tensor";
  case QuantPart::GlobalScale:
    return scalarF32 ? "" : "tensor<f32> or tensor<1xf32>";
  }
  return "";
}

} // namespace

//===----------------------------------------------------------------------===//
// WeightOp / EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a non-empty checkpoint tensor name";
  if (getHandleAttr().getInt() < 0)
    return emitOpError() << "handle must be >= 0, got "
                         << getHandleAttr().getInt();
  if (!getResult().getType().hasStaticShape())
    return emitOpError() << "weight shape must be static, got "
                         << getResult().getType();
  if (WeightEncodingAttr encoding = getEncodingAttr()) {
    StringRef expected = encodedPartMismatch(encoding, getResult().getType());
    if (!expected.empty())
      return emitOpError() << "the " << stringifyQuantPart(encoding.getPart()) << " of "
                           << encoding.getScheme() << " must be " << expected << ", got "
                           << getResult().getType();
    if (getSourceQuantAttr())
      return emitOpError() << "takes 'source_quant' or 'encoding', not both";
  }
  if (getSourceQuantAttr() && getResult().getType().getRank() != 2)
    return emitOpError() << "'source_quant' describes [N, K] matrices, got "
                         << getResult().getType();
  if (ShardAttr shard = getShardAttr()) {
    RankedTensorType type = getResult().getType();
    if (shard.getDim() >= type.getRank())
      return emitOpError() << "shard dim " << shard.getDim() << " is out of range for "
                           << type;
    // Sub-byte elements are packed two per byte along the last dimension: a cut there
    // must fall between bytes.
    Type element = type.getElementType();
    unsigned bits = element.isIntOrFloat() ? element.getIntOrFloatBitWidth() : 8;
    if (bits < 8 && shard.getDim() == type.getRank() - 1 &&
        ((shard.getOffset() * bits) % 8 != 0 || (shard.getSize() * bits) % 8 != 0))
      return emitOpError() << "shard [" << shard.getOffset() << ", "
                           << shard.getOffset() + shard.getSize() << ") of packed "
                           << type.getElementType() << " elements does not fall on bytes";
    if (shard.getSize() != type.getDimSize(shard.getDim()))
      return emitOpError() << "shard size " << shard.getSize()
                           << " differs from the weight's dimension " << shard.getDim()
                           << " (" << type.getDimSize(shard.getDim()) << ")";
  }
  return success();
}

LogicalResult EmbeddingOp::verify() {
  if (failed(verifyWeight(*this, getTable().getType(), 2, "table")) ||
      failed(verifyRows(*this, getResult().getType(), "result")))
    return failure();
  Type tableElement = getTable().getType().getElementType();
  if (!isFloatWeightType(tableElement))
    return emitOpError() << "table element type must be f32, f16 or bf16, got "
                         << tableElement;
  if (failed(verifyTokens(*this, getTokens().getType(), "tokens",
                          getResult().getType(), "result")))
    return failure();
  int64_t hidden = getTable().getType().getDimSize(1);
  int64_t resultHidden = getResult().getType().getDimSize(1);
  if (!dimsAgree(hidden, resultHidden))
    return emitOpError() << "result has " << resultHidden
                         << " features but the table rows have " << hidden;
  if (std::optional<int64_t> start = getVocabStart(); start && *start < 0)
    return emitOpError() << "vocab_start must be >= 0, got " << *start;
  return success();
}

//===----------------------------------------------------------------------===//
// RmsNormOp / LayerNormOp
//===----------------------------------------------------------------------===//

LogicalResult RmsNormOp::verify() {
  if (failed(verifyRows(*this, getInput().getType(), "input")) ||
      failed(verifyWeight(*this, getWeight().getType(), 1, "weight")))
    return failure();
  // The weight spans the row (a hidden-state norm) or one group of it (per-head q/k norm).
  int64_t features = getInput().getType().getDimSize(1);
  int64_t group = getWeight().getType().getDimSize(0);
  if (!ShapedType::isDynamic(features) && !ShapedType::isDynamic(group) &&
      (group <= 0 || features % group != 0))
    return emitOpError() << "weight has " << group << " elements, which divide no row of "
                         << features << " features into groups";
  return verifyEpsilon(*this, getEpsilon());
}

int64_t RmsNormOp::getGroupCount() {
  int64_t features = getInput().getType().getDimSize(1);
  int64_t group = getWeight().getType().getDimSize(0);
  if (ShapedType::isDynamic(features) || ShapedType::isDynamic(group) || group <= 0)
    return 1;
  return features / group;
}

LogicalResult AddRmsNormOp::verify() {
  if (failed(verifyRows(*this, getInput().getType(), "input")) ||
      failed(verifyNormParam(*this, getInput().getType(), getWeight().getType(),
                             "weight")))
    return failure();
  return verifyEpsilon(*this, getEpsilon());
}

LogicalResult LayerNormOp::verify() {
  if (failed(verifyRows(*this, getInput().getType(), "input")) ||
      failed(verifyNormParam(*this, getInput().getType(), getWeight().getType(),
                             "weight")) ||
      failed(verifyNormParam(*this, getInput().getType(), getBias().getType(),
                             "bias")))
    return failure();
  return verifyEpsilon(*this, getEpsilon());
}

//===----------------------------------------------------------------------===//
// RopeOp / KvWriteOp
//===----------------------------------------------------------------------===//

LogicalResult RopeOp::verify() {
  if (failed(verifyRows(*this, getInput().getType(), "input")) ||
      failed(verifyTokens(*this, getInput().getType(), "input",
                          getPositions().getType(), "positions")))
    return failure();
  int64_t heads = getNumHeadsAttr().getInt();
  int64_t headDim = getHeadDimAttr().getInt();
  if (heads <= 0 || headDim <= 0)
    return emitOpError() << "num_heads and head_dim must be > 0";
  if (headDim % 2 != 0)
    return emitOpError() << "head_dim must be even to rotate pairs, got "
                         << headDim;
  int64_t features = getInput().getType().getDimSize(1);
  if (!dimsAgree(features, heads * headDim))
    return emitOpError() << "input has " << features
                         << " features, expected num_heads * head_dim = "
                         << heads * headDim;
  if (!(getTheta().convertToDouble() > 0.0))
    return emitOpError() << "theta must be > 0";
  return verifyFreqFactors(*this, getFreqFactors(), headDim, getScalingAttr() != nullptr);
}

LogicalResult KvWriteOp::verify() {
  KvCacheType cache = getCache().getType();
  if (failed(verifyRows(*this, getKey().getType(), "key")) ||
      failed(verifyTokens(*this, getKey().getType(), "key",
                          getSlotMapping().getType(), "slot_mapping")))
    return failure();
  int64_t layer = getLayerAttr().getInt();
  if (layer < 0 || layer >= int64_t(cache.getNumLayers()))
    return emitOpError() << "layer " << layer << " is out of range for a "
                         << cache.getNumLayers() << "-layer cache";
  int64_t features = getKey().getType().getDimSize(1);
  int64_t expected = int64_t(cache.getNumKvHeads()) * cache.getHeadDim();
  if (!dimsAgree(features, expected))
    return emitOpError() << "key/value have " << features
                         << " features, expected num_kv_heads * head_dim = "
                         << expected << " of the cache";
  return success();
}

LogicalResult RopeKvWriteOp::verify() {
  KvCacheType cache = getCache().getType();
  if (failed(verifyRows(*this, getQuery().getType(), "query")) ||
      failed(verifyRows(*this, getKey().getType(), "key")) ||
      failed(verifyTokens(*this, getQuery().getType(), "query", getKey().getType(), "key")) ||
      failed(verifyTokens(*this, getQuery().getType(), "query", getPositions().getType(),
                          "positions")) ||
      failed(verifyTokens(*this, getKey().getType(), "key", getSlotMapping().getType(),
                          "slot_mapping")))
    return failure();
  const int64_t heads = getNumHeads(), kvHeads = getNumKvHeads(), headDim = getHeadDim();
  if (heads <= 0 || kvHeads <= 0 || headDim <= 0 || headDim % 2 != 0)
    return emitOpError() << "num_heads, num_kv_heads and an even head_dim must be > 0";
  if (kvHeads != int64_t(cache.getNumKvHeads()) || headDim != int64_t(cache.getHeadDim()))
    return emitOpError() << "num_kv_heads = " << kvHeads << " and head_dim = " << headDim
                         << " disagree with the cache's " << cache.getNumKvHeads() << " and "
                         << cache.getHeadDim();
  if (!dimsAgree(getQuery().getType().getDimSize(1), heads * headDim) ||
      !dimsAgree(getKey().getType().getDimSize(1), kvHeads * headDim))
    return emitOpError() << "query/key features must be num_heads * head_dim = "
                         << heads * headDim << " / num_kv_heads * head_dim = "
                         << kvHeads * headDim;
  if (getLayer() < 0 || getLayer() >= int64_t(cache.getNumLayers()))
    return emitOpError() << "layer " << getLayer() << " is out of range for a "
                         << cache.getNumLayers() << "-layer cache";
  if (!(getTheta().convertToDouble() > 0.0))
    return emitOpError() << "theta must be > 0";
  return verifyFreqFactors(*this, getFreqFactors(), headDim, getScalingAttr() != nullptr);
}

//===----------------------------------------------------------------------===//
// Elementwise ops and logits
//===----------------------------------------------------------------------===//

/// Elementwise ops: one [tokens, features] type for all operands and the
/// result. SameOperandsAndResultType accepts `?` against a static size; the
/// custom syntax spells one type, so the types must be identical.
static LogicalResult verifyElementwise(Operation *op) {
  Type type = op->getResult(0).getType();
  if (llvm::any_of(op->getOperandTypes(), [&](Type t) { return t != type; }))
    return op->emitOpError() << "expects operands and result of one type (a "
                                "static token count must be spelled on every "
                                "one)";
  return verifyRows(op, type, "operands");
}

LogicalResult SiluMulOp::verify() { return verifyElementwise(*this); }

LogicalResult GeluMulOp::verify() { return verifyElementwise(*this); }

LogicalResult AddOp::verify() { return verifyElementwise(*this); }

LogicalResult ScaleOp::verify() {
  if (!std::isfinite(getFactor().convertToFloat()))
    return emitOpError() << "factor must be finite, got " << getFactor().convertToFloat();
  return verifyElementwise(*this);
}

OpFoldResult ScaleOp::fold(FoldAdaptor) {
  return getFactor().convertToFloat() == 1.0f ? getInput() : Value();
}

LogicalResult LogitsOp::verify() {
  if (failed(verifyRows(*this, getHidden().getType(), "hidden")) ||
      failed(verifyWeight(*this, getWeight().getType(), 2, "weight")) ||
      failed(verifyTokens(*this, getRows().getType(), "rows",
                          getResult().getType(), "result")))
    return failure();
  Type weightElement = getWeight().getType().getElementType();
  if (!isFloatWeightType(weightElement))
    return emitOpError() << "weight element type must be f32, f16 or bf16, got "
                         << weightElement;
  ArrayRef<int64_t> weight = getWeight().getType().getShape();
  int64_t hidden = getHidden().getType().getDimSize(1);
  if (!dimsAgree(hidden, weight[1]))
    return emitOpError() << "hidden has " << hidden
                         << " features but the weight rows have " << weight[1];
  int64_t vocab = getResult().getType().getDimSize(1);
  if (!dimsAgree(vocab, weight[0]))
    return emitOpError() << "result has " << vocab
                         << " columns but the weight has " << weight[0]
                         << " vocabulary rows";
  return success();
}
