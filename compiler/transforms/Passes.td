// Passes of the ingot compiler (compiler/transforms), run by `ingot compile` and ingot-opt.
#ifndef INGOT_COMPILER_TRANSFORMS_PASSES_TD
#define INGOT_COMPILER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def QuantizeWeights : Pass<"ingot-quantize-weights", "::mlir::ModuleOp"> {
  let summary = "Quantizes the weights of ingot.linear ops (int4, fp8, nvfp4, mxfp4)";
  let description = [{
    Rewrites every `ingot.linear` whose weight is an unquantized (f32, f16,
    bf16) checkpoint tensor into the quantized form of `format`: the weight
    becomes a packed `ingot.weight` and the scales new `ingot.weight` ops, all
    with the source tensor's handle and an `#ingot.encoding` naming their part.
    No bytes are computed here: the compile driver encodes the source tensor
    while it writes the artifact.

    | format | weight | scales |
    |---|---|---|
    | int4 | `ui4` [N, K] | f16 scale and f16 min [N, K/group] (`#ingot.quant<int4, group_size = G, min>`) |
    | fp8 | `f8E4M3FN` [N, K] | f32 [N] (`per_channel`) |
    | nvfp4 | `f4E2M1FN` [N, K] | `f8E4M3FN` [N, K/16], f32 global [1] |
    | mxfp4 | `f4E2M1FN` [N, K] | `f8E8M0FNU` [N, K/32] |

    A weight whose `source_quant` is int4 with the requested group keeps that
    scheme (GGUF Q4_0 stays `zero`, Q4_1 `min`), so its blocks are copied
    exactly. Weights named by a `skip` pattern, weights whose K the block size
    does not divide (with a warning), and the embedding table and output head
    (weights also used by `ingot.embedding` / `ingot.logits`, or named
    `lm_head.weight`, `model.embed_tokens.weight`, `output.weight`,
    `token_embd.weight`) stay as they are; `quantize-head` lets head linears
    be quantized too.

    Skip patterns are globs over the whole weight name (`*`, `?`, `[...]`); a
    pattern without glob characters matches any name containing it.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"int4\"",
           "Weight format: int4, fp8, nvfp4 or mxfp4">,
    Option<"groupSize", "group-size", "int64_t", /*default=*/"32",
           "Elements per int4 scale along K: 32, 64 or 128">,
    ListOption<"skip", "skip", "std::string",
               "Leave weights whose name matches this pattern unquantized">,
    Option<"quantizeHead", "quantize-head", "bool", /*default=*/"false",
           "Also quantize linears over the embedding table or the output head">,
  ];
}

def ShardTensorParallel : Pass<"ingot-shard-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "Splits the serving step over tp ranks (Megatron-style tensor parallelism)";
  let description = [{
    Replaces the serving-step function by one function per rank, `@step_tp<r>`
    with `ingot.tp_rank = r`, and sets the module's `ingot.tp = tp`, following
    docs/tensor-parallel.md:

    | layer | split | after it |
    |---|---|---|
    | q/k/v projections | column-parallel over the rank's heads | — |
    | o projection | row-parallel over the rank's query heads | `ingot.all_reduce` |
    | gate/up projections | column-parallel over the intermediate dimension | — |
    | down projection | row-parallel over the intermediate dimension | `ingot.all_reduce` |
    | embedding | vocab-parallel (`vocab_start`) | `ingot.all_reduce` |
    | logits | vocab-parallel | `ingot.all_gather` |

    Heads are dealt out at kv-head granularity (uneven splits allowed); with
    fewer kv heads than ranks a kv head is replicated and its query heads are
    split over the ranks that serve it. Biases of column-parallel linears are
    sliced; biases of row-parallel ones stay on rank 0. A vocabulary that `tp`
    does not divide stays replicated (with a warning). Sharded weights are
    `ingot.weight` ops with an `#ingot.shard` naming their slice of the source
    tensor; the compile driver cuts the bytes while it writes the artifact.
    `tp = 1` leaves the module unchanged. Fails with a message on tp < 1,
    tp > num_heads, quantized linears, and step shapes it does not recognise.
  }];
  let options = [
    Option<"tp", "tp", "int64_t", /*default=*/"1", "Number of tensor-parallel ranks">,
  ];
}

#endif // INGOT_COMPILER_TRANSFORMS_PASSES_TD
