// Causal attention: each query sees its own KV slot and every earlier slot of its request.
//
// `q` and `kv` are KV-slot indices within the request (absolute positions in the request's
// KV), so one mask serves prefill, chunked prefill and decode alike: a decode token at slot
// 41 sees slots 0..41 whether they were written in this step or long before.
//
// Round-tripped by test/lit/examples/attention-causal.test; the CHECK lines are what
// ingot-opt prints back.

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f16>

// CHECK-LABEL: func.func @causal
// CHECK: ingot.attention
// CHECK-SAME: mask {
// CHECK-NEXT: ^bb0(%b: index, %h: index, %q: index, %kv: index):
// CHECK-NEXT: %[[VISIBLE:.*]] = arith.cmpi ule, %kv, %q : index
// CHECK-NEXT: ingot.yield %[[VISIBLE]] : i1
// CHECK-NEXT: }
func.func @causal(%query: tensor<?x64xbf16>, %cache: !cache, %block_tables: tensor<?x?xi32>,
                  %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>) -> tensor<?x64xbf16> {
  %out = ingot.attention %query, %cache, %block_tables, %seq_lens, %query_start
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xbf16>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %q: index, %kv: index):
    // Visible unless the key lies in the query's future.
    %visible = arith.cmpi ule, %kv, %q : index
    ingot.yield %visible : i1
  }
  return %out : tensor<?x64xbf16>
}
