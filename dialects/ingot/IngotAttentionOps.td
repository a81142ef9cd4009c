// Paged attention with FlexAttention-style mask/score regions, and the ops its regions use.
#ifndef INGOT_ATTENTION_OPS_TD
#define INGOT_ATTENTION_OPS_TD

// Element types an extra operand of `ingot.attention` may have (what a region
// can load with `ingot.region_load`).
def Ingot_RegionLoadable : AnyTypeOf<[I1, I8, I16, I32, I64, F32]>;

def Ingot_AttentionOp : Ingot_Op<"attention", [Pure, IsolatedFromAbove,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>,
    AllTypesMatch<["query", "result"]>,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "Paged multi-head attention over the KV cache, with optional mask and score regions";
  let description = [{
    Attention of the new tokens' queries (`[tokens, num_heads * head_dim]`)
    over the keys and values of layer `layer` in `cache`, for a batch of
    requests. Request `b` owns query rows `query_start[b] ..
    query_start[b+1]` (CSR offsets, `num_requests + 1` entries), has
    `seq_lens[b]` KV slots (including the new tokens, already written with
    `ingot.kv_write`) and finds KV slot `s` through
    `block_tables[b][s / block_size]`. Query heads share KV heads in groups of
    `num_heads / num_kv_heads` (GQA). Scores are `scale * dot(q, k)`.

    Indices seen by the regions: `b` is the request, `h` the query head, `q` the
    KV-slot index of the query token within its request (its absolute position in
    that request's KV: the last new token of a request has
    `q = seq_lens[b] - 1`), and `kv` the KV-slot index of the key. Because both
    are slot indices, chunked prefill and paging agree; RoPE positions are
    separate.

    - `mask (%b, %h, %q, %kv : index) -> i1`: key `kv` is visible to query `q`
      when the region yields true. Without a mask region every slot
      `0 .. seq_lens[b]-1` is visible.
    - `score (%s : f32, %b, %h, %q, %kv : index) -> f32`: transforms the scaled
      score before the softmax (soft-capping, ALiBi, ...).

    Region arguments print as `%b, %h, %q, %kv` (and `%score`). A region is
    isolated from above (its constants live inside it) and holds only `arith` and `math` ops,
    `ingot.region_load` (reads the `extra` operands) and `ingot.yield`, over the
    value types i1, i8..i64, index and f32.

    ```mlir
    %o = ingot.attention %q, %cache, %block_tables, %seq_lens, %query_start
           {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 2.500000e-01 : f32}
           : tensor<?x64xf32>, !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>,
             tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
         mask {
         ^bb0(%b: index, %h: index, %q: index, %kv: index):
           %visible = arith.cmpi ule, %kv, %q : index
           ingot.yield %visible : i1
         }
    ```
  }];
  let arguments = (ins Ingot_FloatTensor:$query, Ingot_KvCacheType:$cache,
                       Ingot_I32Matrix:$block_tables, Ingot_I32Vector:$seq_lens,
                       Ingot_I32Vector:$query_start,
                       Variadic<RankedTensorOf<[I1, I8, I16, I32, I64, F32]>>:$extra,
                       I32Attr:$layer, I32Attr:$num_heads, I32Attr:$num_kv_heads,
                       I32Attr:$head_dim, F32Attr:$scale);
  let results = (outs Ingot_FloatTensor:$result);
  let regions = (region MaxSizedRegion<1>:$mask, MaxSizedRegion<1>:$score);
  let assemblyFormat = [{
    $query `,` $cache `,` $block_tables `,` $seq_lens `,` $query_start
    (`extra` `(` $extra^ `:` type($extra) `)`)?
    attr-dict `:` type($query) `,` qualified(type($cache)) `,` type($block_tables) `,`
    type($seq_lens) `,` type($query_start)
    (`mask` $mask^)? (`score` $score^)?
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    /// Number of index arguments of the mask region: (b, h, q, kv).
    static constexpr unsigned kNumMaskArgs = 4;
    /// Number of arguments of the score region: (score, b, h, q, kv).
    static constexpr unsigned kNumScoreArgs = 5;
    bool hasMask() { return !getMask().empty(); }
    bool hasScore() { return !getScore().empty(); }
  }];
}

def Ingot_RegionLoadOp : Ingot_Op<"region_load", [Pure, HasParent<"AttentionOp">]> {
  let summary = "Loads one element of an extra operand inside an attention region";
  let description = [{
    Reads element `[indices...]` of the `operand_index`-th `extra` operand of the
    enclosing `ingot.attention` (0 is the first extra operand). The number of
    indices equals that operand's rank and the result type its element type.
    Indices outside the operand are undefined behaviour at run time.

    ```mlir
    %doc_q = ingot.region_load 0 [%b, %q] : i32
    ```
  }];
  let arguments = (ins I64Attr:$operand_index, Variadic<Index>:$indices);
  let results = (outs Ingot_RegionLoadable:$result);
  let assemblyFormat = "$operand_index `[` $indices `]` attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Ingot_YieldOp : Ingot_Op<"yield", [Pure, Terminator,
    HasParent<"AttentionOp">]> {
  let summary = "Returns the value of an attention mask or score region";
  let description = [{
    Terminates a `mask` region (one `i1`) or a `score` region (one `f32`).

    ```mlir
    ingot.yield %visible : i1
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ /* no values: verified by the parent */ }]>];
}

#endif // INGOT_ATTENTION_OPS_TD
