// Speculative-decoding tree mask: the target model verifies a tree of draft tokens in one
// pass; each tree node sees the request's accepted prefix and its own ancestors only.
//
// The tree of request b occupies KV slots tree_start[b] .. tree_start[b] + n - 1 (n <= 64
// nodes, in an order where a parent precedes its children). Extra operands:
//   #0 `%tree_start : tensor<?xi32>`   first KV slot of request b's tree;
//   #1 `%tree_bits : tensor<?x?xi64>`  tree_bits[b][i] is a bit set over nodes: bit j is
//                                      set when node j is node i or one of its ancestors.
// Siblings share a RoPE position (that is in `positions`, not here) but have different KV
// slots, which is why masks see slot indices.
//
// Round-tripped by test/lit/examples/attention-tree_mask.test.

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f16>

// CHECK-LABEL: func.func @tree_mask
// CHECK: ingot.attention
// CHECK-SAME: extra(%{{.*}}, %{{.*}} : tensor<?xi32>, tensor<?x?xi64>)
// CHECK-SAME: mask {
// CHECK-NEXT: ^bb0(%b: index, %h: index, %q: index, %kv: index):
// CHECK: %[[START32:.*]] = ingot.region_load 0[%b] : i32
// CHECK-NEXT: %[[START:.*]] = arith.index_cast %[[START32]] : i32 to index
// CHECK-NEXT: %[[PREFIX:.*]] = arith.cmpi ult, %kv, %[[START]] : index
// CHECK-NEXT: %[[NODE:.*]] = arith.subi %q, %[[START]] : index
// CHECK-NEXT: %[[WORD:.*]] = ingot.region_load 1[%b, %[[NODE]]] : i64
// CHECK: %[[SHIFTED:.*]] = arith.shrui %[[WORD]], %{{.*}} : i64
// CHECK-NEXT: %[[BIT:.*]] = arith.trunci %[[SHIFTED]] : i64 to i1
// CHECK-NEXT: %[[VISIBLE:.*]] = arith.select %[[PREFIX]], %{{.*}}, %[[BIT]] : i1
// CHECK-NEXT: ingot.yield %[[VISIBLE]] : i1
func.func @tree_mask(%query: tensor<?x64xf16>, %cache: !cache, %block_tables: tensor<?x?xi32>,
                     %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>,
                     %tree_start: tensor<?xi32>, %tree_bits: tensor<?x?xi64>) -> tensor<?x64xf16> {
  %out = ingot.attention %query, %cache, %block_tables, %seq_lens, %query_start
      extra(%tree_start, %tree_bits : tensor<?xi32>, tensor<?x?xi64>)
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf16>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    %true = arith.constant true
    %start32 = ingot.region_load 0 [%b] : i32
    %start = arith.index_cast %start32 : i32 to index
    // The accepted prefix is visible to every tree node.
    %in_prefix = arith.cmpi ult, %kv, %start : index
    // Inside the tree: test bit (kv - start) of the query node's ancestor set.
    %node = arith.subi %q, %start : index
    %word = ingot.region_load 1 [%b, %node] : i64
    %j = arith.subi %kv, %start : index
    %j64 = arith.index_cast %j : index to i64
    %shifted = arith.shrui %word, %j64 : i64
    %bit = arith.trunci %shifted : i64 to i1
    // select, not ori: for prefix keys the shift amount is out of range and %bit unused.
    %visible = arith.select %in_prefix, %true, %bit : i1
    ingot.yield %visible : i1
  }
  return %out : tensor<?x64xf16>
}
