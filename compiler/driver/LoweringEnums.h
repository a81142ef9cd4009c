//===- LoweringEnums.h - the ingot dialect's types and enums as the artifact's -*- C++ -*-===//
//
// What the artifact writer serializes for each dialect type and enum: element types as
// DTypes, quantization schemes as QuantKind / ZeroKind and the encoder
// behind them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>

#include "compiler/driver/QuantizedTensors.h"
#include "compiler/quant/WeightEncoders.h"
#include "dialects/ingot/IngotDialect.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"
#include "schemas/artifact_generated.h"

namespace ingot::compiler {

/// Maps an MLIR element type to the artifact's DType (Invalid when it has none).
schema::DType toDType(mlir::Type type);


schema::QuantKind toQuantKind(mlir::ingot::QuantKind kind);
schema::ZeroKind toZeroKind(mlir::ingot::QuantOffsetKind kind);

/// The encoder behind a quantization scheme, or nothing where the compiler has none.
std::optional<quant::WeightEncoding> toWeightEncoding(mlir::ingot::QuantSchemeAttr scheme);

EncodedPart toEncodedPart(mlir::ingot::QuantPart part);

} // namespace ingot::compiler
