// Every ingot op, type and attribute prints in a form that parses back to the same IR,
// in the custom and in the generic form.
// RUN: ingot-opt %s | ingot-opt | FileCheck %s
// RUN: ingot-opt %s --mlir-print-op-generic | ingot-opt | FileCheck %s

!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>

// CHECK-LABEL: func.func @kv_cache_types
// CHECK-SAME: !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
// CHECK-SAME: !ingot.kv_cache<num_layers = 30, num_kv_heads = 3, head_dim = 64, block_size = 32, element_type = f16>
// CHECK-SAME: !ingot.kv_cache<num_layers = 1, num_kv_heads = 8, head_dim = 128, element_type = bf16>
// CHECK-SAME: !ingot.kv_cache<num_layers = 4, num_kv_heads = 1, head_dim = 64, block_size = 8, element_type = f8E4M3FN>
func.func @kv_cache_types(
    %a: !cache,
    %b: !ingot.kv_cache<num_layers = 30, num_kv_heads = 3, head_dim = 64, block_size = 32, element_type = f16>,
    %c: !ingot.kv_cache<num_layers = 1, num_kv_heads = 8, head_dim = 128, block_size = 16, element_type = bf16>,
    %d: !ingot.kv_cache<num_layers = 4, num_kv_heads = 1, head_dim = 64, block_size = 8, element_type = f8E4M3FN>) {
  return
}

// CHECK-LABEL: func.func @weight_and_embedding
func.func @weight_and_embedding(%tokens: tensor<?xi32>, %fixed: tensor<7xi32>) -> (tensor<?x64xf32>, tensor<7x64xbf16>) {
  // CHECK: %[[T:.*]] = ingot.weight "model.embed_tokens.weight" {handle = 0 : i64} : tensor<256x64xf32>
  %table = ingot.weight "model.embed_tokens.weight" {handle = 0 : i64} : tensor<256x64xf32>
  // CHECK: ingot.embedding %{{.*}}, %[[T]] : tensor<?xi32>, tensor<256x64xf32> -> tensor<?x64xf32>
  %h = ingot.embedding %tokens, %table : tensor<?xi32>, tensor<256x64xf32> -> tensor<?x64xf32>
  %bf = ingot.weight "bf16.embed" {handle = 1 : i64} : tensor<256x64xbf16>
  // CHECK: ingot.embedding %{{.*}} : tensor<7xi32>, tensor<256x64xbf16> -> tensor<7x64xbf16>
  %s = ingot.embedding %fixed, %bf : tensor<7xi32>, tensor<256x64xbf16> -> tensor<7x64xbf16>
  return %h, %s : tensor<?x64xf32>, tensor<7x64xbf16>
}

// CHECK-LABEL: func.func @norms
func.func @norms(%x: tensor<?x64xf32>, %y: tensor<5x64xbf16>) -> (tensor<?x64xf32>, tensor<5x64xbf16>) {
  %w = ingot.weight "norm.weight" {handle = 0 : i64} : tensor<64xf32>
  %wb = ingot.weight "norm.weight.bf16" {handle = 1 : i64} : tensor<64xbf16>
  %b = ingot.weight "norm.bias" {handle = 2 : i64} : tensor<64xbf16>
  // CHECK: ingot.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.99999974E-6 : f32} : tensor<?x64xf32>, tensor<64xf32>
  %n = ingot.rms_norm %x, %w {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<64xf32>
  // A per-head norm: a [16] weight on rows of 4 heads.
  %wh = ingot.weight "q_norm.weight" {handle = 3 : i64} : tensor<16xf32>
  // CHECK: ingot.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.99999997E-7 : f32} : tensor<?x64xf32>, tensor<16xf32>
  %nh = ingot.rms_norm %n, %wh {epsilon = 1.0e-06 : f32} : tensor<?x64xf32>, tensor<16xf32>
  // CHECK: ingot.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999997E-7 : f32} : tensor<5x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
  %l = ingot.layer_norm %y, %wb, %b {epsilon = 1.0e-06 : f32} : tensor<5x64xbf16>, tensor<64xbf16>, tensor<64xbf16>
  return %nh, %l : tensor<?x64xf32>, tensor<5x64xbf16>
}

// CHECK-LABEL: func.func @rope_kv_write
func.func @rope_kv_write(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>, %pos: tensor<?xi32>,
                         %cache: !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>,
                         %slots: tensor<?xi32>) -> (tensor<?x64xf32>, !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>) {
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}} = ingot.rope_kv_write %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {head_dim = 16 : i32, layer = 1 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, theta = 1.000000e+04 : f64} : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?xi32>, !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
  %qr, %kr, %c = ingot.rope_kv_write %q, %k, %v, %pos, %cache, %slots
      {num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64, layer = 1 : i32}
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?xi32>, !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
  return %qr, %c : tensor<?x64xf32>, !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
}

