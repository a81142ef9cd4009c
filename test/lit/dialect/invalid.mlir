// Every verifier error of the ingot dialect, one per split: types, attributes, ops, regions.
// RUN: ingot-opt %s -split-input-file -verify-diagnostics

// kv_cache: kv_cache needs num_layers > 0
// expected-error @+1 {{kv_cache needs num_layers > 0}}
func.func @f(%c: !ingot.kv_cache<num_layers = 0, num_kv_heads = 2, head_dim = 16, element_type = f32>)

// -----

// kv_cache: kv_cache needs num_kv_heads > 0
// expected-error @+1 {{kv_cache needs num_kv_heads > 0}}
func.func @f(%c: !ingot.kv_cache<num_layers = 2, num_kv_heads = 0, head_dim = 16, element_type = f32>)

// -----

// kv_cache: kv_cache needs head_dim > 0
// expected-error @+1 {{kv_cache needs head_dim > 0}}
func.func @f(%c: !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 0, element_type = f32>)

// -----

// kv_cache: kv_cache needs block_size > 0
// expected-error @+1 {{kv_cache needs block_size > 0}}
func.func @f(%c: !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, block_size = 0, element_type = f32>)

// -----

// kv_cache: kv_cache element_type must be f32
// expected-error @+1 {{kv_cache element_type must be f32, f16, bf16 or f8E4M3FN, got 'i8'}}
func.func @f(%c: !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = i8>)

// -----

// quant: unknown scheme
func.func @f(%x: tensor<?x256xbf16>, %w: tensor<128x256xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{unknown quantization scheme 'fp8'}}
  %y = ingot.linear %x, %w scales(%s : tensor<f32>) {quant = #ingot.quant<fp8>} : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN> -> tensor<?x128xbf16>
  return
}

// -----

