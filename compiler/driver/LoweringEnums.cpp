//===- LoweringEnums.cpp - the ingot dialect's types and enums as the artifact's --===//
#include "compiler/driver/LoweringEnums.h"

#include "llvm/ADT/StringSwitch.h"

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

/// The step kind of an op, or Invalid for ops that are not steps.
schema::OpKind stepKind(mlir::Operation *op) {
  return llvm::StringSwitch<schema::OpKind>(op->getName().getStringRef())
      .Case("ingot.embedding", schema::OpKind::Embedding)
      .Case("ingot.rms_norm", schema::OpKind::RmsNorm)
      .Case("ingot.add_rms_norm", schema::OpKind::AddRmsNorm)
      .Case("ingot.rope_kv_write", schema::OpKind::RopeKvWrite)
      .Case("ingot.layer_norm", schema::OpKind::LayerNorm)
      .Case("ingot.linear", schema::OpKind::Linear)
      .Case("ingot.rope", schema::OpKind::Rope)
      .Case("ingot.kv_write", schema::OpKind::KvWrite)
      .Case("ingot.attention", schema::OpKind::Attention)
      .Case("ingot.silu_mul", schema::OpKind::SiluMul)
      .Case("ingot.gelu_mul", schema::OpKind::GeluMul)
      .Case("ingot.add", schema::OpKind::Add)
      .Case("ingot.logits", schema::OpKind::Logits)
      .Case("ingot.all_reduce", schema::OpKind::AllReduce)
      .Case("ingot.all_gather", schema::OpKind::AllGather)
      .Default(schema::OpKind::Invalid);
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
