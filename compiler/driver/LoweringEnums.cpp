//===- LoweringEnums.cpp - the ingot dialect's types and enums as the artifact's --===//
#include "compiler/driver/LoweringEnums.h"

namespace ingot::compiler {

/// Maps an MLIR element type to the artifact's DType (Invalid when it has none).
schema::DType toDType(mlir::Type type) {
  if (type.isF32())
    return schema::DType::F32;
  if (type.isF16())
    return schema::DType::F16;
  if (type.isBF16())
    return schema::DType::BF16;
  if (llvm::isa<mlir::Float8E4M3FNType>(type))
    return schema::DType::F8E4M3FN;
  if (llvm::isa<mlir::Float8E5M2Type>(type))
    return schema::DType::F8E5M2;
  if (llvm::isa<mlir::Float8E8M0FNUType>(type))
    return schema::DType::F8E8M0FNU;
  if (llvm::isa<mlir::Float4E2M1FNType>(type))
    return schema::DType::F4E2M1FN;
  if (auto it = llvm::dyn_cast<mlir::IntegerType>(type)) {
    bool isUnsigned = it.isUnsigned();
    switch (it.getWidth()) {
    case 1:
      return schema::DType::I1;
    case 4:
      return isUnsigned ? schema::DType::U4 : schema::DType::I4;
    case 8:
      return isUnsigned ? schema::DType::U8 : schema::DType::I8;
    case 32:
      return schema::DType::I32;
    case 64:
      return schema::DType::I64;
    default:
      return schema::DType::Invalid;
    }
  }
  return schema::DType::Invalid;
}

schema::QuantKind toQuantKind(mlir::ingot::QuantKind kind) {
  switch (kind) {
  case mlir::ingot::QuantKind::PerTensor:
    return schema::QuantKind::PerTensor;
  case mlir::ingot::QuantKind::PerChannel:
    return schema::QuantKind::PerChannel;
  case mlir::ingot::QuantKind::NvFp4:
    return schema::QuantKind::Nvfp4;
  case mlir::ingot::QuantKind::MxFp4:
    return schema::QuantKind::Mxfp4;
  case mlir::ingot::QuantKind::Int4:
    return schema::QuantKind::Int4Group;
  }
  return schema::QuantKind::None;
}

schema::ZeroKind toZeroKind(mlir::ingot::QuantOffsetKind kind) {
  switch (kind) {
  case mlir::ingot::QuantOffsetKind::None:
    return schema::ZeroKind::None;
  case mlir::ingot::QuantOffsetKind::Zero:
    return schema::ZeroKind::Zero;
  case mlir::ingot::QuantOffsetKind::Min:
    return schema::ZeroKind::Min;
  }
  return schema::ZeroKind::None;
}

/// The encoder behind a quantization scheme, or nothing where the compiler has none.
std::optional<quant::WeightEncoding> toWeightEncoding(mlir::ingot::QuantSchemeAttr scheme) {
  switch (scheme.getKind()) {
  case mlir::ingot::QuantKind::Int4:
    if (scheme.getOffsetKind() == mlir::ingot::QuantOffsetKind::Zero)
      return quant::WeightEncoding::Int4Zero;
    return quant::WeightEncoding::Int4Min;
  case mlir::ingot::QuantKind::PerChannel:
    return quant::WeightEncoding::Fp8PerChannel;
  case mlir::ingot::QuantKind::NvFp4:
    return quant::WeightEncoding::Nvfp4;
  case mlir::ingot::QuantKind::MxFp4:
    return quant::WeightEncoding::Mxfp4;
  case mlir::ingot::QuantKind::PerTensor:
    return std::nullopt;
  }
  return std::nullopt;
}

EncodedPart toEncodedPart(mlir::ingot::QuantPart part) {
  switch (part) {
  case mlir::ingot::QuantPart::Weight:
    return EncodedPart::Weight;
  case mlir::ingot::QuantPart::Scale:
    return EncodedPart::Scale;
  case mlir::ingot::QuantPart::Offset:
    return EncodedPart::Offset;
  case mlir::ingot::QuantPart::GlobalScale:
    return EncodedPart::GlobalScale;
  }
  return EncodedPart::Weight;
}

} // namespace ingot::compiler
