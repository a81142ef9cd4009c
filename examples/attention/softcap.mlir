// Tanh soft-capping of attention scores (Gemma-2): score' = cap * tanh(score / cap), so no
// score exceeds +-cap; with a causal mask.
//
// `score` is already multiplied by the op's `scale` (here 1/sqrt(256) = 0.0625), as in
// Gemma-2 where soft-capping follows the query scaling. cap = 50.
//
// Round-tripped by test/lit/examples/attention-softcap.test. Canonicalization keeps this
// region: tanh is not linear in the score.

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 4, head_dim = 256, element_type = bf16>

// CHECK-LABEL: func.func @softcap
// CHECK: ingot.attention
// CHECK-SAME: scale = 6.250000e-02 : f32
// CHECK-SAME: mask {
// CHECK: arith.cmpi ule, %kv, %q : index
// CHECK: } score {
// CHECK-NEXT: ^bb0(%score: f32, %b: index, %h: index, %q: index, %kv: index):
// CHECK-NEXT: %[[CAP:.*]] = arith.constant 5.000000e+01 : f32
// CHECK-NEXT: %[[X:.*]] = arith.divf %score, %[[CAP]] : f32
// CHECK-NEXT: %[[T:.*]] = math.tanh %[[X]] : f32
// CHECK-NEXT: %[[CAPPED:.*]] = arith.mulf %[[T]], %[[CAP]] : f32
// CHECK-NEXT: ingot.yield %[[CAPPED]] : f32
func.func @softcap(%query: tensor<?x2048xbf16>, %cache: !cache, %block_tables: tensor<?x?xi32>,
                   %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>) -> tensor<?x2048xbf16> {
  %out = ingot.attention %query, %cache, %block_tables, %seq_lens, %query_start
      {layer = 0 : i32, num_heads = 8 : i32, num_kv_heads = 4 : i32, head_dim = 256 : i32, scale = 0.0625 : f32}
      : tensor<?x2048xbf16>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %causal = arith.cmpi ule, %kv, %q : index
    ingot.yield %causal : i1
  } score {
  ^bb0(%score: f32, %b: index, %h: index, %q: index, %kv: index):
    %cap = arith.constant 50.0 : f32
    %x = arith.divf %score, %cap : f32
    %t = math.tanh %x : f32
    %capped = arith.mulf %t, %cap : f32
    ingot.yield %capped : f32
  }
  return %out : tensor<?x2048xbf16>
}
