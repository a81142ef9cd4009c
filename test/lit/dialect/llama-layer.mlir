// One whole Llama decoder layer as a serving step over a dynamic number of tokens with
// paged KV operands round-trips (custom and generic form), with the dataflow intact.
// q/k/v carry biases (Qwen2-style, optional in Llama); activations are bf16, the cache f16.
// RUN: ingot-opt %s | ingot-opt | FileCheck %s
// RUN: ingot-opt %s --mlir-print-op-generic | ingot-opt | FileCheck %s

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 32, element_type = f16>

// CHECK-LABEL: func.func @llama_layer
// CHECK-SAME: (%[[H:[^:]*]]: tensor<?x128xbf16>, %[[POS:[^:]*]]: tensor<?xi32>, %[[CACHE:[^:]*]]: !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 32, element_type = f16>, %[[BT:[^:]*]]: tensor<?x?xi32>, %[[SL:[^:]*]]: tensor<?xi32>, %[[QS:[^:]*]]: tensor<?xi32>, %[[SLOTS:[^:]*]]: tensor<?xi32>)
// CHECK-SAME: -> (tensor<?x128xbf16>, !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 32, element_type = f16>)
func.func @llama_layer(%h: tensor<?x128xbf16>, %positions: tensor<?xi32>, %cache: !cache,
                       %block_tables: tensor<?x?xi32>, %seq_lens: tensor<?xi32>,
                       %query_start: tensor<?xi32>, %slot_mapping: tensor<?xi32>)
    -> (tensor<?x128xbf16>, !cache) {
  // Attention block.
  // CHECK: %[[LN1W:.*]] = ingot.weight "model.layers.0.input_layernorm.weight" {handle = 0 : i64} : tensor<128xbf16>
  // CHECK: %[[X:.*]] = ingot.rms_norm %[[H]], %[[LN1W]] {epsilon = 9.99999997E-7 : f32} : tensor<?x128xbf16>, tensor<128xbf16>
  %ln1_w = ingot.weight "model.layers.0.input_layernorm.weight" {handle = 0 : i64} : tensor<128xbf16>
  %x = ingot.rms_norm %h, %ln1_w {epsilon = 1.0e-06 : f32} : tensor<?x128xbf16>, tensor<128xbf16>

  // CHECK: %[[WQ:.*]] = ingot.weight "model.layers.0.self_attn.q_proj.weight" {handle = 1 : i64} : tensor<128x128xbf16>
  // CHECK: %[[BQ:.*]] = ingot.weight "model.layers.0.self_attn.q_proj.bias" {handle = 2 : i64} : tensor<128xbf16>
  // CHECK: %[[Q:.*]] = ingot.linear %[[X]], %[[WQ]] bias(%[[BQ]] : tensor<128xbf16>) : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %wq = ingot.weight "model.layers.0.self_attn.q_proj.weight" {handle = 1 : i64} : tensor<128x128xbf16>
  %bq = ingot.weight "model.layers.0.self_attn.q_proj.bias" {handle = 2 : i64} : tensor<128xbf16>
  %q = ingot.linear %x, %wq bias(%bq : tensor<128xbf16>) : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  // CHECK: %[[K:.*]] = ingot.linear %[[X]], %{{.*}} bias(%{{.*}} : tensor<64xbf16>) : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %wk = ingot.weight "model.layers.0.self_attn.k_proj.weight" {handle = 3 : i64} : tensor<64x128xbf16>
  %bk = ingot.weight "model.layers.0.self_attn.k_proj.bias" {handle = 4 : i64} : tensor<64xbf16>
  %k = ingot.linear %x, %wk bias(%bk : tensor<64xbf16>) : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  // CHECK: %[[V:.*]] = ingot.linear %[[X]], %{{.*}} bias(%{{.*}} : tensor<64xbf16>) : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>
  %wv = ingot.weight "model.layers.0.self_attn.v_proj.weight" {handle = 5 : i64} : tensor<64x128xbf16>
  %bv = ingot.weight "model.layers.0.self_attn.v_proj.bias" {handle = 6 : i64} : tensor<64xbf16>
  %v = ingot.linear %x, %wv bias(%bv : tensor<64xbf16>) : tensor<?x128xbf16>, tensor<64x128xbf16> -> tensor<?x64xbf16>

  // CHECK: %[[QR:.*]] = ingot.rope %[[Q]], %[[POS]] {head_dim = 32 : i32, num_heads = 4 : i32, scaling = #ingot.rope_scaling<llama3, factor = 8.000000e+00, low_freq_factor = 1.000000e+00, high_freq_factor = 4.000000e+00, original_max_position = 8192>, theta = 5.000000e+05 : f64} : tensor<?x128xbf16>, tensor<?xi32>
  // CHECK: %[[KR:.*]] = ingot.rope %[[K]], %[[POS]] {head_dim = 32 : i32, num_heads = 2 : i32, {{.*}}} : tensor<?x64xbf16>, tensor<?xi32>
  %q_rot = ingot.rope %q, %positions {num_heads = 4 : i32, head_dim = 32 : i32, theta = 5.0e+05 : f64,
      scaling = #ingot.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>}
      : tensor<?x128xbf16>, tensor<?xi32>
  %k_rot = ingot.rope %k, %positions {num_heads = 2 : i32, head_dim = 32 : i32, theta = 5.0e+05 : f64,
      scaling = #ingot.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>}
      : tensor<?x64xbf16>, tensor<?xi32>

  // New K/V go to their slots; attention then reads the request's whole paged KV.
  // CHECK: %[[CACHE1:.*]] = ingot.kv_write %[[CACHE]], %[[KR]], %[[V]], %[[SLOTS]] {layer = 0 : i32} : !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 32, element_type = f16>, tensor<?x64xbf16>, tensor<?xi32>
  %cache1 = ingot.kv_write %cache, %k_rot, %v, %slot_mapping {layer = 0 : i32} : !cache, tensor<?x64xbf16>, tensor<?xi32>
  // CHECK: %[[ATTN:.*]] = ingot.attention %[[QR]], %[[CACHE1]], %[[BT]], %[[SL]], %[[QS]] {head_dim = 32 : i32, layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, scale = 0.176776692 : f32} : tensor<?x128xbf16>, !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 32, element_type = f16>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32> mask {
  // CHECK-NEXT: ^bb0(%b: index, %h: index, %q: index, %kv: index):
  // CHECK-NEXT: %[[CAUSAL:.*]] = arith.cmpi ule, %kv, %q : index
  // CHECK-NEXT: ingot.yield %[[CAUSAL]] : i1
  // CHECK-NEXT: }
  %attn = ingot.attention %q_rot, %cache1, %block_tables, %seq_lens, %query_start
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 32 : i32, scale = 0.176776695 : f32}
      : tensor<?x128xbf16>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %hd: index, %qi: index, %kv: index):
    %causal = arith.cmpi ule, %kv, %qi : index
    ingot.yield %causal : i1
  }
  // CHECK: %[[O:.*]] = ingot.linear %[[ATTN]], %{{.*}} : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  // CHECK: %[[H1:.*]] = ingot.add %[[H]], %[[O]] : tensor<?x128xbf16>
  %wo = ingot.weight "model.layers.0.self_attn.o_proj.weight" {handle = 7 : i64} : tensor<128x128xbf16>
  %o = ingot.linear %attn, %wo : tensor<?x128xbf16>, tensor<128x128xbf16> -> tensor<?x128xbf16>
  %h1 = ingot.add %h, %o : tensor<?x128xbf16>

  // MLP block.
  // CHECK: %[[Y:.*]] = ingot.rms_norm %[[H1]], %{{.*}} {epsilon = 9.99999997E-7 : f32}
  // CHECK: %[[GATE:.*]] = ingot.linear %[[Y]], %{{.*}} : tensor<?x128xbf16>, tensor<256x128xbf16> -> tensor<?x256xbf16>
  // CHECK: %[[UP:.*]] = ingot.linear %[[Y]], %{{.*}} : tensor<?x128xbf16>, tensor<256x128xbf16> -> tensor<?x256xbf16>
  // CHECK: %[[ACT:.*]] = ingot.silu_mul %[[GATE]], %[[UP]] : tensor<?x256xbf16>
  // CHECK: %[[DOWN:.*]] = ingot.linear %[[ACT]], %{{.*}} : tensor<?x256xbf16>, tensor<128x256xbf16> -> tensor<?x128xbf16>
  // CHECK: %[[H2:.*]] = ingot.add %[[H1]], %[[DOWN]] : tensor<?x128xbf16>
  // CHECK: return %[[H2]], %[[CACHE1]] : tensor<?x128xbf16>, !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 32, element_type = f16>
  %ln2_w = ingot.weight "model.layers.0.post_attention_layernorm.weight" {handle = 8 : i64} : tensor<128xbf16>
  %y = ingot.rms_norm %h1, %ln2_w {epsilon = 1.0e-06 : f32} : tensor<?x128xbf16>, tensor<128xbf16>
  %wg = ingot.weight "model.layers.0.mlp.gate_proj.weight" {handle = 9 : i64} : tensor<256x128xbf16>
  %gate = ingot.linear %y, %wg : tensor<?x128xbf16>, tensor<256x128xbf16> -> tensor<?x256xbf16>
  %wu = ingot.weight "model.layers.0.mlp.up_proj.weight" {handle = 10 : i64} : tensor<256x128xbf16>
  %up = ingot.linear %y, %wu : tensor<?x128xbf16>, tensor<256x128xbf16> -> tensor<?x256xbf16>
  %act = ingot.silu_mul %gate, %up : tensor<?x256xbf16>
  %wd = ingot.weight "model.layers.0.mlp.down_proj.weight" {handle = 11 : i64} : tensor<128x256xbf16>
  %down = ingot.linear %act, %wd : tensor<?x256xbf16>, tensor<128x256xbf16> -> tensor<?x128xbf16>
  %h2 = ingot.add %h1, %down : tensor<?x128xbf16>
  return %h2, %cache1 : tensor<?x128xbf16>, !cache
}