// quant: unknown key
func.func @f(%x: tensor<?x256xbf16>, %w: tensor<128x256xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{unexpected 'group' in #ingot.quant}}
  %y = ingot.linear %x, %w scales(%s : tensor<f32>) {quant = #ingot.quant<int4, group = 64, zero>} : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN> -> tensor<?x128xbf16>
  return
}

// -----

// quant: group not a power of two
func.func @f(%x: tensor<?x256xbf16>, %w: tensor<128x256xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{int4 group_size must be a power of two >= 16, got 48}}
  %y = ingot.linear %x, %w scales(%s : tensor<f32>) {quant = #ingot.quant<int4, group_size = 48, zero>} : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN> -> tensor<?x128xbf16>
  return
}

// -----

// quant: group too small
func.func @f(%x: tensor<?x256xbf16>, %w: tensor<128x256xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{int4 group_size must be a power of two >= 16, got 8}}
  %y = ingot.linear %x, %w scales(%s : tensor<f32>) {quant = #ingot.quant<int4, group_size = 8, min>} : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN> -> tensor<?x128xbf16>
  return
}

// -----

// quant: int4 without zero/min
func.func @f(%x: tensor<?x256xbf16>, %w: tensor<128x256xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{int4 quantization needs a 'zero' or 'min' kind}}
  %y = ingot.linear %x, %w scales(%s : tensor<f32>) {quant = #ingot.quant<int4, group_size = 64>} : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN> -> tensor<?x128xbf16>
  return
}

// -----

// quant: nvfp4 is block 16
func.func @f(%x: tensor<?x256xbf16>, %w: tensor<128x256xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{nvfp4 has block size 16, got 32}}
  %y = ingot.linear %x, %w scales(%s : tensor<f32>) {quant = #ingot.quant<nvfp4, block_size = 32>} : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN> -> tensor<?x128xbf16>
  return
}

// -----

// quant: per_tensor has no blocks
func.func @f(%x: tensor<?x256xbf16>, %w: tensor<128x256xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{per_tensor has block size 0, got 128}}
  %y = ingot.linear %x, %w scales(%s : tensor<f32>) {quant = #ingot.quant<per_tensor, group_size = 128>} : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN> -> tensor<?x128xbf16>
  return
}

// -----

// quant: zero on fp8
func.func @f(%x: tensor<?x256xbf16>, %w: tensor<128x256xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @+1 {{only int4 quantization takes a zero/min kind}}
  %y = ingot.linear %x, %w scales(%s : tensor<f32>) {quant = #ingot.quant<per_channel, zero>} : tensor<?x256xbf16>, tensor<128x256xf8E4M3FN> -> tensor<?x128xbf16>
  return
}

// -----

// rope_scaling: unknown kind
func.func @f(%x: tensor<?x64xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{unknown rope scaling 'ntk'}}
  %y = ingot.rope %x, %p {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64, scaling = #ingot.rope_scaling<ntk, factor = 2.0>} : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

// rope: frequency factors of the wrong size
func.func @f(%x: tensor<?x64xf32>, %p: tensor<?xi32>, %f: tensor<16xf32>) {
  // expected-error @+1 {{freq_factors must be tensor<8xf32> (one per rotated pair), got 'tensor<16xf32>'}}
  %y = ingot.rope %x, %p factors(%f : tensor<16xf32>) {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64} : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

// rope: frequency factors and a scaling attribute
func.func @f(%x: tensor<?x64xf32>, %p: tensor<?xi32>, %f: tensor<8xf32>) {
  // expected-error @+1 {{freq_factors and a scaling attribute both rescale the frequencies; give one}}
  %y = ingot.rope %x, %p factors(%f : tensor<8xf32>) {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64, scaling = #ingot.rope_scaling<linear, factor = 2.0>} : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

// rope_scaling: key of another kind
func.func @f(%x: tensor<?x64xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{'beta_fast' is not a parameter of llama3 rope scaling}}
  %y = ingot.rope %x, %p {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64, scaling = #ingot.rope_scaling<llama3, factor = 8.0, beta_fast = 32.0>} : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

// rope_scaling: zero factor
func.func @f(%x: tensor<?x64xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{rope scaling factor must be > 0}}
  %y = ingot.rope %x, %p {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64, scaling = #ingot.rope_scaling<linear, factor = 0.0>} : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

// rope_scaling: llama3 needs original_max_position
func.func @f(%x: tensor<?x64xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{llama3 rope scaling needs original_max_position > 0}}
  %y = ingot.rope %x, %p {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64, scaling = #ingot.rope_scaling<llama3, factor = 8.0>} : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

// rope_scaling: llama3 frequency band
func.func @f(%x: tensor<?x64xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor}}
  %y = ingot.rope %x, %p {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64, scaling = #ingot.rope_scaling<llama3, factor = 8.0, low_freq_factor = 4.0, high_freq_factor = 1.0, original_max_position = 8192>} : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

// rope_scaling: yarn betas
func.func @f(%x: tensor<?x64xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{yarn rope scaling needs 0 < beta_slow < beta_fast and attn_factor > 0}}
  %y = ingot.rope %x, %p {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64, scaling = #ingot.rope_scaling<yarn, factor = 4.0, original_max_position = 4096, beta_fast = 1.0, beta_slow = 32.0>} : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

// weight: empty name
func.func @f() {
  // expected-error @+1 {{needs a non-empty checkpoint tensor name}}
  %w = ingot.weight "" {handle = 0 : i64} : tensor<4xf32>
  return
}

// -----

// weight: negative handle
func.func @f() {
  // expected-error @+1 {{handle must be >= 0, got -1}}
  %w = ingot.weight "w" {handle = -1 : i64} : tensor<4xf32>
  return
}

// -----

// weight: dynamic shape
func.func @f() {
  // expected-error @+1 {{weight shape must be static, got 'tensor<?x4xf32>'}}
  %w = ingot.weight "w" {handle = 0 : i64} : tensor<?x4xf32>
  return
}

// -----

// embedding: table rank
func.func @f(%t: tensor<?xi32>, %e: tensor<256xf32>) {
  // expected-error @+1 {{expects table of rank 2, got 'tensor<256xf32>'}}
  %h = ingot.embedding %t, %e : tensor<?xi32>, tensor<256xf32> -> tensor<?x64xf32>
  return
}

// -----

// embedding: dynamic table
func.func @f(%t: tensor<?xi32>, %e: tensor<?x64xf32>) {
  // expected-error @+1 {{expects table to have a static shape}}
  %h = ingot.embedding %t, %e : tensor<?xi32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return
}

// -----

// embedding: table type
func.func @f(%t: tensor<?xi32>, %e: tensor<256x64xi8>) {
  // expected-error @+1 {{table element type must be f32, f16 or bf16, got 'i8'}}
  %h = ingot.embedding %t, %e : tensor<?xi32>, tensor<256x64xi8> -> tensor<?x64xf32>
  return
}

// -----

// embedding: result rank
func.func @f(%t: tensor<?xi32>, %e: tensor<256x64xf32>) {
  // expected-error @+1 {{expects result to be a [tokens, features] tensor}}
  %h = ingot.embedding %t, %e : tensor<?xi32>, tensor<256x64xf32> -> tensor<?x2x32xf32>
  return
}

// -----

// embedding: token count
func.func @f(%t: tensor<5xi32>, %e: tensor<256x64xf32>) {
  // expected-error @+1 {{token count of tokens (5) does not match result (4)}}
  %h = ingot.embedding %t, %e : tensor<5xi32>, tensor<256x64xf32> -> tensor<4x64xf32>
  return
}

// -----

// embedding: hidden size
func.func @f(%t: tensor<?xi32>, %e: tensor<256x64xf32>) {
  // expected-error @+1 {{result has 32 features but the table rows have 64}}
  %h = ingot.embedding %t, %e : tensor<?xi32>, tensor<256x64xf32> -> tensor<?x32xf32>
  return
}

// -----

// rms_norm: input rank
func.func @f(%x: tensor<64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{expects input to be a [tokens, features] tensor, got 'tensor<64xf32>'}}
  %y = ingot.rms_norm %x, %w {epsilon = 1.0e-05 : f32} : tensor<64xf32>, tensor<64xf32>
  return
}

// -----

// rms_norm: a weight that neither spans the row nor divides it into groups
func.func @f(%x: tensor<?x64xf32>, %w: tensor<48xf32>) {
  // expected-error @+1 {{weight has 48 elements, which divide no row of 64 features into groups}}
  %y = ingot.rms_norm %x, %w {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<48xf32>
  return
}

// -----

// add_rms_norm: whole rows only (a per-head norm is never fused with an add)
func.func @f(%x: tensor<?x64xf32>, %r: tensor<?x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{weight has 32 elements but the input has 64 features}}
  %s, %y = ingot.add_rms_norm %x, %r, %w {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<32xf32>
  return
}

// -----

// rope_kv_write: heads that disagree with the cache
func.func @f(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %pos: tensor<?xi32>,
             %cache: !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>) {
  // expected-error @+1 {{num_kv_heads = 4 and head_dim = 8 disagree with the cache's 2 and 16}}
  %qr, %kr, %c = ingot.rope_kv_write %q, %k, %k, %pos, %cache, %pos
      {num_heads = 8 : i32, num_kv_heads = 4 : i32, head_dim = 8 : i32, theta = 1.0e+04 : f64, layer = 0 : i32}
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?xi32>, !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
  return
}

// -----

// rope_kv_write: layer outside the cache
func.func @f(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %pos: tensor<?xi32>,
             %cache: !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>) {
  // expected-error @+1 {{layer 2 is out of range for a 2-layer cache}}
  %qr, %kr, %c = ingot.rope_kv_write %q, %k, %k, %pos, %cache, %pos
      {num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64, layer = 2 : i32}
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?xi32>, !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
  return
}

// -----

// add_rms_norm: weight size
func.func @f(%x: tensor<?x64xf32>, %r: tensor<?x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{weight has 32 elements but the input has 64 features}}
  %s, %y = ingot.add_rms_norm %x, %r, %w {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<32xf32>
  return
}

// -----

// rms_norm: weight rank
func.func @f(%x: tensor<?x64xf32>, %w: tensor<1x64xf32>) {
  // expected-error @+1 {{expects weight of rank 1, got 'tensor<1x64xf32>'}}
  %y = ingot.rms_norm %x, %w {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<1x64xf32>
  return
}

// -----

// rms_norm: dynamic weight
func.func @f(%x: tensor<?x64xf32>, %w: tensor<?xf32>) {
  // expected-error @+1 {{expects weight to have a static shape}}
  %y = ingot.rms_norm %x, %w {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<?xf32>
  return
}

// -----

// rms_norm: zero epsilon
func.func @f(%x: tensor<?x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{epsilon must be a positive finite number}}
  %y = ingot.rms_norm %x, %w {epsilon = 0.0 : f32} : tensor<?x64xf32>, tensor<64xf32>
  return
}

// -----

// layer_norm: bias size
func.func @f(%x: tensor<?x64xf32>, %w: tensor<64xf32>, %b: tensor<32xf32>) {
  // expected-error @+1 {{bias has 32 elements but the input has 64 features}}
  %y = ingot.layer_norm %x, %w, %b {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<64xf32>, tensor<32xf32>
  return
}

// -----

// layer_norm: negative epsilon
func.func @f(%x: tensor<?x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{epsilon must be a positive finite number}}
  %y = ingot.layer_norm %x, %w, %b {epsilon = -1.0 : f32} : tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>
  return
}

// -----

// rms_norm: result type is the input type
func.func @f(%x: tensor<?x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'ingot.rms_norm' op failed to verify that all of {input, result} have same type}}
  %y = "ingot.rms_norm"(%x, %w) {epsilon = 1.0e-05 : f32} : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf16>
  return
}

// -----

// rope: token count
func.func @f(%x: tensor<3x64xf32>, %p: tensor<4xi32>) {
  // expected-error @+1 {{token count of input (3) does not match positions (4)}}
  %y = ingot.rope %x, %p {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64} : tensor<3x64xf32>, tensor<4xi32>
  return
}

// -----

// rope: zero heads
func.func @f(%x: tensor<?x64xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{num_heads and head_dim must be > 0}}
  %y = ingot.rope %x, %p {num_heads = 0 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64} : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

// rope: odd head_dim
func.func @f(%x: tensor<?x60xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{head_dim must be even to rotate pairs, got 15}}
  %y = ingot.rope %x, %p {num_heads = 4 : i32, head_dim = 15 : i32, theta = 1.0e+04 : f64} : tensor<?x60xf32>, tensor<?xi32>
  return
}

// -----

// rope: features
func.func @f(%x: tensor<?x64xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{input has 64 features, expected num_heads * head_dim = 32}}
  %y = ingot.rope %x, %p {num_heads = 2 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64} : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

// rope: theta
func.func @f(%x: tensor<?x64xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{theta must be > 0}}
  %y = ingot.rope %x, %p {num_heads = 4 : i32, head_dim = 16 : i32, theta = 0.0 : f64} : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

// rope: positions are i32 (ODS)
func.func @f(%x: tensor<?x64xf32>, %p: tensor<?xi64>) {
  // expected-error @+1 {{operand #1 must be 1D tensor of 32-bit signless integer values}}
  %y = ingot.rope %x, %p {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64} : tensor<?x64xf32>, tensor<?xi64>
  return
}

// -----

// kv_write: layer
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%c: !cache, %k: tensor<?x32xf32>, %s: tensor<?xi32>) {
  // expected-error @+1 {{layer 2 is out of range for a 2-layer cache}}
  %c1 = ingot.kv_write %c, %k, %k, %s {layer = 2 : i32} : !cache, tensor<?x32xf32>, tensor<?xi32>
  return
}

// -----

// kv_write: negative layer
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%c: !cache, %k: tensor<?x32xf32>, %s: tensor<?xi32>) {
  // expected-error @+1 {{layer -1 is out of range for a 2-layer cache}}
  %c1 = ingot.kv_write %c, %k, %k, %s {layer = -1 : i32} : !cache, tensor<?x32xf32>, tensor<?xi32>
  return
}

// -----

// kv_write: features
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%c: !cache, %k: tensor<?x64xf32>, %s: tensor<?xi32>) {
  // expected-error @+1 {{key/value have 64 features, expected num_kv_heads * head_dim = 32 of the cache}}
  %c1 = ingot.kv_write %c, %k, %k, %s {layer = 0 : i32} : !cache, tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

// kv_write: token count
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%c: !cache, %k: tensor<3x32xf32>, %s: tensor<4xi32>) {
  // expected-error @+1 {{token count of key (3) does not match slot_mapping (4)}}
  %c1 = ingot.kv_write %c, %k, %k, %s {layer = 0 : i32} : !cache, tensor<3x32xf32>, tensor<4xi32>
  return
}

// -----

// kv_write: key rank
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%c: !cache, %k: tensor<32xf32>, %s: tensor<?xi32>) {
  // expected-error @+1 {{expects key to be a [tokens, features] tensor}}
  %c1 = ingot.kv_write %c, %k, %k, %s {layer = 0 : i32} : !cache, tensor<32xf32>, tensor<?xi32>
  return
}

// -----

// silu_mul: rank
func.func @f(%a: tensor<128xf32>) {
  // expected-error @+1 {{expects operands to be a [tokens, features] tensor, got 'tensor<128xf32>'}}
  %y = ingot.silu_mul %a, %a : tensor<128xf32>
  return
}

// -----

// gelu_mul: rank
func.func @f(%a: tensor<128xf32>) {
  // expected-error @+1 {{expects operands to be a [tokens, features] tensor, got 'tensor<128xf32>'}}
  %y = ingot.gelu_mul %a, %a : tensor<128xf32>
  return
}

// -----

// add: rank
func.func @f(%a: tensor<128xf32>) {
  // expected-error @+1 {{expects operands to be a [tokens, features] tensor, got 'tensor<128xf32>'}}
  %y = ingot.add %a, %a : tensor<128xf32>
  return
}

// -----

// add: element types must match (ODS)
func.func @f(%a: tensor<?x128xf32>, %b: tensor<?x128xf16>) {
  // expected-error @+1 {{'ingot.add' op requires the same type for all operands and results}}
  %y = "ingot.add"(%a, %b) : (tensor<?x128xf32>, tensor<?x128xf16>) -> tensor<?x128xf32>
  return
}

// -----

// silu_mul: one type, not merely compatible shapes
func.func @f(%a: tensor<?x128xf32>, %b: tensor<4x128xf32>) {
  // expected-error @+1 {{'ingot.silu_mul' op expects operands and result of one type (a static token count must be spelled on every one)}}
  %y = "ingot.silu_mul"(%a, %b) : (tensor<?x128xf32>, tensor<4x128xf32>) -> tensor<?x128xf32>
  return
}

// -----

// gelu_mul: one type, not merely compatible shapes
func.func @f(%a: tensor<?x128xf32>, %b: tensor<4x128xf32>) {
  // expected-error @+1 {{'ingot.gelu_mul' op expects operands and result of one type (a static token count must be spelled on every one)}}
  %y = "ingot.gelu_mul"(%a, %b) : (tensor<?x128xf32>, tensor<4x128xf32>) -> tensor<?x128xf32>
  return
}

// -----

// add: one type, not merely compatible shapes
func.func @f(%a: tensor<?x128xf32>, %b: tensor<4x128xf32>) {
  // expected-error @+1 {{'ingot.add' op expects operands and result of one type (a static token count must be spelled on every one)}}
  %y = "ingot.add"(%a, %b) : (tensor<?x128xf32>, tensor<4x128xf32>) -> tensor<?x128xf32>
  return
}

// -----

// logits: hidden rank
func.func @f(%h: tensor<64xf32>, %w: tensor<256x64xf32>, %r: tensor<?xi32>) {
  // expected-error @+1 {{expects hidden to be a [tokens, features] tensor}}
  %l = ingot.logits %h, %w, %r : tensor<64xf32>, tensor<256x64xf32>, tensor<?xi32> -> tensor<?x256xf32>
  return
}

// -----

// logits: weight type
func.func @f(%h: tensor<?x64xf32>, %w: tensor<256x64xf8E4M3FN>, %r: tensor<?xi32>) {
  // expected-error @+1 {{weight element type must be f32, f16 or bf16, got 'f8E4M3FN'}}
  %l = ingot.logits %h, %w, %r : tensor<?x64xf32>, tensor<256x64xf8E4M3FN>, tensor<?xi32> -> tensor<?x256xf32>
  return
}

// -----

// logits: hidden size
func.func @f(%h: tensor<?x32xf32>, %w: tensor<256x64xf32>, %r: tensor<?xi32>) {
  // expected-error @+1 {{hidden has 32 features but the weight rows have 64}}
  %l = ingot.logits %h, %w, %r : tensor<?x32xf32>, tensor<256x64xf32>, tensor<?xi32> -> tensor<?x256xf32>
  return
}

// -----

// logits: vocab
func.func @f(%h: tensor<?x64xf32>, %w: tensor<256x64xf32>, %r: tensor<?xi32>) {
  // expected-error @+1 {{result has 128 columns but the weight has 256 vocabulary rows}}
  %l = ingot.logits %h, %w, %r : tensor<?x64xf32>, tensor<256x64xf32>, tensor<?xi32> -> tensor<?x128xf32>
  return
}

// -----

// logits: rows
func.func @f(%h: tensor<?x64xf32>, %w: tensor<256x64xf32>, %r: tensor<2xi32>) {
  // expected-error @+1 {{token count of rows (2) does not match result (3)}}
  %l = ingot.logits %h, %w, %r : tensor<?x64xf32>, tensor<256x64xf32>, tensor<2xi32> -> tensor<3x256xf32>
  return
}

// -----

// logits: result is f32 (ODS)
func.func @f(%h: tensor<?x64xf32>, %w: tensor<256x64xf32>, %r: tensor<?xi32>) {
  // expected-error @+1 {{result #0 must be 2D tensor of 32-bit float values}}
  %l = ingot.logits %h, %w, %r : tensor<?x64xf32>, tensor<256x64xf32>, tensor<?xi32> -> tensor<?x256xbf16>
  return
}

// -----

// linear: input rank
func.func @f(%x: tensor<?x2x64xf32>, %w: tensor<128x64xf32>) {
  // expected-error @+1 {{expects [tokens, features] input and result}}
  %y = ingot.linear %x, %w : tensor<?x2x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
  return
}

// -----

// linear: dynamic weight
func.func @f(%x: tensor<?x64xf32>, %w: tensor<?x64xf32>) {
  // expected-error @+1 {{expects a static [out, in] weight, got 'tensor<?x64xf32>'}}
  %y = ingot.linear %x, %w : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x128xf32>
  return
}

// -----

// linear: K
func.func @f(%x: tensor<?x32xf32>, %w: tensor<128x64xf32>) {
  // expected-error @+1 {{input has 32 features but the weight takes 64}}
  %y = ingot.linear %x, %w : tensor<?x32xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
  return
}

// -----

// linear: N
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf32>) {
  // expected-error @+1 {{result has 64 features but the weight produces 128}}
  %y = ingot.linear %x, %w : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x64xf32>
  return
}

// -----

// linear: token count
func.func @f(%x: tensor<3x64xf32>, %w: tensor<128x64xf32>) {
  // expected-error @+1 {{token count of input (3) does not match result (4)}}
  %y = ingot.linear %x, %w : tensor<3x64xf32>, tensor<128x64xf32> -> tensor<4x128xf32>
  return
}

// -----

// linear: result type
func.func @f(%x: tensor<?x64xbf16>, %w: tensor<128x64xbf16>) {
  // expected-error @+1 {{result element type 'f32' differs from the input's 'bf16'}}
  %y = ingot.linear %x, %w : tensor<?x64xbf16>, tensor<128x64xbf16> -> tensor<?x128xf32>
  return
}

// -----

// linear: bias
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{bias must have shape [128], got 'tensor<64xf32>'}}
  %y = ingot.linear %x, %w bias(%b : tensor<64xf32>) : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
  return
}

// -----

// linear: quantized weight without a scheme
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf8E4M3FN>) {
  // expected-error @+1 {{weight element type 'f8E4M3FN' needs a #ingot.quant scheme}}
  %y = ingot.linear %x, %w : tensor<?x64xf32>, tensor<128x64xf8E4M3FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: scales without a scheme
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf32>, %s0: tensor<f32>) {
  // expected-error @+1 {{takes scale operands only with a #ingot.quant scheme, got 1}}
  %y = ingot.linear %x, %w scales(%s0 : tensor<f32>) : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
  return
}

// -----

// linear: per_tensor weight type
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xbf16>, %s0: tensor<f32>) {
  // expected-error @+1 {{per_tensor quantization needs f8E4M3FN weights, got 'bf16'}}
  %y = ingot.linear %x, %w scales(%s0 : tensor<f32>) {quant = #ingot.quant<per_tensor>} : tensor<?x64xf32>, tensor<128x64xbf16> -> tensor<?x128xf32>
  return
}

// -----

// linear: nvfp4 weight type
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf8E4M3FN>, %s0: tensor<128x4xf8E4M3FN>, %s1: tensor<f32>) {
  // expected-error @+1 {{nvfp4 quantization needs f4E2M1FN weights, got 'f8E4M3FN'}}
  %y = ingot.linear %x, %w scales(%s0, %s1 : tensor<128x4xf8E4M3FN>, tensor<f32>) {quant = #ingot.quant<nvfp4>} : tensor<?x64xf32>, tensor<128x64xf8E4M3FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: int4 weight type
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xi8>, %s0: tensor<128x2xf16>, %s1: tensor<128x2xf16>) {
  // expected-error @+1 {{int4 quantization needs i4 or ui4 weights, got 'i8'}}
  %y = ingot.linear %x, %w scales(%s0, %s1 : tensor<128x2xf16>, tensor<128x2xf16>) {quant = #ingot.quant<int4, group_size = 32, zero>} : tensor<?x64xf32>, tensor<128x64xi8> -> tensor<?x128xf32>
  return
}

// -----

// linear: nvfp4 scale count
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf4E2M1FN>, %s0: tensor<128x4xf8E4M3FN>) {
  // expected-error @+1 {{nvfp4 quantization takes 2 scale operand(s) (block scales, global scale), got 1}}
  %y = ingot.linear %x, %w scales(%s0 : tensor<128x4xf8E4M3FN>) {quant = #ingot.quant<nvfp4>} : tensor<?x64xf32>, tensor<128x64xf4E2M1FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: per_channel without scales
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf8E4M3FN>) {
  // expected-error @+1 {{per_channel quantization takes 1 scale operand(s) (per-channel scales), got 0}}
  %y = ingot.linear %x, %w {quant = #ingot.quant<per_channel>} : tensor<?x64xf32>, tensor<128x64xf8E4M3FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: per_tensor scale shape
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf8E4M3FN>, %s0: tensor<2xf32>) {
  // expected-error @+1 {{per_tensor scale must be tensor<f32> or tensor<1xf32>, got 'tensor<2xf32>'}}
  %y = ingot.linear %x, %w scales(%s0 : tensor<2xf32>) {quant = #ingot.quant<per_tensor>} : tensor<?x64xf32>, tensor<128x64xf8E4M3FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: per_tensor scale type
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf8E4M3FN>, %s0: tensor<f16>) {
  // expected-error @+1 {{per_tensor scale must be tensor<f32> or tensor<1xf32>, got 'tensor<f16>'}}
  %y = ingot.linear %x, %w scales(%s0 : tensor<f16>) {quant = #ingot.quant<per_tensor>} : tensor<?x64xf32>, tensor<128x64xf8E4M3FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: per_channel scale shape
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf8E4M3FN>, %s0: tensor<64xf32>) {
  // expected-error @+1 {{per_channel scale must be 'tensor<128xf32>', got 'tensor<64xf32>'}}
  %y = ingot.linear %x, %w scales(%s0 : tensor<64xf32>) {quant = #ingot.quant<per_channel>} : tensor<?x64xf32>, tensor<128x64xf8E4M3FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: per_channel scale type
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf8E4M3FN>, %s0: tensor<128xbf16>) {
  // expected-error @+1 {{per_channel scale must be 'tensor<128xf32>', got 'tensor<128xbf16>'}}
  %y = ingot.linear %x, %w scales(%s0 : tensor<128xbf16>) {quant = #ingot.quant<per_channel>} : tensor<?x64xf32>, tensor<128x64xf8E4M3FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: K not a multiple of the block
func.func @f(%x: tensor<?x100xf32>, %w: tensor<128x100xf4E2M1FN>, %s0: tensor<128x6xf8E4M3FN>, %s1: tensor<f32>) {
  // expected-error @+1 {{input features K = 100 are not a multiple of the nvfp4 block size 16}}
  %y = ingot.linear %x, %w scales(%s0, %s1 : tensor<128x6xf8E4M3FN>, tensor<f32>) {quant = #ingot.quant<nvfp4>} : tensor<?x100xf32>, tensor<128x100xf4E2M1FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: nvfp4 block scale shape
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf4E2M1FN>, %s0: tensor<128x2xf8E4M3FN>, %s1: tensor<f32>) {
  // expected-error @+1 {{nvfp4 block scale must be 'tensor<128x4xf8E4M3FN>', got 'tensor<128x2xf8E4M3FN>'}}
  %y = ingot.linear %x, %w scales(%s0, %s1 : tensor<128x2xf8E4M3FN>, tensor<f32>) {quant = #ingot.quant<nvfp4>} : tensor<?x64xf32>, tensor<128x64xf4E2M1FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: nvfp4 block scale type
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf4E2M1FN>, %s0: tensor<128x4xf8E8M0FNU>, %s1: tensor<f32>) {
  // expected-error @+1 {{nvfp4 block scale must be 'tensor<128x4xf8E4M3FN>', got 'tensor<128x4xf8E8M0FNU>'}}
  %y = ingot.linear %x, %w scales(%s0, %s1 : tensor<128x4xf8E8M0FNU>, tensor<f32>) {quant = #ingot.quant<nvfp4>} : tensor<?x64xf32>, tensor<128x64xf4E2M1FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: nvfp4 global scale
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf4E2M1FN>, %s0: tensor<128x4xf8E4M3FN>, %s1: tensor<128xf32>) {
  // expected-error @+1 {{nvfp4 global scale must be tensor<f32> or tensor<1xf32>, got 'tensor<128xf32>'}}
  %y = ingot.linear %x, %w scales(%s0, %s1 : tensor<128x4xf8E4M3FN>, tensor<128xf32>) {quant = #ingot.quant<nvfp4>} : tensor<?x64xf32>, tensor<128x64xf4E2M1FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: mxfp4 block scale shape (block 32, not 16)
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf4E2M1FN>, %s0: tensor<128x4xf8E8M0FNU>) {
  // expected-error @+1 {{mxfp4 block scale must be 'tensor<128x2xf8E8M0FNU>', got 'tensor<128x4xf8E8M0FNU>'}}
  %y = ingot.linear %x, %w scales(%s0 : tensor<128x4xf8E8M0FNU>) {quant = #ingot.quant<mxfp4>} : tensor<?x64xf32>, tensor<128x64xf4E2M1FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: mxfp4 block scale type
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf4E2M1FN>, %s0: tensor<128x2xf8E4M3FN>) {
  // expected-error @+1 {{mxfp4 block scale must be 'tensor<128x2xf8E8M0FNU>', got 'tensor<128x2xf8E4M3FN>'}}
  %y = ingot.linear %x, %w scales(%s0 : tensor<128x2xf8E4M3FN>) {quant = #ingot.quant<mxfp4>} : tensor<?x64xf32>, tensor<128x64xf4E2M1FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: mxfp4 has no global scale
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xf4E2M1FN>, %s0: tensor<128x2xf8E8M0FNU>, %s1: tensor<f32>) {
  // expected-error @+1 {{mxfp4 quantization takes 1 scale operand(s) (block scales), got 2}}
  %y = ingot.linear %x, %w scales(%s0, %s1 : tensor<128x2xf8E8M0FNU>, tensor<f32>) {quant = #ingot.quant<mxfp4>} : tensor<?x64xf32>, tensor<128x64xf4E2M1FN> -> tensor<?x128xf32>
  return
}

// -----

// linear: int4 scale type
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xi4>, %s0: tensor<128x2xf8E4M3FN>, %s1: tensor<128x2xf16>) {
  // expected-error @+1 {{int4 group scale element type must be f16, bf16 or f32, got 'f8E4M3FN'}}
  %y = ingot.linear %x, %w scales(%s0, %s1 : tensor<128x2xf8E4M3FN>, tensor<128x2xf16>) {quant = #ingot.quant<int4, group_size = 32, zero>} : tensor<?x64xf32>, tensor<128x64xi4> -> tensor<?x128xf32>
  return
}

// -----

// linear: int4 scale shape
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xi4>, %s0: tensor<128x4xf16>, %s1: tensor<128x2xf16>) {
  // expected-error @+1 {{int4 group scale must be 'tensor<128x2xf16>', got 'tensor<128x4xf16>'}}
  %y = ingot.linear %x, %w scales(%s0, %s1 : tensor<128x4xf16>, tensor<128x2xf16>) {quant = #ingot.quant<int4, group_size = 32, zero>} : tensor<?x64xf32>, tensor<128x64xi4> -> tensor<?x128xf32>
  return
}

// -----

// linear: int4 zero type
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xi4>, %s0: tensor<128x2xf16>, %s1: tensor<128x2xbf16>) {
  // expected-error @+1 {{int4 group zero element type must be 'f16' (the scale type) or the weight type, got 'bf16'}}
  %y = ingot.linear %x, %w scales(%s0, %s1 : tensor<128x2xf16>, tensor<128x2xbf16>) {quant = #ingot.quant<int4, group_size = 32, zero>} : tensor<?x64xf32>, tensor<128x64xi4> -> tensor<?x128xf32>
  return
}

// -----

// linear: int4 min is a float
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xi4>, %s0: tensor<128x2xf16>, %s1: tensor<128x2xi4>) {
  // expected-error @+1 {{int4 group min element type must be 'f16', got 'i4'}}
  %y = ingot.linear %x, %w scales(%s0, %s1 : tensor<128x2xf16>, tensor<128x2xi4>) {quant = #ingot.quant<int4, group_size = 32, min>} : tensor<?x64xf32>, tensor<128x64xi4> -> tensor<?x128xf32>
  return
}

// -----

// linear: int4 zero shape
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xi4>, %s0: tensor<128x2xf16>, %s1: tensor<64x2xi4>) {
  // expected-error @+1 {{int4 group zero must be 'tensor<128x2xi4>', got 'tensor<64x2xi4>'}}
  %y = ingot.linear %x, %w scales(%s0, %s1 : tensor<128x2xf16>, tensor<64x2xi4>) {quant = #ingot.quant<int4, group_size = 32, zero>} : tensor<?x64xf32>, tensor<128x64xi4> -> tensor<?x128xf32>
  return
}

// -----

// linear: int4 min shape
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xui4>, %s0: tensor<128x2xf32>, %s1: tensor<128x1xf32>) {
  // expected-error @+1 {{int4 group min must be 'tensor<128x2xf32>', got 'tensor<128x1xf32>'}}
  %y = ingot.linear %x, %w scales(%s0, %s1 : tensor<128x2xf32>, tensor<128x1xf32>) {quant = #ingot.quant<int4, group_size = 32, min>} : tensor<?x64xf32>, tensor<128x64xui4> -> tensor<?x128xf32>
  return
}

// -----

// linear: int4 group larger than K
func.func @f(%x: tensor<?x64xf32>, %w: tensor<128x64xi4>, %s0: tensor<128x1xf16>, %s1: tensor<128x1xf16>) {
  // expected-error @+1 {{input features K = 64 are not a multiple of the int4 block size 128}}
  %y = ingot.linear %x, %w scales(%s0, %s1 : tensor<128x1xf16>, tensor<128x1xf16>) {quant = #ingot.quant<int4, group_size = 128, zero>} : tensor<?x64xf32>, tensor<128x64xi4> -> tensor<?x128xf32>
  return
}

// -----

// attention: zero heads
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  // expected-error @+1 {{num_heads, num_kv_heads and head_dim must be > 0}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 0 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return
}

// -----

// attention: GQA grouping
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 4, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x96xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  // expected-error @+1 {{num_heads (6) must be a multiple of num_kv_heads (4)}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 6 : i32, num_kv_heads = 4 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x96xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return
}

// -----

// attention: query rank
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x4x16xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  // expected-error @+1 {{expects query to be a [tokens, num_heads * head_dim] tensor}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x4x16xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return
}

// -----

// attention: query features
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  // expected-error @+1 {{query has 64 features, expected num_heads * head_dim = 128}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 8 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return
}

// -----

// attention: cache heads
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  // expected-error @+1 {{num_kv_heads = 4, head_dim = 16 do not match the cache's 2 KV heads of 16}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 4 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return
}

// -----

// attention: layer
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  // expected-error @+1 {{layer 5 is out of range for a 2-layer cache}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 5 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return
}

// -----

// attention: infinite scale
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  // expected-error @+1 {{scale must be finite}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0x7F800000 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return
}

// -----

// attention: block table rows
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<3x8xi32>, %sl: tensor<4xi32>, %qs: tensor<?xi32>) {
  // expected-error @+1 {{block_tables has 3 rows but there are 4 requests}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<3x8xi32>, tensor<4xi32>, tensor<?xi32>
  return
}

// -----

// attention: query_start length
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<4xi32>, %qs: tensor<4xi32>) {
  // expected-error @+1 {{query_start must hold num_requests + 1 = 5 offsets, got 4}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<4xi32>, tensor<4xi32>
  return
}

// -----

// attention: extra operand element type (ODS)
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>, %e0: tensor<?xf16>) {
  // expected-error @+1 {{operand #5 must be variadic of ranked tensor of 1-bit signless integer or 8-bit signless integer or 16-bit signless integer or 32-bit signless integer or 64-bit signless integer or 32-bit float values}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs extra(%e0 : tensor<?xf16>) {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return
}

// -----

// mask: three arguments
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  // expected-error @+1 {{mask region must take (index b, index h, index q, index kv), got 3 argument(s)}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %qi: index, %kv: index):
    %t = arith.cmpi ule, %kv, %qi : index
    ingot.yield %t : i1
  }
  return
}

// -----

// mask: i32 arguments
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  // expected-error @+1 {{mask region must take (index b, index h, index q, index kv), got 4 argument(s)}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: i32, %kv: i32):
    %t = arith.cmpi ule, %kv, %qi : i32
    ingot.yield %t : i1
  }
  return
}

// -----

// score: no score argument
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  // expected-error @+1 {{score region must take (f32 score, index b, index h, index q, index kv), got 4 argument(s)}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  score {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %one = arith.constant 1.0 : f32
    ingot.yield %one : f32
  }
  return
}

