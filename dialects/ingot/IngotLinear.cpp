// Verifiers of ingot.linear and ingot.gated_linear: weight/bias shapes and, for quantized
// weights, every scale operand.
#include "dialects/ingot/IngotDialect.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::ingot;

namespace {

bool dimsAgree(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// The weight element type a scheme stores, for messages and checks.
bool weightTypeFits(QuantKind kind, Type element) {
  switch (kind) {
  case QuantKind::PerTensor:
  case QuantKind::PerChannel:
    return isa<Float8E4M3FNType>(element);
  case QuantKind::NvFp4:
  case QuantKind::MxFp4:
    return isa<Float4E2M1FNType>(element);
  case QuantKind::Int4:
    return element.isInteger(4);
  }
  return false;
}

StringRef expectedWeightType(QuantKind kind) {
  switch (kind) {
  case QuantKind::PerTensor:
  case QuantKind::PerChannel:
    return "f8E4M3FN";
  case QuantKind::NvFp4:
  case QuantKind::MxFp4:
    return "f4E2M1FN";
  case QuantKind::Int4:
    return "i4 or ui4";
  }
  return "";
}

StringRef scaleOperandNames(QuantKind kind) {
  switch (kind) {
  case QuantKind::PerTensor:
    return "(scale)";
  case QuantKind::PerChannel:
    return "(per-channel scales)";
  case QuantKind::NvFp4:
    return "(block scales, global scale)";
  case QuantKind::MxFp4:
    return "(block scales)";
  case QuantKind::Int4:
    return "(group scales, group zeros or mins)";
  }
  return "";
}

/// Checks a scalar f32 scale: tensor<f32> or tensor<1xf32>.
LogicalResult verifyScalarScale(Operation *op, Value scale, StringRef what) {
  auto type = cast<RankedTensorType>(scale.getType());
  bool scalarShape = type.getRank() == 0 ||
                     (type.getRank() == 1 && type.getDimSize(0) == 1);
  if (!scalarShape || !type.getElementType().isF32())
    return op->emitOpError() << what << " must be tensor<f32> or tensor<1xf32>, got "
                            << type;
  return success();
}

/// Checks a scale tensor against the exact type the scheme needs.
LogicalResult verifyScaleType(Operation *op, Value scale, RankedTensorType expected,
                              StringRef what) {
  if (scale.getType() != expected)
    return op->emitOpError() << what << " must be " << expected << ", got "
                            << scale.getType();
  return success();
}

/// Checks the scale operands of a quantized weight of shape [n, k].
LogicalResult verifyScales(Operation *op, Value weight, ValueRange scales,
                           QuantSchemeAttr quant, int64_t n, int64_t k) {
  QuantKind kind = quant.getKind();
  StringRef scheme = stringifyQuantKind(kind);
  Type weightElement = cast<RankedTensorType>(weight.getType()).getElementType();
  if (!weightTypeFits(kind, weightElement))
    return op->emitOpError() << scheme << " quantization needs "
                            << expectedWeightType(kind)
                            << " weights, got " << weightElement;
  if (scales.size() != quant.getNumScaleOperands())
    return op->emitOpError() << scheme << " quantization takes "
                            << quant.getNumScaleOperands() << " scale operand(s) "
                            << scaleOperandNames(kind) << ", got "
                            << scales.size();
  MLIRContext *ctx = op->getContext();
  Builder b(ctx);
  switch (kind) {
  case QuantKind::PerTensor:
    return verifyScalarScale(op, scales[0], "per_tensor scale");
  case QuantKind::PerChannel:
    return verifyScaleType(op, scales[0], RankedTensorType::get({n}, b.getF32Type()),
                           "per_channel scale");
  default:
    break;
  }

  int64_t block = quant.getBlockSize();
  if (k % block != 0)
    return op->emitOpError() << "input features K = " << k
                            << " are not a multiple of the " << scheme
                            << " block size " << block;
  SmallVector<int64_t> blockShape = {n, k / block};
  if (kind == QuantKind::NvFp4) {
    auto scaleType = RankedTensorType::get(blockShape, b.getType<Float8E4M3FNType>());
    if (failed(verifyScaleType(op, scales[0], scaleType, "nvfp4 block scale")))
      return failure();
    return verifyScalarScale(op, scales[1], "nvfp4 global scale");
  }
  if (kind == QuantKind::MxFp4) {
    auto scaleType = RankedTensorType::get(blockShape, b.getType<Float8E8M0FNUType>());
    return verifyScaleType(op, scales[0], scaleType, "mxfp4 block scale");
  }

  // int4, group-wise: scales [n, k/g] in f16/bf16/f32, then zeros or mins.
  auto scaleType = cast<RankedTensorType>(scales[0].getType());
  Type scaleElement = scaleType.getElementType();
  if (!scaleElement.isF16() && !scaleElement.isBF16() && !scaleElement.isF32())
    return op->emitOpError() << "int4 group scale element type must be f16, bf16 "
                               "or f32, got "
                            << scaleElement;
  if (failed(verifyScaleType(op, scales[0],
                             RankedTensorType::get(blockShape, scaleElement),
                             "int4 group scale")))
    return failure();
  auto offsetType = cast<RankedTensorType>(scales[1].getType());
  Type offsetElement = offsetType.getElementType();
  bool zero = quant.getOffsetKind() == QuantOffsetKind::Zero;
  if (offsetElement != scaleElement && !(zero && offsetElement == weightElement))
    return op->emitOpError()
           << "int4 group " << (zero ? "zero" : "min") << " element type must be "
           << scaleElement << (zero ? " (the scale type) or the weight type" : "")
           << ", got " << offsetElement;
  return verifyScaleType(op, scales[1],
                         RankedTensorType::get(blockShape, offsetElement),
                         zero ? "int4 group zero" : "int4 group min");
}

/// Checks input [T, K] x weight [N, K]^T -> result [T, N]: ranks, a static weight, the
/// dimensions and one element type for input and result. `weights` names the weight(s).
LogicalResult verifyProductShapes(Operation *op, RankedTensorType input,
                                  RankedTensorType weight, RankedTensorType result,
                                  StringRef weights) {
  if (input.getRank() != 2 || result.getRank() != 2)
    return op->emitOpError() << "expects [tokens, features] input and result, got "
                             << input << " and " << result;
  if (weight.getRank() != 2 || !weight.hasStaticShape())
    return op->emitOpError() << "expects a static [out, in] " << weights << ", got " << weight;
  int64_t n = weight.getDimSize(0), k = weight.getDimSize(1);
  if (!dimsAgree(input.getDimSize(1), k))
    return op->emitOpError() << "input has " << input.getDimSize(1) << " features but the "
                             << weights << " takes " << k;
  if (!dimsAgree(result.getDimSize(1), n))
    return op->emitOpError() << "result has " << result.getDimSize(1) << " features but the "
                             << weights << " produces " << n;
  if (!dimsAgree(input.getDimSize(0), result.getDimSize(0)))
    return op->emitOpError() << "token count of input (" << input.getDimSize(0)
                             << ") does not match result (" << result.getDimSize(0) << ")";
  if (input.getElementType() != result.getElementType())
    return op->emitOpError() << "result element type " << result.getElementType()
                             << " differs from the input's " << input.getElementType();
  return success();
}

/// Without a #ingot.quant scheme: an f32, f16 or bf16 weight and no scale operands.
LogicalResult verifyUnquantized(Operation *op, RankedTensorType weight, size_t scales) {
  Type element = weight.getElementType();
  if (!element.isF32() && !element.isF16() && !element.isBF16())
    return op->emitOpError() << "weight element type " << element
                             << " needs a #ingot.quant scheme (unquantized weights "
                                "are f32, f16 or bf16)";
  if (scales != 0)
    return op->emitOpError() << "takes scale operands only with a #ingot.quant scheme, got "
                             << scales;
  return success();
}

} // namespace

LogicalResult LinearOp::verify() {
  RankedTensorType weight = getWeight().getType();
  if (failed(verifyProductShapes(*this, getInput().getType(), weight, getResult().getType(),
                                 "weight")))
    return failure();
  int64_t n = weight.getDimSize(0), k = weight.getDimSize(1);
  if (Value bias = getBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 || biasType.getDimSize(0) != n)
      return emitOpError() << "bias must have shape [" << n << "], got "
                           << biasType;
  }

