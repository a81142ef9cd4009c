// The ingot dialect: declaration and the base class every ingot op derives from.
#ifndef INGOT_DIALECT_TD
#define INGOT_DIALECT_TD

include "mlir/IR/OpBase.td"

def Ingot_Dialect : Dialect {
  let name = "ingot";
  let cppNamespace = "::mlir::ingot";
  let summary = "Tensor-level transformer building blocks for LLM serving steps";
  let description = [{
    The `ingot` dialect expresses one serving step of a large language model: a
    function over a dynamic number of new tokens (`?` dimensions) and a paged KV
    cache. Each op is one transformer building block (embedding, norms, linear
    projections with optional weight quantization, rotary embedding, KV writes,
    paged attention with FlexAttention-style mask/score regions, activations and
    logits). Weights are references (`ingot.weight`) to external storage, never
    dense attributes, so compiler memory does not grow with the model.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  // Attention regions hold arith/math ops; loading ingot loads them too.
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect"
  ];
}

class Ingot_Op<string mnemonic, list<Trait> traits = []>
    : Op<Ingot_Dialect, mnemonic, traits>;

#endif // INGOT_DIALECT_TD