// -----

// score: f16 score
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  // expected-error @+1 {{score region must take (f32 score, index b, index h, index q, index kv), got 5 argument(s)}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  score {
  ^bb0(%s: f16, %b: index, %h: index, %qi: index, %kv: index):
    %one = arith.constant 1.0 : f32
    ingot.yield %one : f32
  }
  return
}

// -----

// mask: yields f32
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %one = arith.constant 1.0 : f32
    // expected-error @+1 {{'ingot.yield' op in the mask region must yield exactly one 'i1'}}
    ingot.yield %one : f32
  }
  return
}

// -----

// mask: yields two values
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %t = arith.constant true
    // expected-error @+1 {{in the mask region must yield exactly one 'i1'}}
    ingot.yield %t, %t : i1, i1
  }
  return
}

// -----

// score: yields i1
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  score {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
    %t = arith.constant true
    // expected-error @+1 {{in the score region must yield exactly one 'f32'}}
    ingot.yield %t : i1
  }
  return
}

// -----

// mask: forgot the yield (an empty yield at the op is implied)
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  // expected-error @+1 {{in the mask region must yield exactly one 'i1'}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
  }
  return
}

// -----

// mask: op from another dialect
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{'ingot.weight' op is not allowed in an attention mask region (only arith and math ops, ingot.region_load and ingot.yield)}}
    %w = ingot.weight "w" {handle = 0 : i64} : tensor<4xf32>
    %t = arith.constant true
    ingot.yield %t : i1
  }
  return
}

