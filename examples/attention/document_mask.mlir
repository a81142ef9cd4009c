// Document masking: several documents packed into one request attend causally, each only
// within itself.
//
// The extra operand `%doc_ids : tensor<?x?xi32>` holds, for request b and KV slot s, the
// document of that slot: doc_ids[b][s]. The region reads it twice with
// `ingot.region_load 0 [...]` (0 = the first extra operand), once at the query's slot and
// once at the key's. Both indices are KV-slot indices, so the table is the same whether the
// request is prefilled at once or in chunks.
//
// Round-tripped by test/lit/examples/attention-document_mask.test.

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f32>

// CHECK-LABEL: func.func @document_mask
// CHECK: ingot.attention
// CHECK-SAME: extra(%{{.*}} : tensor<?x?xi32>)
// CHECK-SAME: mask {
// CHECK-NEXT: ^bb0(%b: index, %h: index, %q: index, %kv: index):
// CHECK-NEXT: %[[CAUSAL:.*]] = arith.cmpi ule, %kv, %q : index
// CHECK-NEXT: %[[DQ:.*]] = ingot.region_load 0[%b, %q] : i32
// CHECK-NEXT: %[[DK:.*]] = ingot.region_load 0[%b, %kv] : i32
// CHECK-NEXT: %[[SAME:.*]] = arith.cmpi eq, %[[DQ]], %[[DK]] : i32
// CHECK-NEXT: %[[VISIBLE:.*]] = arith.andi %[[CAUSAL]], %[[SAME]] : i1
// CHECK-NEXT: ingot.yield %[[VISIBLE]] : i1
func.func @document_mask(%query: tensor<?x64xf32>, %cache: !cache, %block_tables: tensor<?x?xi32>,
                         %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>,
                         %doc_ids: tensor<?x?xi32>) -> tensor<?x64xf32> {
  %out = ingot.attention %query, %cache, %block_tables, %seq_lens, %query_start
      extra(%doc_ids : tensor<?x?xi32>)
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %causal = arith.cmpi ule, %kv, %q : index
    %doc_q = ingot.region_load 0 [%b, %q] : i32
    %doc_kv = ingot.region_load 0 [%b, %kv] : i32
    %same = arith.cmpi eq, %doc_q, %doc_kv : i32
    %visible = arith.andi %causal, %same : i1
    ingot.yield %visible : i1
  }
  return %out : tensor<?x64xf32>
}
