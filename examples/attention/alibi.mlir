// ALiBi (Press et al., "Train Short, Test Long"): a per-head linear bias on the distance
// between query and key, added to the score; with a causal mask.
//
// score' = score + slope(h) * (kv - q), slope(h) = 2^(-8 (h + 1) / num_heads). With 4 heads
// the exponent is -2 (h + 1), computed in the region with math.exp2; a model with
// non-standard slopes would pass them as an extra operand (`tensor<num_heads x f32>`) and
// read them with `ingot.region_load`.
//
// Round-tripped by test/lit/examples/attention-alibi.test.

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 4, head_dim = 16, element_type = f32>

// CHECK-LABEL: func.func @alibi
// CHECK: ingot.attention
// CHECK-SAME: mask {
// CHECK: arith.cmpi ule, %kv, %q : index
// CHECK: } score {
// CHECK-NEXT: ^bb0(%score: f32, %b: index, %h: index, %q: index, %kv: index):
// CHECK: %[[SLOPE:.*]] = math.exp2 %{{.*}} : f32
// CHECK: %[[DIST:.*]] = arith.subi %kv, %q : index
// CHECK: %[[BIAS:.*]] = arith.mulf %[[SLOPE]], %{{.*}} : f32
// CHECK-NEXT: %[[BIASED:.*]] = arith.addf %score, %[[BIAS]] : f32
// CHECK-NEXT: ingot.yield %[[BIASED]] : f32
func.func @alibi(%query: tensor<?x64xf32>, %cache: !cache, %block_tables: tensor<?x?xi32>,
                 %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>) -> tensor<?x64xf32> {
  %out = ingot.attention %query, %cache, %block_tables, %seq_lens, %query_start
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 4 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %causal = arith.cmpi ule, %kv, %q : index
    ingot.yield %causal : i1
  } score {
  ^bb0(%score: f32, %b: index, %h: index, %q: index, %kv: index):
    // slope = 2^(-2 (h + 1)) for 4 heads.
    %h64 = arith.index_cast %h : index to i64
    %hf = arith.sitofp %h64 : i64 to f32
    %one = arith.constant 1.0 : f32
    %minus_two = arith.constant -2.0 : f32
    %h1 = arith.addf %hf, %one : f32
    %exponent = arith.mulf %h1, %minus_two : f32
    %slope = math.exp2 %exponent : f32
    // kv - q <= 0 for every visible key: farther keys get a larger penalty.
    %dist = arith.subi %kv, %q : index
    %dist64 = arith.index_cast %dist : index to i64
    %distf = arith.sitofp %dist64 : i64 to f32
    %bias = arith.mulf %slope, %distf : f32
    %biased = arith.addf %score, %bias : f32
    ingot.yield %biased : f32
  }
  return %out : tensor<?x64xf32>
}
