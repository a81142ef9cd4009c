// Verifiers of the tensor-parallel collectives ingot.all_reduce and ingot.all_gather.
#include "dialects/ingot/IngotDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::ingot;

/// The group size of the module around `op` (its `ingot.tp` attribute), or 0 when the
/// module does not say.
static int64_t moduleGroupSize(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  if (!module)
    return 0;
  auto tp = module->getAttrOfType<IntegerAttr>(kTensorParallelAttrName);
  return tp ? tp.getInt() : 0;
}

LogicalResult AllReduceOp::verify() {
  if (getInput().getType().getRank() != 2)
    return emitOpError() << "expects a [tokens, features] tensor, got " << getInput().getType();
  return success();
}

LogicalResult AllGatherOp::verify() {
  RankedTensorType input = getInput().getType();
  RankedTensorType result = getResult().getType();
  if (input.getElementType() != result.getElementType())
    return emitOpError() << "result element type " << result.getElementType()
                         << " differs from the input's " << input.getElementType();
  if (input.getRank() < 1 || input.getRank() != result.getRank())
    return emitOpError() << "expects input and result of one rank >= 1, got " << input
                         << " and " << result;
  int64_t last = input.getRank() - 1;
  for (int64_t d = 0; d < last; ++d) {
    int64_t a = input.getDimSize(d), b = result.getDimSize(d);
    if (!ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b)
      return emitOpError() << "dimension " << d << " of the result (" << b
                           << ") differs from the input's (" << a << ")";
  }
  int64_t in = input.getDimSize(last), out = result.getDimSize(last);
  if (ShapedType::isDynamic(in) || ShapedType::isDynamic(out))
    return success();
  if (int64_t group = moduleGroupSize(*this); group > 0) {
    if (out != in * group)
      return emitOpError() << "result's last dimension " << out << " is not the input's " << in
                           << " times the group size " << group << " (module 'ingot.tp')";
    return success();
  }
  if (in <= 0 || out % in != 0)
    return emitOpError() << "result's last dimension " << out
                         << " is not a multiple of the input's " << in;
  return success();
}