// CHECK-LABEL: func.func @add_rms_norm
func.func @add_rms_norm(%x: tensor<?x64xbf16>, %r: tensor<?x64xbf16>, %w: tensor<64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>) {
  // CHECK: %{{.*}}, %{{.*}} = ingot.add_rms_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999974E-6 : f32} : tensor<?x64xbf16>, tensor<64xbf16>
  %s, %y = ingot.add_rms_norm %x, %r, %w {epsilon = 1.0e-05 : f32} : tensor<?x64xbf16>, tensor<64xbf16>
  return %s, %y : tensor<?x64xbf16>, tensor<?x64xbf16>
}

// CHECK-LABEL: func.func @linear_plain
func.func @linear_plain(%x: tensor<?x64xf32>, %xb: tensor<?x64xbf16>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x128xbf16>) {
  %wq = ingot.weight "q_proj.weight" {handle = 0 : i64} : tensor<64x64xf32>
  %wk = ingot.weight "k_proj.weight" {handle = 1 : i64} : tensor<32x64xf32>
  %bk = ingot.weight "k_proj.bias" {handle = 2 : i64} : tensor<32xf32>
  %wb = ingot.weight "up.weight" {handle = 3 : i64} : tensor<128x64xf16>
  // CHECK: ingot.linear %{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %q = ingot.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  // CHECK: ingot.linear %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<32xf32>) : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %k = ingot.linear %x, %wk bias(%bk : tensor<32xf32>) : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  // CHECK: ingot.linear %{{.*}}, %{{.*}} : tensor<?x64xbf16>, tensor<128x64xf16> -> tensor<?x128xbf16>
  %u = ingot.linear %xb, %wb : tensor<?x64xbf16>, tensor<128x64xf16> -> tensor<?x128xbf16>
  return %q, %k, %u : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x128xbf16>
}

