// Chunked local attention (Llama 4's local layers): the sequence is cut into chunks of
// 8192 KV slots; a query sees the earlier slots of its own chunk only.
//
// visible(q, kv) = kv <= q  and  q / 8192 == kv / 8192
//
// This is the worked example of docs/attention-variants.md. Round-tripped by
// test/lit/examples/attention-chunked_local.test.

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 8, head_dim = 128, element_type = bf16>

// CHECK-LABEL: func.func @chunked_local
// CHECK: ingot.attention
// CHECK-SAME: mask {
// CHECK-NEXT: ^bb0(%b: index, %h: index, %q: index, %kv: index):
// CHECK-DAG: %[[CHUNK:.*]] = arith.constant 8192 : index
// CHECK-DAG: %[[CAUSAL:.*]] = arith.cmpi ule, %kv, %q : index
// CHECK: %[[QC:.*]] = arith.divui %q, %[[CHUNK]] : index
// CHECK-NEXT: %[[KC:.*]] = arith.divui %kv, %[[CHUNK]] : index
// CHECK-NEXT: %[[SAME:.*]] = arith.cmpi eq, %[[QC]], %[[KC]] : index
// CHECK-NEXT: %[[VISIBLE:.*]] = arith.andi %[[CAUSAL]], %[[SAME]] : i1
// CHECK-NEXT: ingot.yield %[[VISIBLE]] : i1
func.func @chunked_local(%query: tensor<?x5120xbf16>, %cache: !cache, %block_tables: tensor<?x?xi32>,
                         %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>) -> tensor<?x5120xbf16> {
  %out = ingot.attention %query, %cache, %block_tables, %seq_lens, %query_start
      {layer = 0 : i32, num_heads = 40 : i32, num_kv_heads = 8 : i32, head_dim = 128 : i32, scale = 0.0883883461 : f32}
      : tensor<?x5120xbf16>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %chunk = arith.constant 8192 : index
    %causal = arith.cmpi ule, %kv, %q : index
    %q_chunk = arith.divui %q, %chunk : index
    %kv_chunk = arith.divui %kv, %chunk : index
    %same = arith.cmpi eq, %q_chunk, %kv_chunk : index
    %visible = arith.andi %causal, %same : i1
    ingot.yield %visible : i1
  }
  return %out : tensor<?x5120xbf16>
}
