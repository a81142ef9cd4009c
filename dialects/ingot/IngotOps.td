// Ops of the ingot dialect: one op per transformer building block of a serving step.
#ifndef INGOT_OPS_TD
#define INGOT_OPS_TD

include "dialects/ingot/IngotDialect.td"
include "dialects/ingot/IngotAttrs.td"
include "dialects/ingot/IngotTypes.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Activations are [tokens, features] tensors of a float type; the token
// dimension is usually dynamic (`?`).
def Ingot_FloatTensor : RankedTensorOf<[F32, F16, BF16]>;
def Ingot_I32Vector : TensorRankOf<[I32], [1]>;
def Ingot_I32Matrix : TensorRankOf<[I32], [2]>;

//===----------------------------------------------------------------------===//
// Weights and embeddings
//===----------------------------------------------------------------------===//

def Ingot_WeightOp : Ingot_Op<"weight", [Pure]> {
  let summary = "A reference to one tensor of the checkpoint";
  let description = [{
    Names one weight tensor without holding its data: `name` is the tensor's
    name in the checkpoint, `handle` its index in the compile's tensor table
    (handles of a module are dense, 0..N-1), and the result type its shape and
    element type. The compiler never loads the data into the IR, so compiler
    memory does not grow with the model.

    `source_quant` says the checkpoint stores the tensor quantized under that
    scheme (e.g. GGUF Q4_1 blocks are `int4, group_size = 32, min`), so a
    quantizing pass can keep its blocks exactly. `encoding` marks a tensor
    derived from checkpoint tensor `handle` by quantization (several weights
    may then share a handle); see `#ingot.encoding`. `shard` marks one
    tensor-parallel rank's slice of checkpoint tensor `handle` (see
    `#ingot.shard`); the result type is the slice's shape.

    ```mlir
    %w = ingot.weight "model.layers.0.self_attn.q_proj.weight" {handle = 3 : i64} : tensor<576x576xbf16>
    %q = ingot.weight "model.layers.0.mlp.up_proj.weight" {encoding = #ingot.encoding<weight, #ingot.quant<mxfp4>>, handle = 7 : i64} : tensor<1536x576xf4E2M1FN>
    %s = ingot.weight "model.layers.0.mlp.down_proj.weight" {handle = 9 : i64, shard = #ingot.shard<dim = 1, offset = 768, size = 768, source_size = 1536>} : tensor<576x768xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$name, I64Attr:$handle,
                       OptionalAttr<Ingot_QuantSchemeAttr>:$source_quant,
                       OptionalAttr<Ingot_WeightEncodingAttr>:$encoding,
                       OptionalAttr<Ingot_ShardAttr>:$shard);
  let results = (outs AnyRankedTensor:$result);
  let builders = [
    // A plain checkpoint tensor (no source_quant, no encoding, no shard).
    OpBuilder<(ins "::mlir::Type":$result, "::llvm::StringRef":$name, "uint64_t":$handle), [{
      build($_builder, $_state, result, name, handle, nullptr, nullptr, nullptr);
    }]>,
    // A checkpoint tensor or a quantized part of one, not sharded.
    OpBuilder<(ins "::mlir::Type":$result, "::llvm::StringRef":$name, "uint64_t":$handle,
                   "::mlir::ingot::QuantSchemeAttr":$source_quant,
                   "::mlir::ingot::WeightEncodingAttr":$encoding), [{
      build($_builder, $_state, result, name, handle, source_quant, encoding, nullptr);
    }]>
  ];
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Ingot_EmbeddingOp : Ingot_Op<"embedding", [Pure]> {
  let summary = "Gathers embedding rows for token ids";
  let description = [{
    `result[t] = table[tokens[t]]`, converted to the result element type.
    `table` is `[vocab, hidden]`.

    With `vocab_start` (vocab-parallel tensor parallelism) the table holds the
    rows of tokens `vocab_start .. vocab_start + rows - 1`: row `i` is token
    `vocab_start + i`, and a token outside that range gives a row of zeros, so
    an `ingot.all_reduce` over the ranks' results is the full embedding.

    ```mlir
    %h = ingot.embedding %tokens, %table : tensor<?xi32>, tensor<256x64xbf16> -> tensor<?x64xf32>
    %p = ingot.embedding %tokens, %slice {vocab_start = 128 : i64} : tensor<?xi32>, tensor<128x64xbf16> -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Ingot_I32Vector:$tokens, AnyRankedTensor:$table,
                       OptionalAttr<I64Attr>:$vocab_start);
  let results = (outs Ingot_FloatTensor:$result);
  let builders = [
    // The whole table (no vocab_start).
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$tokens, "::mlir::Value":$table), [{
      build($_builder, $_state, result, tokens, table, nullptr);
    }]>
  ];
  let assemblyFormat = [{
    $tokens `,` $table attr-dict `:` type($tokens) `,` type($table) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

def Ingot_RmsNormOp : Ingot_Op<"rms_norm",
    [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Root-mean-square normalization over the feature dimension";
  let description = [{
    `result[t, i] = input[t, i] / sqrt(mean_j(input[t, j]^2) + epsilon) * weight[i]`.

    A weight of G elements where rows have a multiple of G features normalizes each
    group of G consecutive features on its own, `j` running over the group: the
    per-head RMSNorm of queries and keys (Qwen3, Gemma 3), G the head dimension.

    ```mlir
    %y = ingot.rms_norm %x, %w {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<64xf32>
    %qn = ingot.rms_norm %q, %wq {epsilon = 1.0e-06 : f32} : tensor<?x256xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Ingot_FloatTensor:$input, Ingot_FloatTensor:$weight,
                       F32Attr:$epsilon);
  let results = (outs Ingot_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` type($input) `,` type($weight)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Groups per row: 1 for a hidden-state norm, the head count for a per-head norm.
    int64_t getGroupCount();
  }];
}

def Ingot_AddRmsNormOp : Ingot_Op<"add_rms_norm",
    [Pure, AllTypesMatch<["input", "residual", "sum", "result"]>]> {
  let summary = "Residual add fused with the RMS normalization of the sum";
  let description = [{
    `sum = residual + input`, then `result = rms_norm(sum) * weight` as
    `ingot.rms_norm` computes it: the pair `ingot.add` + `ingot.rms_norm` in one
    pass over the rows. The sum is rounded to the element type before it is
    normalized, so both results equal the unfused pair's bit for bit.
    `ingot-fuse-elementwise` makes it from that pair; the backends write the sum
    in place of the residual where the residual dies here.

    ```mlir
    %h1, %y = ingot.add_rms_norm %attn_out, %h0, %w {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Ingot_FloatTensor:$input, Ingot_FloatTensor:$residual,
                       Ingot_FloatTensor:$weight, F32Attr:$epsilon);
  let results = (outs Ingot_FloatTensor:$sum, Ingot_FloatTensor:$result);
  let assemblyFormat = "$input `,` $residual `,` $weight attr-dict `:` type($input) `,` type($weight)";
  let hasVerifier = 1;
}

def Ingot_LayerNormOp : Ingot_Op<"layer_norm",
    [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Layer normalization over the feature dimension";
  let description = [{
    `result[t, i] = (input[t, i] - mean) / sqrt(var + epsilon) * weight[i] + bias[i]`,
    mean and variance taken over row `t`.

    ```mlir
    %y = ingot.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Ingot_FloatTensor:$input, Ingot_FloatTensor:$weight,
                       Ingot_FloatTensor:$bias, F32Attr:$epsilon);
  let results = (outs Ingot_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias attr-dict `:` type($input) `,` type($weight) `,` type($bias)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Linear layers
//===----------------------------------------------------------------------===//

def Ingot_LinearOp : Ingot_Op<"linear", [Pure, AttrSizedOperandSegments]> {
  let summary = "Matrix multiply by a (possibly quantized) weight, plus bias";
  let description = [{
    `result[t, n] = sum_k input[t, k] * dequant(weight)[n, k] + bias[n]`, with
    `weight` laid out `[N, K]` (the Hugging Face layout). Without `quant` the
    weight is `f32`, `f16` or `bf16` and there are no scales. With `quant` the
    weight element type and the scale operands must match the scheme (see
    `#ingot.quant`); every mismatch is diagnosed.

    ```mlir
    %q = ingot.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
    %k = ingot.linear %x, %wk bias(%bk : tensor<32xf32>) : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
    %y = ingot.linear %x, %w scales(%s, %g : tensor<128x4xf8E4M3FN>, tensor<f32>) {quant = #ingot.quant<nvfp4>}
           : tensor<?x64xbf16>, tensor<128x64xf4E2M1FN> -> tensor<?x128xbf16>
    ```
  }];
  let arguments = (ins Ingot_FloatTensor:$input, AnyRankedTensor:$weight,
                       Optional<Ingot_FloatTensor>:$bias,
                       Variadic<AnyRankedTensor>:$scales,
                       OptionalAttr<Ingot_QuantSchemeAttr>:$quant);
  let results = (outs Ingot_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` `(` $bias^ `:` type($bias) `)`)?
    (`scales` `(` $scales^ `:` type($scales) `)`)?
    attr-dict `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Ingot_GatedLinearOp : Ingot_Op<"gated_linear", [Pure, AttrSizedOperandSegments]> {
  let summary = "A gated MLP's gate and up linears with their activation, in one op";
  let description = [{
    `result = act(input gate_weight^T) * (input up_weight^T)`, `act` being
    `silu` or `gelu` (tanh form) as `ingot.silu_mul` / `ingot.gelu_mul` compute
    them: the pair of `ingot.linear` ops of a Llama/Gemma MLP and their gated
    activation, one step that reads the input once. Both weights are `[N, K]`
    of one element type, without bias; with `quant` both follow that scheme,
    each with its own scale operands (`gate_scales`, `up_scales`, as
    `ingot.linear` takes them). `ingot-fuse-elementwise` makes it; the results
    equal the three ops' bit for bit.

    ```mlir
    %y = ingot.gated_linear %x, %wg, %wu {activation = "silu"}
           : tensor<?x64xf32>, tensor<128x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
    ```
  }];
  let arguments = (ins Ingot_FloatTensor:$input, AnyRankedTensor:$gate_weight,
                       AnyRankedTensor:$up_weight,
                       Variadic<AnyRankedTensor>:$gate_scales,
                       Variadic<AnyRankedTensor>:$up_scales,
                       StrAttr:$activation,
                       OptionalAttr<Ingot_QuantSchemeAttr>:$quant);
  let results = (outs Ingot_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gate_weight `,` $up_weight
    (`gate_scales` `(` $gate_scales^ `:` type($gate_scales) `)`)?
    (`up_scales` `(` $up_scales^ `:` type($up_scales) `)`)?
    attr-dict `:` type($input) `,` type($gate_weight) `,` type($up_weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Rotary position embedding and the KV cache
//===----------------------------------------------------------------------===//

def Ingot_RopeOp : Ingot_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Rotary position embedding of each head";
  let description = [{
    Rotates each `head_dim`-wide head of row `t` of `input` (`[tokens,
    num_heads * head_dim]`) by angles `positions[t] * theta^(-2i/head_dim)`
    (rotate-half pairing, as in Hugging Face Llama), frequencies optionally
    rescaled by `scaling`, or divided one by one by `freq_factors` (f32
    `[head_dim / 2]`, a weight: Llama 3 GGUFs' `rope_freqs`). Positions are
    separate from KV-slot indices: the siblings of a speculative token tree share
    a position.

    ```mlir
    %q = ingot.rope %x, %positions {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64}
           : tensor<?x64xf32>, tensor<?xi32>
    %r = ingot.rope %x, %positions factors(%f : tensor<8xf32>) {num_heads = 4 : i32, head_dim = 16 : i32, theta = 5.0e+05 : f64}
           : tensor<?x64xf32>, tensor<?xi32>
    %k = ingot.rope %x, %positions {num_heads = 8 : i32, head_dim = 128 : i32, theta = 5.0e+05 : f64,
           scaling = #ingot.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>}
           : tensor<?x1024xbf16>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Ingot_FloatTensor:$input, Ingot_I32Vector:$positions,
                       Optional<Ingot_FloatTensor>:$freq_factors,
                       I32Attr:$num_heads, I32Attr:$head_dim, F64Attr:$theta,
                       OptionalAttr<Ingot_RopeScalingAttr>:$scaling);
  let results = (outs Ingot_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $positions (`factors` `(` $freq_factors^ `:` type($freq_factors) `)`)? attr-dict
    `:` type($input) `,` type($positions)
  }];
  let hasVerifier = 1;
}

def Ingot_RopeKvWriteOp : Ingot_Op<"rope_kv_write", [Pure,
    AllTypesMatch<["query", "rotated_query"]>, AllTypesMatch<["key", "rotated_key", "value"]>,
    AllTypesMatch<["positions", "slot_mapping"]>, AllTypesMatch<["cache", "result"]>]> {
  let summary = "Rotary embedding of a layer's queries and keys fused with the KV write";
  let description = [{
    `ingot.rope` of `query` (`num_heads` heads) and of `key` (`num_kv_heads`
    heads) with the same positions, theta, scaling and frequency factors, then
    `ingot.kv_write` of
    the rotated keys and `value` into layer `layer` of `cache`: the three ops of
    a decoder layer in one step (one kernel). Results: the rotated queries, the
    rotated keys (the values written; usually unread) and the updated cache,
    each equal to the unfused ops' bit for bit. `ingot-fuse-elementwise` makes
    it; the backends rotate in place where the inputs die at the step.

    ```mlir
    %qr, %kr, %c1 = ingot.rope_kv_write %q, %k, %v, %positions, %cache, %slot_mapping
        {num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64, layer = 0 : i32}
        : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?xi32>, !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
    ```
  }];
  let arguments = (ins Ingot_FloatTensor:$query, Ingot_FloatTensor:$key,
                       Ingot_FloatTensor:$value, Ingot_I32Vector:$positions,
                       Ingot_KvCacheType:$cache, Ingot_I32Vector:$slot_mapping,
                       Optional<Ingot_FloatTensor>:$freq_factors,
                       I32Attr:$num_heads, I32Attr:$num_kv_heads, I32Attr:$head_dim,
                       F64Attr:$theta, OptionalAttr<Ingot_RopeScalingAttr>:$scaling,
                       I32Attr:$layer);
  let results = (outs Ingot_FloatTensor:$rotated_query, Ingot_FloatTensor:$rotated_key,
                      Ingot_KvCacheType:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $positions `,` $cache `,` $slot_mapping
    (`factors` `(` $freq_factors^ `:` type($freq_factors) `)`)? attr-dict `:`
    type($query) `,` type($key) `,` type($positions) `,` qualified(type($cache))
  }];
  let hasVerifier = 1;
}

def Ingot_KvWriteOp : Ingot_Op<"kv_write", [Pure,
    AllTypesMatch<["cache", "result"]>, AllTypesMatch<["key", "value"]>]> {
  let summary = "Stores new keys and values of one layer into the paged cache";
  let description = [{
    For every new token `t`, writes `key[t]` and `value[t]` (`[tokens,
    num_kv_heads * head_dim]`) of layer `layer` into KV slot
    `slot_mapping[t]` (= block * block_size + offset in the cache pool) and
    returns the updated cache. A negative slot skips the token (padding).

    ```mlir
    %c1 = ingot.kv_write %cache, %k, %v, %slot_mapping {layer = 0 : i32}
            : !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>, tensor<?x32xf32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Ingot_KvCacheType:$cache, Ingot_FloatTensor:$key,
                       Ingot_FloatTensor:$value, Ingot_I32Vector:$slot_mapping,
                       I32Attr:$layer);
  let results = (outs Ingot_KvCacheType:$result);
  let assemblyFormat = [{
    $cache `,` $key `,` $value `,` $slot_mapping attr-dict `:` qualified(type($cache)) `,` type($key) `,` type($slot_mapping)
  }];
  let hasVerifier = 1;
}

include "dialects/ingot/IngotAttentionOps.td"
include "dialects/ingot/IngotCollectiveOps.td"

//===----------------------------------------------------------------------===//
// Activations, residuals and logits
//===----------------------------------------------------------------------===//

class Ingot_GatedActivationOp<string mnemonic, string act>
    : Ingot_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "Gated activation: " # act # "(gate) * up";
  let description = [{
    Elementwise `}] # act # [{(gate) * up` of two `[tokens, features]` tensors of
    the same type (the gated MLP of Llama/Gemma).

    ```mlir
    %y = ingot.}] # mnemonic # [{ %gate, %up : tensor<?x128xf32>
    ```
  }];
  let arguments = (ins Ingot_FloatTensor:$gate, Ingot_FloatTensor:$up);
  let results = (outs Ingot_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Ingot_SiluMulOp : Ingot_GatedActivationOp<"silu_mul", "silu">;
def Ingot_GeluMulOp : Ingot_GatedActivationOp<"gelu_mul", "gelu">;

def Ingot_AddOp : Ingot_Op<"add", [Pure, Commutative, SameOperandsAndResultType]> {
  let summary = "Elementwise sum (residual connection)";
  let description = [{
    `result = lhs + rhs` for two `[tokens, features]` tensors of the same type.

    ```mlir
    %h1 = ingot.add %h0, %attn_out : tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Ingot_FloatTensor:$lhs, Ingot_FloatTensor:$rhs);
  let results = (outs Ingot_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Ingot_ScaleOp : Ingot_Op<"scale", [Pure, SameOperandsAndResultType]> {
  let summary = "Elementwise product with a constant";
  let description = [{
    `result = input * factor` for a `[tokens, features]` tensor, computed in f32 and
    rounded once to the element type (Gemma's embeddings times sqrt(hidden size)). A
    factor of 1 folds away; `factor` must be finite.

    ```mlir
    %h = ingot.scale %e {factor = 25.2982216 : f32} : tensor<?x640xf32>
    ```
  }];
  let arguments = (ins Ingot_FloatTensor:$input, F32Attr:$factor);
  let results = (outs Ingot_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Ingot_LogitsOp : Ingot_Op<"logits", [Pure]> {
  let summary = "Projects selected token rows onto the vocabulary";
  let description = [{
    `result[r, v] = sum_d hidden[rows[r], d] * weight[v, d]` in f32: gathers the
    rows that need logits (usually the last new token of each request) before
    the vocabulary projection, so prefill does not pay for every token.

    ```mlir
    %logits = ingot.logits %h, %lm_head, %logit_rows
                : tensor<?x64xf32>, tensor<256x64xf32>, tensor<?xi32> -> tensor<?x256xf32>
    ```
  }];
  let arguments = (ins Ingot_FloatTensor:$hidden, AnyRankedTensor:$weight,
                       Ingot_I32Vector:$rows);
  let results = (outs TensorRankOf<[F32], [2]>:$result);
  let assemblyFormat = [{
    $hidden `,` $weight `,` $rows attr-dict `:` type($hidden) `,` type($weight) `,` type($rows) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // INGOT_OPS_TD
