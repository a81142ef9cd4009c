// ingot-fuse-elementwise fuses each residual add into the rms_norm of its sum, at the
// norm's place: the sum's other readers (the next residual add) read the fused op's sum.
// It leaves a pair alone when the sum is read before the norm, an rms_norm of anything
// but an add, and a per-head rms_norm (add_rms_norm normalizes whole rows).
// RUN: ingot-opt %s --split-input-file --ingot-fuse-elementwise | FileCheck %s

// A decoder layer's two residual adds, each followed by a norm.
// CHECK-LABEL: func.func @layer
// CHECK-SAME: (%[[H0:.*]]: tensor<?x8xf32>, %[[ATTN:.*]]: tensor<?x8xf32>, %[[MLP:.*]]: tensor<?x8xf32>)
// CHECK: %[[W1:.*]] = ingot.weight "post_attention_layernorm"
// CHECK: %[[H1:.*]], %[[Y1:.*]] = ingot.add_rms_norm %[[ATTN]], %[[H0]], %[[W1]] {epsilon = 9.99999974E-6 : f32} : tensor<?x8xf32>, tensor<8xf32>
// CHECK-NOT: ingot.add
// CHECK: %[[W2:.*]] = ingot.weight "next_input_layernorm"
// CHECK: %[[H2:.*]], %[[Y2:.*]] = ingot.add_rms_norm %[[MLP]], %[[H1]], %[[W2]] {epsilon = 9.99999974E-6 : f32}
// CHECK: return %[[Y1]], %[[H2]], %[[Y2]]
func.func @layer(%h0: tensor<?x8xf32>, %attn: tensor<?x8xf32>, %mlp: tensor<?x8xf32>)
    -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %h1 = ingot.add %h0, %attn : tensor<?x8xf32>
  %w1 = ingot.weight "post_attention_layernorm" {handle = 0 : i64} : tensor<8xf32>
  %y1 = ingot.rms_norm %h1, %w1 {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %h2 = ingot.add %h1, %mlp : tensor<?x8xf32>
  %w2 = ingot.weight "next_input_layernorm" {handle = 1 : i64} : tensor<8xf32>
  %y2 = ingot.rms_norm %h2, %w2 {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  return %y1, %h2, %y2 : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// The sum is read before the norm: the fused op could not take the norm's place.
// CHECK-LABEL: func.func @read_before
// CHECK: ingot.add
// CHECK: ingot.silu_mul
// CHECK: ingot.rms_norm
// CHECK-NOT: ingot.add_rms_norm
func.func @read_before(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %s = ingot.add %a, %b : tensor<?x8xf32>
  %m = ingot.silu_mul %s, %b : tensor<?x8xf32>
  %w = ingot.weight "norm" {handle = 0 : i64} : tensor<8xf32>
  %y = ingot.rms_norm %s, %w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  return %m, %y : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// A per-head norm of a sum ([4] weight on rows of 8: two groups) stays unfused.
// CHECK-LABEL: func.func @per_head
// CHECK: ingot.add
// CHECK-NEXT: ingot.rms_norm
// CHECK-NOT: ingot.add_rms_norm
func.func @per_head(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>, %w: tensor<4xf32>) -> tensor<?x8xf32> {
  %s = ingot.add %a, %b : tensor<?x8xf32>
  %y = ingot.rms_norm %s, %w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<4xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Two norms of one sum: the first takes the add; the second reads the fused op's sum. An
// rms_norm of a function argument stays.
// CHECK-LABEL: func.func @two_norms
// CHECK: %[[S:.*]], %[[Y1:.*]] = ingot.add_rms_norm
// CHECK-NEXT: %[[Y2:.*]] = ingot.rms_norm %[[S]]
// CHECK-NEXT: ingot.rms_norm %arg0
func.func @two_norms(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>, %w: tensor<8xf32>)
    -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %s = ingot.add %a, %b : tensor<?x8xf32>
  %y1 = ingot.rms_norm %s, %w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %y2 = ingot.rms_norm %s, %w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %y3 = ingot.rms_norm %a, %w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  return %y1, %y2, %y3 : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// A layer's rope of the queries, rope of the keys and KV write: one rope_kv_write at the
// write's place, with the queries' heads, the keys' heads as num_kv_heads, and the layer.
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
// CHECK-LABEL: func.func @attention_block
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<?x64xf32>, %[[K:[^:]*]]: tensor<?x32xf32>, %[[V:[^:]*]]: tensor<?x32xf32>, %[[POS:[^:]*]]: tensor<?xi32>, %[[C:[^:]*]]: !ingot.kv_cache
// CHECK-NOT: ingot.rope %
// CHECK: %[[QR:.*]], %[[KR:.*]], %[[C1:.*]] = ingot.rope_kv_write %[[Q]], %[[K]], %[[V]], %[[POS]], %[[C]], %{{.*}} {head_dim = 16 : i32, layer = 1 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, scaling = #ingot.rope_scaling<llama3, {{.*}}>, theta = 5.000000e+05 : f64}
// CHECK-NOT: ingot.kv_write
// CHECK: ingot.attention %[[QR]], %[[C1]]
func.func @attention_block(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                           %pos: tensor<?xi32>, %cache: !cache, %slots: tensor<?xi32>,
                           %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) -> tensor<?x64xf32> {
  %qr = ingot.rope %q, %pos {num_heads = 4 : i32, head_dim = 16 : i32, theta = 5.0e+05 : f64,
      scaling = #ingot.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>}
      : tensor<?x64xf32>, tensor<?xi32>
  %kr = ingot.rope %k, %pos {num_heads = 2 : i32, head_dim = 16 : i32, theta = 5.0e+05 : f64,
      scaling = #ingot.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>}
      : tensor<?x32xf32>, tensor<?xi32>
  %c1 = ingot.kv_write %cache, %kr, %v, %slots {layer = 1 : i32} : !cache, tensor<?x32xf32>, tensor<?xi32>
  %a = ingot.attention %qr, %c1, %bt, %sl, %qs
      {layer = 1 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return %a : tensor<?x64xf32>
}

// -----

// Frequency factors (Llama 3 GGUFs' rope_freqs) travel with the fused op; ropes with other
// factors than the keys' stay apart.
!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f32>
// CHECK-LABEL: func.func @factors
// CHECK-SAME: %[[F:[^:]*]]: tensor<8xf32>
// CHECK: ingot.rope_kv_write %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} factors(%[[F]] : tensor<8xf32>)
// CHECK-LABEL: func.func @other_factors
// CHECK-NOT: ingot.rope_kv_write
func.func @factors(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                   %pos: tensor<?xi32>, %cache: !cache, %slots: tensor<?xi32>,
                   %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>, %f: tensor<8xf32>) -> tensor<?x64xf32> {
  %qr = ingot.rope %q, %pos factors(%f : tensor<8xf32>) {num_heads = 4 : i32, head_dim = 16 : i32, theta = 5.0e+05 : f64} : tensor<?x64xf32>, tensor<?xi32>
  %kr = ingot.rope %k, %pos factors(%f : tensor<8xf32>) {num_heads = 2 : i32, head_dim = 16 : i32, theta = 5.0e+05 : f64} : tensor<?x32xf32>, tensor<?xi32>
  %c1 = ingot.kv_write %cache, %kr, %v, %slots {layer = 0 : i32} : !cache, tensor<?x32xf32>, tensor<?xi32>
  %a = ingot.attention %qr, %c1, %bt, %sl, %qs
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return %a : tensor<?x64xf32>
}
func.func @other_factors(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                         %pos: tensor<?xi32>, %cache: !cache, %slots: tensor<?xi32>,
                         %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>, %f: tensor<8xf32>) -> tensor<?x64xf32> {
  %qr = ingot.rope %q, %pos factors(%f : tensor<8xf32>) {num_heads = 4 : i32, head_dim = 16 : i32, theta = 5.0e+05 : f64} : tensor<?x64xf32>, tensor<?xi32>
  %kr = ingot.rope %k, %pos {num_heads = 2 : i32, head_dim = 16 : i32, theta = 5.0e+05 : f64} : tensor<?x32xf32>, tensor<?xi32>
  %c1 = ingot.kv_write %cache, %kr, %v, %slots {layer = 0 : i32} : !cache, tensor<?x32xf32>, tensor<?xi32>
  %a = ingot.attention %qr, %c1, %bt, %sl, %qs
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return %a : tensor<?x64xf32>
}

// -----

// Left alone: rotated keys read by something besides the write, and a query rope with
// another theta than the keys'.
!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f32>
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: ingot.rope_kv_write
// CHECK-LABEL: func.func @other_theta
// CHECK-NOT: ingot.rope_kv_write
func.func @not_fused(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                     %pos: tensor<?xi32>, %cache: !cache, %slots: tensor<?xi32>,
                     %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) -> (tensor<?x64xf32>, tensor<?x32xf32>) {
  %qr = ingot.rope %q, %pos {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64} : tensor<?x64xf32>, tensor<?xi32>
  %kr = ingot.rope %k, %pos {num_heads = 2 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64} : tensor<?x32xf32>, tensor<?xi32>
  %c1 = ingot.kv_write %cache, %kr, %v, %slots {layer = 0 : i32} : !cache, tensor<?x32xf32>, tensor<?xi32>
  %a = ingot.attention %qr, %c1, %bt, %sl, %qs
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return %a, %kr : tensor<?x64xf32>, tensor<?x32xf32>
}
func.func @other_theta(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                       %pos: tensor<?xi32>, %cache: !cache, %slots: tensor<?xi32>,
                       %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) -> tensor<?x64xf32> {
  %qr = ingot.rope %q, %pos {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+06 : f64} : tensor<?x64xf32>, tensor<?xi32>
  %kr = ingot.rope %k, %pos {num_heads = 2 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64} : tensor<?x32xf32>, tensor<?xi32>
  %c1 = ingot.kv_write %cache, %kr, %v, %slots {layer = 0 : i32} : !cache, tensor<?x32xf32>, tensor<?xi32>
  %a = ingot.attention %qr, %c1, %bt, %sl, %qs
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return %a : tensor<?x64xf32>
}