// -----

// score: func.call is not arith/math
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  score {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{'func.call' op is not allowed in an attention score region}}
    %r = func.call @g(%s) : (f32) -> f32
    ingot.yield %r : f32
  }
  return
}

// -----

// score: f16 values
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  score {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{'arith.truncf' op uses a value of type 'f16' in an attention score region (allowed: i1, i8, i16, i32, i64, index, f32)}}
    %h16 = arith.truncf %s : f32 to f16
    %r = arith.extf %h16 : f16 to f32
    ingot.yield %r : f32
  }
  return
}

// -----

// mask: vector values
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{'arith.constant' op uses a value of type 'vector<4xi1>' in an attention mask region}}
    %v = arith.constant dense<true> : vector<4xi1>
    %e = arith.andi %v, %v : vector<4xi1>
    %t = arith.constant true
    ingot.yield %t : i1
  }
  return
}

// -----

// region_load: operand index out of range
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>, %e0: tensor<?x?xi32>) {
  %o = ingot.attention %q, %c, %bt, %sl, %qs extra(%e0 : tensor<?x?xi32>) {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{'ingot.region_load' op reads extra operand #1 but the attention op has 1 extra operand(s)}}
    %d = ingot.region_load 1 [%b, %qi] : i32
    %t = arith.constant true
    ingot.yield %t : i1
  }
  return
}

// -----

// region_load: no extra operands
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{reads extra operand #0 but the attention op has 0 extra operand(s)}}
    %d = ingot.region_load 0 [%b] : i32
    %t = arith.constant true
    ingot.yield %t : i1
  }
  return
}