  QuantSchemeAttr quant = getQuantAttr();
  if (!quant)
    return verifyUnquantized(*this, weight, getScales().size());
  return verifyScales(*this, getWeight(), getScales(), quant, n, k);
}

LogicalResult GatedLinearOp::verify() {
  if (getActivation() != "silu" && getActivation() != "gelu")
    return emitOpError() << "activation must be \"silu\" or \"gelu\", got \""
                         << getActivation() << "\"";
  RankedTensorType gate = cast<RankedTensorType>(getGateWeight().getType());
  RankedTensorType up = cast<RankedTensorType>(getUpWeight().getType());
  if (gate != up)
    return emitOpError() << "gate and up weights must have one type, got " << gate
                         << " and " << up;
  if (failed(verifyProductShapes(*this, getInput().getType(), gate, getResult().getType(),
                                 "gate weight")))
    return failure();
  int64_t n = gate.getDimSize(0), k = gate.getDimSize(1);
  QuantSchemeAttr quant = getQuantAttr();
  if (!quant)
    return verifyUnquantized(*this, gate, getGateScales().size() + getUpScales().size());
  if (failed(verifyScales(*this, getGateWeight(), getGateScales(), quant, n, k)) ||
      failed(verifyScales(*this, getUpWeight(), getUpScales(), quant, n, k)))
    return failure();
  // One preparation of the input serves both products: one scale type for both.
  if (!llvm::equal(getGateScales().getTypes(), getUpScales().getTypes()))
    return emitOpError() << "gate and up scales must have the same types";
  return success();
}
