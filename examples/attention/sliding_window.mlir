// Sliding-window attention (Mistral, Gemma-2 local layers): causal, and only the last
// `window` KV slots before and including the query are visible.
//
// The window (4096 slots) is a constant of the region. A window that differs per request
// would be an extra operand read with `ingot.region_load` instead (see document_mask.mlir).
//
// Round-tripped by test/lit/examples/attention-sliding_window.test.

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 8, head_dim = 128, element_type = bf16>

// CHECK-LABEL: func.func @sliding_window
// CHECK: ingot.attention
// CHECK-SAME: mask {
// CHECK-NEXT: ^bb0(%b: index, %h: index, %q: index, %kv: index):
// CHECK-DAG: %[[WINDOW:.*]] = arith.constant 4096 : index
// CHECK-DAG: %[[CAUSAL:.*]] = arith.cmpi ule, %kv, %q : index
// CHECK: %[[END:.*]] = arith.addi %kv, %[[WINDOW]] : index
// CHECK-NEXT: %[[NEAR:.*]] = arith.cmpi ult, %q, %[[END]] : index
// CHECK-NEXT: %[[VISIBLE:.*]] = arith.andi %[[CAUSAL]], %[[NEAR]] : i1
// CHECK-NEXT: ingot.yield %[[VISIBLE]] : i1
func.func @sliding_window(%query: tensor<?x4096xbf16>, %cache: !cache, %block_tables: tensor<?x?xi32>,
                          %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>) -> tensor<?x4096xbf16> {
  %out = ingot.attention %query, %cache, %block_tables, %seq_lens, %query_start
      {layer = 0 : i32, num_heads = 32 : i32, num_kv_heads = 8 : i32, head_dim = 128 : i32, scale = 0.0883883461 : f32}
      : tensor<?x4096xbf16>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %window = arith.constant 4096 : index
    %causal = arith.cmpi ule, %kv, %q : index
    // q - kv < window, written without a subtraction that could wrap: q < kv + window.
    %end = arith.addi %kv, %window : index
    %near = arith.cmpi ult, %q, %end : index
    %visible = arith.andi %causal, %near : i1
    ingot.yield %visible : i1
  }
  return %out : tensor<?x4096xbf16>
}