// CHECK-LABEL: func.func @linear_quantized
func.func @linear_quantized(%x: tensor<?x256xbf16>) {
  // FP8, one scale for the tensor (both spellings of a scalar).
  %w8 = ingot.weight "fp8.weight" {handle = 0 : i64} : tensor<128x256xf8E4M3FN>
  %s0 = ingot.weight "fp8.scale" {handle = 1 : i64} : tensor<f32>
  %s1 = ingot.weight "fp8.scale1" {handle = 2 : i64} : tensor<1xf32>
  // CHECK: ingot.linear %{{.*}}, %{{.*}} scales(%{{.*}} : tensor<f32>) {quant = #ingot.quant<per_tensor>} : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN> -> tensor<?x128xbf16>
  %a = ingot.linear %x, %w8 scales(%s0 : tensor<f32>) {quant = #ingot.quant<per_tensor>} : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN> -> tensor<?x128xbf16>
  // CHECK: scales(%{{.*}} : tensor<1xf32>) {quant = #ingot.quant<per_tensor>}
  %b = ingot.linear %x, %w8 scales(%s1 : tensor<1xf32>) {quant = #ingot.quant<per_tensor>} : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN> -> tensor<?x128xbf16>
  // FP8, one scale per output channel, with a bias.
  %sc = ingot.weight "fp8.channel_scale" {handle = 3 : i64} : tensor<128xf32>
  %bias = ingot.weight "fp8.bias" {handle = 4 : i64} : tensor<128xbf16>
  // CHECK: ingot.linear %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<128xbf16>) scales(%{{.*}} : tensor<128xf32>) {quant = #ingot.quant<per_channel>} : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN> -> tensor<?x128xbf16>
  %c = ingot.linear %x, %w8 bias(%bias : tensor<128xbf16>) scales(%sc : tensor<128xf32>) {quant = #ingot.quant<per_channel>} : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN> -> tensor<?x128xbf16>
  // NVFP4: f4E2M1FN weights, an f8E4M3FN scale per 16 weights, one global scale.
  %w4 = ingot.weight "nvfp4.weight" {handle = 5 : i64} : tensor<128x256xf4E2M1FN>
  %bs = ingot.weight "nvfp4.block_scale" {handle = 6 : i64} : tensor<128x16xf8E4M3FN>
  %gs = ingot.weight "nvfp4.global_scale" {handle = 7 : i64} : tensor<f32>
  // CHECK: ingot.linear %{{.*}}, %{{.*}} scales(%{{.*}}, %{{.*}} : tensor<128x16xf8E4M3FN>, tensor<f32>) {quant = #ingot.quant<nvfp4>} : tensor<?x256xbf16>, tensor<128x256xf4E2M1FN> -> tensor<?x128xbf16>
  %d = ingot.linear %x, %w4 scales(%bs, %gs : tensor<128x16xf8E4M3FN>, tensor<f32>) {quant = #ingot.quant<nvfp4>} : tensor<?x256xbf16>, tensor<128x256xf4E2M1FN> -> tensor<?x128xbf16>
  // MXFP4: f4E2M1FN weights, an f8E8M0FNU scale per 32 weights.
  %ms = ingot.weight "mxfp4.scale" {handle = 8 : i64} : tensor<128x8xf8E8M0FNU>
  // CHECK: ingot.linear %{{.*}}, %{{.*}} scales(%{{.*}} : tensor<128x8xf8E8M0FNU>) {quant = #ingot.quant<mxfp4>} : tensor<?x256xbf16>, tensor<128x256xf4E2M1FN> -> tensor<?x128xbf16>
  %e = ingot.linear %x, %w4 scales(%ms : tensor<128x8xf8E8M0FNU>) {quant = #ingot.quant<mxfp4>} : tensor<?x256xbf16>, tensor<128x256xf4E2M1FN> -> tensor<?x128xbf16>
  // int4 group-wise, group 128, float zero points.
  %wi = ingot.weight "int4.weight" {handle = 9 : i64} : tensor<128x256xi4>
  %gsc = ingot.weight "int4.scales" {handle = 10 : i64} : tensor<128x2xf16>
  %gz = ingot.weight "int4.zeros" {handle = 11 : i64} : tensor<128x2xf16>
  // CHECK: ingot.linear %{{.*}}, %{{.*}} scales(%{{.*}}, %{{.*}} : tensor<128x2xf16>, tensor<128x2xf16>) {quant = #ingot.quant<int4, group_size = 128, zero>} : tensor<?x256xbf16>, tensor<128x256xi4> -> tensor<?x128xbf16>
  %f = ingot.linear %x, %wi scales(%gsc, %gz : tensor<128x2xf16>, tensor<128x2xf16>) {quant = #ingot.quant<int4, group_size = 128, zero>} : tensor<?x256xbf16>, tensor<128x256xi4> -> tensor<?x128xbf16>
  // int4 group-wise, group 64, integer zero points of the weight's type.
  %wu = ingot.weight "uint4.weight" {handle = 12 : i64} : tensor<128x256xui4>
  %us = ingot.weight "uint4.scales" {handle = 13 : i64} : tensor<128x4xbf16>
  %uz = ingot.weight "uint4.zeros" {handle = 14 : i64} : tensor<128x4xui4>
  // CHECK: scales(%{{.*}}, %{{.*}} : tensor<128x4xbf16>, tensor<128x4xui4>) {quant = #ingot.quant<int4, group_size = 64, zero>} : tensor<?x256xbf16>, tensor<128x256xui4> -> tensor<?x128xbf16>
  %g = ingot.linear %x, %wu scales(%us, %uz : tensor<128x4xbf16>, tensor<128x4xui4>) {quant = #ingot.quant<int4, group_size = 64, zero>} : tensor<?x256xbf16>, tensor<128x256xui4> -> tensor<?x128xbf16>
  // int4 group-wise, group 32, scale and min (w = q * s + m).
  %ss = ingot.weight "q4_1.scales" {handle = 15 : i64} : tensor<128x8xf32>
  %mn = ingot.weight "q4_1.mins" {handle = 16 : i64} : tensor<128x8xf32>
  // CHECK: scales(%{{.*}}, %{{.*}} : tensor<128x8xf32>, tensor<128x8xf32>) {quant = #ingot.quant<int4, group_size = 32, min>} : tensor<?x256xbf16>, tensor<128x256xi4> -> tensor<?x128xbf16>
  %h = ingot.linear %x, %wi scales(%ss, %mn : tensor<128x8xf32>, tensor<128x8xf32>) {quant = #ingot.quant<int4, group_size = 32, min>} : tensor<?x256xbf16>, tensor<128x256xi4> -> tensor<?x128xbf16>
  return
}

// CHECK-LABEL: func.func @rope
func.func @rope(%x: tensor<?x64xf32>, %pos: tensor<?xi32>, %big: tensor<3x1024xbf16>, %pos3: tensor<3xi32>) {
  // CHECK: ingot.rope %{{.*}}, %{{.*}} {head_dim = 16 : i32, num_heads = 4 : i32, theta = 1.000000e+04 : f64} : tensor<?x64xf32>, tensor<?xi32>
  %a = ingot.rope %x, %pos {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64} : tensor<?x64xf32>, tensor<?xi32>
  // CHECK: scaling = #ingot.rope_scaling<none>
  %b = ingot.rope %x, %pos {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64, scaling = #ingot.rope_scaling<none>} : tensor<?x64xf32>, tensor<?xi32>
  // CHECK: scaling = #ingot.rope_scaling<linear, factor = 2.000000e+00>
  %c = ingot.rope %x, %pos {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64, scaling = #ingot.rope_scaling<linear, factor = 2.0>} : tensor<?x64xf32>, tensor<?xi32>
  // CHECK: {head_dim = 128 : i32, num_heads = 8 : i32, scaling = #ingot.rope_scaling<llama3, factor = 8.000000e+00, low_freq_factor = 1.000000e+00, high_freq_factor = 4.000000e+00, original_max_position = 8192>, theta = 5.000000e+05 : f64} : tensor<3x1024xbf16>, tensor<3xi32>
  %d = ingot.rope %big, %pos3 {num_heads = 8 : i32, head_dim = 128 : i32, theta = 5.0e+05 : f64, scaling = #ingot.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>} : tensor<3x1024xbf16>, tensor<3xi32>
  // CHECK: scaling = #ingot.rope_scaling<yarn, factor = 4.000000e+00, original_max_position = 32768, beta_fast = 3.200000e+01, beta_slow = 1.000000e+00, attn_factor = 1.000000e+00>
  %e = ingot.rope %x, %pos {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+06 : f64, scaling = #ingot.rope_scaling<yarn, factor = 4.0, original_max_position = 32768>} : tensor<?x64xf32>, tensor<?xi32>
  return
}

// CHECK-LABEL: func.func @kv_write
func.func @kv_write(%cache: !cache, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>, %slots: tensor<?xi32>) -> !cache {
  // CHECK: %[[C1:.*]] = ingot.kv_write %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {layer = 0 : i32} : !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>, tensor<?x32xf32>, tensor<?xi32>
  %c1 = ingot.kv_write %cache, %k, %v, %slots {layer = 0 : i32} : !cache, tensor<?x32xf32>, tensor<?xi32>
  // CHECK: ingot.kv_write %[[C1]], {{.*}} {layer = 1 : i32}
  %c2 = ingot.kv_write %c1, %k, %v, %slots {layer = 1 : i32} : !cache, tensor<?x32xf32>, tensor<?xi32>
  return %c2 : !cache
}

// CHECK-LABEL: func.func @attention_plain
func.func @attention_plain(%q: tensor<?x64xf32>, %cache: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) -> tensor<?x64xf32> {
  // CHECK: ingot.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {head_dim = 16 : i32, layer = 1 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, scale = 2.500000e-01 : f32} : tensor<?x64xf32>, !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  // CHECK-NOT: mask
  // CHECK-NOT: score
  // CHECK: return
  %o = ingot.attention %q, %cache, %bt, %sl, %qs {layer = 1 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return %o : tensor<?x64xf32>
}

// CHECK-LABEL: func.func @attention_regions
func.func @attention_regions(%q: tensor<?x64xf32>, %cache: !cache, %bt: tensor<4x8xi32>, %sl: tensor<4xi32>, %qs: tensor<5xi32>,
                             %docs: tensor<?x?xi32>, %tree: tensor<?x?xi64>, %slopes: tensor<4xf32>, %flag: tensor<i1>) -> tensor<?x64xf32> {
  // CHECK: ingot.attention {{.*}} extra(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x?xi32>, tensor<?x?xi64>, tensor<4xf32>, tensor<i1>)
  // CHECK-SAME: tensor<4x8xi32>, tensor<4xi32>, tensor<5xi32> mask {
  // CHECK-NEXT: ^bb0(%[[B:.*]]: index, %[[H:.*]]: index, %[[Q:.*]]: index, %[[KV:.*]]: index):
  // CHECK-NEXT: arith.cmpi ule, %[[KV]], %[[Q]] : index
  // CHECK-NEXT: ingot.region_load 0[%[[B]], %[[Q]]] : i32
  // CHECK-NEXT: ingot.region_load 0[%[[B]], %[[KV]]] : i32
  // CHECK: ingot.region_load 1[%[[B]], %{{.*}}] : i64
  // CHECK: ingot.region_load 3[] : i1
  // CHECK: ingot.yield %{{.*}} : i1
  // CHECK-NEXT: } score {
  // CHECK-NEXT: ^bb0(%[[S:.*]]: f32, %{{.*}}: index, %[[SH:.*]]: index, %{{.*}}: index, %{{.*}}: index):
  // CHECK: ingot.region_load 2[%[[SH]]] : f32
  // CHECK: math.tanh
  // CHECK: ingot.yield %{{.*}} : f32
  // CHECK-NEXT: }
  %o = ingot.attention %q, %cache, %bt, %sl, %qs extra(%docs, %tree, %slopes, %flag : tensor<?x?xi32>, tensor<?x?xi64>, tensor<4xf32>, tensor<i1>)
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<4x8xi32>, tensor<4xi32>, tensor<5xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %causal = arith.cmpi ule, %kv, %qi : index
    %dq = ingot.region_load 0 [%b, %qi] : i32
    %dk = ingot.region_load 0 [%b, %kv] : i32
    %same = arith.cmpi eq, %dq, %dk : i32
    %word = ingot.region_load 1 [%b, %qi] : i64
    %kv64 = arith.index_cast %kv : index to i64
    %bit = arith.shrui %word, %kv64 : i64
    %one = arith.constant 1 : i64
    %low = arith.andi %bit, %one : i64
    %in_tree = arith.trunci %low : i64 to i1
    %on = ingot.region_load 3 [] : i1
    %a = arith.andi %causal, %same : i1
    %t = arith.ori %a, %in_tree : i1
    %r = arith.andi %t, %on : i1
    ingot.yield %r : i1
  } score {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
    %slope = ingot.region_load 2 [%h] : f32
    %d = arith.subi %kv, %qi : index
    %d64 = arith.index_cast %d : index to i64
    %df = arith.sitofp %d64 : i64 to f32
    %bias = arith.mulf %slope, %df : f32
    %biased = arith.addf %s, %bias : f32
    %cap = arith.constant 50.0 : f32
    %x = arith.divf %biased, %cap : f32
    %th = math.tanh %x : f32
    %y = arith.mulf %th, %cap : f32
    ingot.yield %y : f32
  }
  return %o : tensor<?x64xf32>
}

// CHECK-LABEL: func.func @attention_score_only
func.func @attention_score_only(%q: tensor<2x64xf32>, %cache: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) -> tensor<2x64xf32> {
  // CHECK: tensor<?xi32> score {
  // CHECK-NOT: mask
  %o = ingot.attention %q, %cache, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<2x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  score {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
    %two = arith.constant 2.0 : f32
    %r = arith.mulf %s, %two : f32
    ingot.yield %r : f32
  }
  return %o : tensor<2x64xf32>
}

// CHECK-LABEL: func.func @elementwise_and_logits
func.func @elementwise_and_logits(%a: tensor<?x128xf32>, %b: tensor<?x128xf32>, %h: tensor<?x64xf32>, %r: tensor<?x64xf32>, %rows: tensor<?xi32>, %s: tensor<3x64xbf16>, %rows2: tensor<2xi32>) {
  // CHECK: ingot.silu_mul %{{.*}}, %{{.*}} : tensor<?x128xf32>
  %0 = ingot.silu_mul %a, %b : tensor<?x128xf32>
  // CHECK: ingot.gelu_mul %{{.*}}, %{{.*}} : tensor<?x128xf32>
  %1 = ingot.gelu_mul %a, %b : tensor<?x128xf32>
  // CHECK: ingot.add %{{.*}}, %{{.*}} : tensor<?x64xf32>
  %2 = ingot.add %h, %r : tensor<?x64xf32>
  // CHECK: ingot.scale %{{.*}} {factor = 2.500000e-01 : f32} : tensor<?x64xf32>
  %sc = ingot.scale %2 {factor = 0.25 : f32} : tensor<?x64xf32>
  %w = ingot.weight "lm_head.weight" {handle = 0 : i64} : tensor<256x64xf32>
  // CHECK: ingot.logits %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<256x64xf32>, tensor<?xi32> -> tensor<?x256xf32>
  %3 = ingot.logits %2, %w, %rows : tensor<?x64xf32>, tensor<256x64xf32>, tensor<?xi32> -> tensor<?x256xf32>
  %wb = ingot.weight "lm_head.weight.bf16" {handle = 1 : i64} : tensor<256x64xbf16>
  // CHECK: ingot.logits %{{.*}}, %{{.*}}, %{{.*}} : tensor<3x64xbf16>, tensor<256x64xbf16>, tensor<2xi32> -> tensor<2x256xf32>
  %4 = ingot.logits %s, %wb, %rows2 : tensor<3x64xbf16>, tensor<256x64xbf16>, tensor<2xi32> -> tensor<2x256xf32>
  return
}

// CHECK-LABEL: func.func @quantized_weights
func.func @quantized_weights(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // CHECK: ingot.weight "model.layers.0.mlp.up_proj.weight" {handle = 7 : i64, source_quant = #ingot.quant<int4, group_size = 32, min>} : tensor<64x64xbf16>
  %src = ingot.weight "model.layers.0.mlp.up_proj.weight" {handle = 7 : i64, source_quant = #ingot.quant<int4, group_size = 32, min>} : tensor<64x64xbf16>
  // CHECK: ingot.weight "q.weight" {encoding = #ingot.encoding<weight, #ingot.quant<nvfp4>>, handle = 3 : i64} : tensor<64x64xf4E2M1FN>
  %w = ingot.weight "q.weight" {encoding = #ingot.encoding<weight, #ingot.quant<nvfp4>>, handle = 3 : i64} : tensor<64x64xf4E2M1FN>
  // CHECK: ingot.weight "q.weight_scale" {encoding = #ingot.encoding<scale, #ingot.quant<nvfp4>>, handle = 3 : i64} : tensor<64x4xf8E4M3FN>
  %s = ingot.weight "q.weight_scale" {encoding = #ingot.encoding<scale, #ingot.quant<nvfp4>>, handle = 3 : i64} : tensor<64x4xf8E4M3FN>
  // CHECK: ingot.weight "q.weight_global_scale" {encoding = #ingot.encoding<global_scale, #ingot.quant<nvfp4>>, handle = 3 : i64} : tensor<1xf32>
  %g = ingot.weight "q.weight_global_scale" {encoding = #ingot.encoding<global_scale, #ingot.quant<nvfp4>>, handle = 3 : i64} : tensor<1xf32>
  // CHECK: ingot.weight "k.weight_min" {encoding = #ingot.encoding<offset, #ingot.quant<int4, group_size = 64, min>>, handle = 4 : i64} : tensor<64x1xf16>
  %m = ingot.weight "k.weight_min" {encoding = #ingot.encoding<offset, #ingot.quant<int4, group_size = 64, min>>, handle = 4 : i64} : tensor<64x1xf16>
  %y = ingot.linear %x, %w scales(%s, %g : tensor<64x4xf8E4M3FN>, tensor<1xf32>) {quant = #ingot.quant<nvfp4>} : tensor<?x64xf32>, tensor<64x64xf4E2M1FN> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
