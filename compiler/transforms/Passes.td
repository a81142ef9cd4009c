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

def FuseElementwise : Pass<"ingot-fuse-elementwise", "::mlir::ModuleOp"> {
  let summary = "Fuses a decoder layer's elementwise op groups into single steps";
  let description = [{
    Three patterns, each giving results equal to the unfused ops' bit for bit:

    **Residual add + rms_norm.**
    Rewrites `%s = ingot.add %r, %x` followed by `%y = ingot.rms_norm %s, %w`
    into `%s, %y = ingot.add_rms_norm %x, %r, %w`: one step (one pass over
    the rows, one kernel) instead of two, with the same results bit for bit.
    In a decoder layer this is the residual add after attention with the
    post-attention norm, and the one after the MLP with the next layer's input
    norm (or the final norm). The fused op takes the norm's place, so it fires
    only when every other use of the sum comes after the norm. Other uses of
    the sum (the next residual add) read the fused op's `sum` result.

    **rope (queries) + rope (keys) + kv_write.** `%kr = ingot.rope %k` read only
    by `%c = ingot.kv_write %cache, %kr, %v`, and `%qr = ingot.rope %q` (same
    positions, head_dim, theta and scaling) read by an `ingot.attention` over
    `%c`, become `%qr, %kr, %c = ingot.rope_kv_write %q, %k, %v, ...` at the
    write's place (when `%qr` is read only after it): one kernel instead of
    three.

    **linear (gate) + linear (up) + silu_mul / gelu_mul.** `%g = ingot.linear
    %x, %wg` and `%u = ingot.linear %x, %wu`, read only by `%y = ingot.silu_mul
    %g, %u` (or `gelu_mul`), become `%y = ingot.gated_linear %x, %wg, %wu
    {activation = "silu"}` at the activation's place: one step that reads `%x`
    once (the CPU backend prepares it once for both weights and applies the
    activation while the rows are in cache). Both linears must have no bias and
    the same weight type, scheme and scale types. MLPs with fp8 weights (in the
    gate/up or in a linear reading the activation) stay unfused: on CUDA they
    run W8A8, whose quantizing producers are the norm and the silu_mul.
  }];
}

def SpecializeAttention : Pass<"ingot-specialize-attention", "::mlir::ModuleOp"> {
  let summary = "Names each distinct attention variant (mask and score regions)";
  let description = [{
    Lowers the `mask` and `score` regions of every `ingot.attention` in the
    serving steps to region bytecode (codegen/cpu/RegionBytecodeEmitter) and
    names each distinct (mask, score) pair `variant<N>`, numbered in the order
    the steps (rank order in a sharded module) first use them. Every attention
    op with a region gets `ingot.variant = "variant<N>"`; ops whose regions
    lower to the same bytecode share a name, and the artifact holds each named
    variant once (its mask and score bytecode, and the struct name of its CUDA
    kernels). An op without regions is the dense variant and carries no name.
    Names from an earlier run are recomputed, so the pass can run again on its
    own output. Fails, with the emitter's message, on a region the bytecode
    cannot express.
  }];
}

def SelectKernels : Pass<"ingot-select-kernels", "::mlir::ModuleOp"> {
  let summary = "Chooses the CUDA kernels of every step for the compile's targets";
  let description = [{
    Records, for the CUDA `targets` (sm_XY[a|f], compute_XY[a|f], simt), which
    kernels the artifact carries; the kernel stages after lowering compile
    exactly these and link each step to its kernel by name:

    - the module gets `ingot.cuda_targets` (the targets, in order),
      `ingot.fused_kernels` (the element types of the fused elementwise
      kernels: f32 and/or bf16, whichever the steps' intermediate values hold,
      f32 first), `ingot.fused_kv_write_fp8` when a KV cache holds
      f8E4M3FN codes, `ingot.fused_scale` when a step has an
      `ingot.scale` and `ingot.fused_gelu_mul` when a step gates by GELU
      (`ingot.gelu_mul`, or `ingot.gated_linear` with activation "gelu");
    - each `ingot.rms_norm`, `ingot.add_rms_norm` (by its normalized rows)
      and `ingot.silu_mul` whose rows an fp8-weight `ingot.linear` reads gets
      `ingot.fp8_rows`: its CUDA step also writes the rows as fp8 codes with
      a scale per row, which those W8A8 linears read instead of quantizing
      the rows again (the fused quantizing producer);
    - each `ingot.attention` gets `ingot.cuda_kernel`, the symbol of its
      decode kernel (`ingot_decode_<variant>_<type>[_kvfp8]_d<D>_g<G>`, the
      variant from ingot-specialize-attention or `dense`), or, when no kernel
      takes its shape, `ingot.cpu_only` saying why (the step then runs on the
      CPU backend only, and the compile warns).

    Without targets (`--cuda-targets none`, or a build without NVRTC) every
    such attribute is removed. Fails on a target name it does not know and on
    an attention op with regions that ingot-specialize-attention has not
    named.
  }];
  let options = [
    ListOption<"targets", "targets", "std::string",
               "CUDA targets of the kernels (sm_80, sm_90a, compute_80, simt, ...)">,
  ];
}

def PlanSteps : Pass<"ingot-plan-steps", "::mlir::ModuleOp"> {
  let summary = "Plans the activation slots of the serving steps";
  let description = [{
    Gives every activation (an op result of the serving steps that is neither
    returned nor the KV cache) the storage slot it lives in for the step, as
    `ingot.slots = array<i32: ...>` on its op (one entry per result, -1 for
    results that are not activations). The artifact writer serializes them
    into `BufferDef.slot`, and the runtime allocates exactly these slots
    (each as wide as its widest buffer, times the step's tokens) after
    checking the plan.

    The planner (core/artifact/slot_plan.h, shared with the runtime's check)
    walks the steps in order: a slot is reused once the last reader of its
    buffer ran, the slot freed last first; an output that its op may write
    over an input (`ingot.add_rms_norm`'s sum over the residual,
    `ingot.rope_kv_write`'s rotated queries and keys over its queries and
    keys) takes that input's slot when no later op, and no other operand of
    the op, reads the input and both have the same row width, so the kernel
    updates it in place.

    Plans from an earlier run are recomputed. Fails on an op that is not a
    serving step and on an activation whose shape is not
    `[?, static dims...]`.
  }];
}

#endif // INGOT_COMPILER_TRANSFORMS_PASSES_TD