// -----

// region_load: index count is the rank
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>, %e0: tensor<?x?xi32>) {
  %o = ingot.attention %q, %c, %bt, %sl, %qs extra(%e0 : tensor<?x?xi32>) {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{needs 2 indices for extra operand #0 ('tensor<?x?xi32>'), got 1}}
    %d = ingot.region_load 0 [%qi] : i32
    %t = arith.constant true
    ingot.yield %t : i1
  }
  return
}

// -----

// region_load: result type is the element type
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>, %e0: tensor<?x?xi32>) {
  %o = ingot.attention %q, %c, %bt, %sl, %qs extra(%e0 : tensor<?x?xi32>) {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{result type 'i64' does not match the element type 'i32' of extra operand #0}}
    %d = ingot.region_load 0 [%b, %qi] : i64
    %t = arith.constant true
    ingot.yield %t : i1
  }
  return
}

// -----

// region: values from outside the op (regions are isolated)
!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @f(%outer: index, %q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) {
  // expected-note @+1 {{required by region isolation constraints}}
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32} : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    // expected-error @+1 {{using value defined outside the region}}
    %t = arith.cmpi ule, %kv, %outer : index
    ingot.yield %t : i1
  }
  return
}

// -----

// region_load: only inside ingot.attention
func.func @f(%i: index) {
  // expected-error @+1 {{'ingot.region_load' op expects parent op 'ingot.attention'}}
  %d = ingot.region_load 0 [%i] : i32
  return
}

// -----

// yield: only inside ingot.attention
func.func @f(%t: i1) {
  // expected-error @+1 {{'ingot.yield' op expects parent op 'ingot.attention'}}
  ingot.yield %t : i1
}

// -----

// weight encoding: unknown part
func.func @f() {
  // expected-error @+1 {{unknown quantized weight part 'zeros'; expected weight, scale, offset or global_scale}}
  %w = ingot.weight "w" {encoding = #ingot.encoding<zeros, #ingot.quant<int4, group_size = 32, zero>>, handle = 0 : i64} : tensor<4x1xf16>
  return
}

// -----

// weight encoding: an offset only for int4
func.func @f() {
  // expected-error @+1 {{only int4 has an offset (zero or min) part, not nvfp4}}
  %w = ingot.weight "w" {encoding = #ingot.encoding<offset, #ingot.quant<nvfp4>>, handle = 0 : i64} : tensor<4x2xf16>
  return
}

// -----

// weight encoding: a global scale only for nvfp4
func.func @f() {
  // expected-error @+1 {{only nvfp4 has a global_scale part, not mxfp4}}
  %w = ingot.weight "w" {encoding = #ingot.encoding<global_scale, #ingot.quant<mxfp4>>, handle = 0 : i64} : tensor<1xf32>
  return
}

// -----

// weight encoding: the packed weight's element type follows the scheme
func.func @f() {
  // expected-error @+1 {{the weight of #ingot.quant<mxfp4> must be an [N, K] f4E2M1FN tensor, got 'tensor<4x32xui4>'}}
  %w = ingot.weight "w" {encoding = #ingot.encoding<weight, #ingot.quant<mxfp4>>, handle = 0 : i64} : tensor<4x32xui4>
  return
}

// -----

// weight encoding: mxfp4 scales are E8M0
func.func @f() {
  // expected-error @+1 {{the scale of #ingot.quant<mxfp4> must be an [N, K/32] f8E8M0FNU tensor}}
  %w = ingot.weight "w" {encoding = #ingot.encoding<scale, #ingot.quant<mxfp4>>, handle = 0 : i64} : tensor<4x1xf8E4M3FN>
  return
}

// -----

// weight encoding: the nvfp4 global scale is one f32
func.func @f() {
  // expected-error @+1 {{the global_scale of #ingot.quant<nvfp4> must be tensor<f32> or tensor<1xf32>}}
  %w = ingot.weight "w" {encoding = #ingot.encoding<global_scale, #ingot.quant<nvfp4>>, handle = 0 : i64} : tensor<2xf32>
  return
}

// -----

// weight: source_quant and encoding exclude each other
func.func @f() {
  // expected-error @+1 {{takes 'source_quant' or 'encoding', not both}}
  %w = ingot.weight "w" {encoding = #ingot.encoding<weight, #ingot.quant<int4, group_size = 32, min>>, handle = 0 : i64, source_quant = #ingot.quant<int4, group_size = 32, min>} : tensor<4x32xui4>
  return
}

// -----

// weight: source_quant describes matrices
func.func @f() {
  // expected-error @+1 {{'source_quant' describes [N, K] matrices}}
  %w = ingot.weight "w" {handle = 0 : i64, source_quant = #ingot.quant<int4, group_size = 32, min>} : tensor<64xf32>
  return
}

// -----

// gated_linear: silu or gelu only
func.func @f(%x: tensor<?x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error @+1 {{activation must be "silu" or "gelu", got "relu"}}
  %y = ingot.gated_linear %x, %w, %w {activation = "relu"} : tensor<?x8xf32>, tensor<16x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  return
}

// -----

// gated_linear: gate and up of one type
func.func @f(%x: tensor<?x8xf32>, %wg: tensor<16x8xf32>, %wu: tensor<16x8xbf16>) {
  // expected-error @+1 {{gate and up weights must have one type, got 'tensor<16x8xf32>' and 'tensor<16x8xbf16>'}}
  %y = ingot.gated_linear %x, %wg, %wu {activation = "silu"} : tensor<?x8xf32>, tensor<16x8xf32>, tensor<16x8xbf16> -> tensor<?x16xf32>
  return
}

// -----

// gated_linear: the result has the weights' rows
func.func @f(%x: tensor<?x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error @+1 {{result has 32 features but the gate weight produces 16}}
  %y = ingot.gated_linear %x, %w, %w {activation = "silu"} : tensor<?x8xf32>, tensor<16x8xf32>, tensor<16x8xf32> -> tensor<?x32xf32>
  return
}

// -----

// gated_linear: each weight's scales are checked against the scheme
func.func @f(%x: tensor<?x32xf32>, %w: tensor<16x32xui4>, %s: tensor<16x1xf16>, %bad: tensor<16x2xf16>) {
  // expected-error @+1 {{int4 group min must be 'tensor<16x1xf16>', got 'tensor<16x2xf16>'}}
  %y = ingot.gated_linear %x, %w, %w gate_scales(%s, %s : tensor<16x1xf16>, tensor<16x1xf16>) up_scales(%s, %bad : tensor<16x1xf16>, tensor<16x2xf16>) {activation = "silu", quant = #ingot.quant<int4, group_size = 32, min>} : tensor<?x32xf32>, tensor<16x32xui4>, tensor<16x32xui4> -> tensor<?x16xf32>
  return
}

// -----

// gated_linear: unquantized weights take no scales
func.func @f(%x: tensor<?x8xf32>, %w: tensor<16x8xf32>, %s: tensor<16xf32>) {
  // expected-error @+1 {{takes scale operands only with a #ingot.quant scheme}}
  %y = ingot.gated_linear %x, %w, %w gate_scales(%s : tensor<16xf32>) {activation = "silu"} : tensor<?x8xf32>, tensor<16x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  return
}

// -----

// gated_linear: gate and up scales of one type
func.func @f(%x: tensor<?x32xf32>, %w: tensor<16x32xui4>, %s: tensor<16x1xf16>, %t: tensor<16x1xf32>) {
  // expected-error @+1 {{gate and up scales must have the same types}}
  %y = ingot.gated_linear %x, %w, %w gate_scales(%s, %s : tensor<16x1xf16>, tensor<16x1xf16>) up_scales(%t, %t : tensor<16x1xf32>, tensor<16x1xf32>) {activation = "silu", quant = #ingot.quant<int4, group_size = 32, min>} : tensor<?x32xf32>, tensor<16x32xui4>, tensor<16x32xui4> -> tensor<?x16xf32>
  return
}

// -----

// scale: the factor must be finite
func.func @f(%a: tensor<?x128xf32>) {
  // expected-error @+1 {{'ingot.scale' op factor must be finite, got INF}}
  %y = ingot.scale %a {factor = 0x7F800000 : f32} : tensor<?x128xf32>
  return
}

// -----

// scale: the factor is an f32 attribute (ODS)
func.func @f(%a: tensor<?x128xf32>) {
  // expected-error @+1 {{'ingot.scale' op attribute 'factor' failed to satisfy constraint: 32-bit float attribute}}
  %y = ingot.scale %a {factor = 2 : i32} : tensor<?x128xf32>
  return
}

// -----

// scale: one type, not merely compatible shapes
func.func @f(%a: tensor<4x128xf32>) {
  // expected-error @+1 {{'ingot.scale' op expects operands and result of one type (a static token count must be spelled on every one)}}
  %y = "ingot.scale"(%a) {factor = 2.0 : f32} : (tensor<4x128xf32>) -> tensor<?x128xf32>
  return
}
