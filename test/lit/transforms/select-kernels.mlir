// ingot-select-kernels records which CUDA kernels the artifact carries for the targets: the
// module's targets, the fused kernels' element types (those of the step's intermediate
// values, f32 first; not the returned logits, not the weights), the fp8 KV write when a
// cache holds fp8 codes, the scale kernel when a step scales and gelu_mul when a step gates
// by GELU; each attention op's decode
// kernel, or why none takes its shape.
// Without targets it records nothing and removes an earlier run's choices.
// RUN: ingot-opt %s --split-input-file --ingot-specialize-attention --ingot-select-kernels=targets=sm_90a,simt | FileCheck %s
// RUN: ingot-opt %s --split-input-file --ingot-specialize-attention --ingot-select-kernels=targets=sm_90a,simt | ingot-opt --split-input-file --ingot-select-kernels | FileCheck %s --check-prefix=NONE

// NONE-NOT: ingot.cuda_targets
// NONE-NOT: ingot.fused_kernels
// NONE-NOT: ingot.fused_kv_write_fp8
// NONE-NOT: ingot.fused_scale
// NONE-NOT: ingot.fused_gelu_mul
// NONE-NOT: ingot.cuda_kernel
// NONE-NOT: ingot.cpu_only

// A bf16 step: bf16 intermediates only (the f32 logits are returned).
// CHECK: module attributes {ingot.cuda_targets = ["sm_90a", "simt"], ingot.fused_kernels = [bf16]}
!bf16cache = !ingot.kv_cache<num_layers = 3, num_kv_heads = 2, head_dim = 64, element_type = bf16>
func.func @step(%q: tensor<?x256xbf16>, %cache: !bf16cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>,
                %qs: tensor<?xi32>, %qw: tensor<?x2176xbf16>, %rows: tensor<?xi32>) -> tensor<?x8xf32> {
  // CHECK: ingot.attention {{.*}}ingot.cuda_kernel = "ingot_decode_dense_bf16_d64_g2"
  %dense = ingot.attention %q, %cache, %bt, %sl, %qs
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 64 : i32, scale = 0.125 : f32}
      : tensor<?x256xbf16>, !bf16cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  // CHECK: ingot.attention {{.*}}ingot.cuda_kernel = "ingot_decode_variant0_bf16_d64_g2"
  // CHECK-SAME: ingot.variant = "variant0"
  %causal = ingot.attention %dense, %cache, %bt, %sl, %qs
      {layer = 1 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 64 : i32, scale = 0.125 : f32}
      : tensor<?x256xbf16>, !bf16cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
    mask {
    ^bb0(%b: index, %h: index, %qi: index, %kv: index):
      %v = arith.cmpi ule, %kv, %qi : index
      ingot.yield %v : i1
    }
  // 17 query heads per kv head: more than the kernels take.
  // CHECK: ingot.attention {{.*}}ingot.cpu_only = "attention dense with head dim 64, 17 query heads per kv head, bf16 queries and bf16 KV cache: the kernels take
  // CHECK-NOT: ingot.cuda_kernel
  // CHECK-SAME: }
  %wide = ingot.attention %qw, %cache, %bt, %sl, %qs
      {layer = 2 : i32, num_heads = 34 : i32, num_kv_heads = 2 : i32, head_dim = 64 : i32, scale = 0.125 : f32}
      : tensor<?x2176xbf16>, !bf16cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  %head = ingot.weight "lm_head.weight" {handle = 0 : i64} : tensor<8x256xbf16>
  %logits = ingot.logits %causal, %head, %rows : tensor<?x256xbf16>, tensor<8x256xbf16>, tensor<?xi32> -> tensor<?x8xf32>
  return %logits : tensor<?x8xf32>
}

// -----

// f32 queries over an fp8 pool: the fp8 decode kernel and the fp8 KV write. f32 queries
// over a bf16 pool: no kernel.
// CHECK: module attributes {ingot.cuda_targets = ["sm_90a", "simt"], ingot.fused_kernels = [f32], ingot.fused_kv_write_fp8}
!fp8cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 32, element_type = f8E4M3FN>
!bf16cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 32, element_type = bf16>
func.func @step(%q: tensor<?x64xf32>, %cache: !fp8cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>,
                %qs: tensor<?xi32>, %other: !bf16cache) -> tensor<?x64xf32> {
  // CHECK: ingot.cuda_kernel = "ingot_decode_dense_f32_kvfp8_d32_g1"
  %a = ingot.attention %q, %cache, %bt, %sl, %qs
      {layer = 0 : i32, num_heads = 2 : i32, num_kv_heads = 2 : i32, head_dim = 32 : i32, scale = 0.125 : f32}
      : tensor<?x64xf32>, !fp8cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  // CHECK: ingot.cpu_only = "attention dense with head dim 32, 1 query heads per kv head, f32 queries and bf16 KV cache: the kernels take f32 or bf16 queries and the same or an fp8 KV cache"
  %b = ingot.attention %a, %other, %bt, %sl, %qs
      {layer = 0 : i32, num_heads = 2 : i32, num_kv_heads = 2 : i32, head_dim = 32 : i32, scale = 0.125 : f32}
      : tensor<?x64xf32>, !bf16cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  return %b : tensor<?x64xf32>
}

// -----

// Quantized linears: one GEMV kernel per (format, int4 scale type), in kernel order; fp8
// weights bring the W8A8 kernels. Unquantized linears and the embedding ask for none.
// CHECK: module attributes {
// CHECK-SAME: ingot.quant_kernels = ["ingot_quant_gemv_int4min_f32", "ingot_quant_gemv_int4zero_f16", "ingot_quant_gemv_fp8", "ingot_quant_gemv_nvfp4"]
// CHECK-SAME: ingot.w8a8_kernels
// NONE: module {
func.func @step(%x: tensor<?x256xf32>) -> tensor<?x128xf32> {
  %w8 = ingot.weight "fp8.weight" {handle = 0 : i64} : tensor<128x256xf8E4M3FN>
  %s8 = ingot.weight "fp8.scale" {handle = 1 : i64} : tensor<128xf32>
  %a = ingot.linear %x, %w8 scales(%s8 : tensor<128xf32>) {quant = #ingot.quant<per_channel>} : tensor<?x256xf32>, tensor<128x256xf8E4M3FN> -> tensor<?x128xf32>
  %w4 = ingot.weight "nvfp4.weight" {handle = 2 : i64} : tensor<128x256xf4E2M1FN>
  %bs = ingot.weight "nvfp4.block_scale" {handle = 3 : i64} : tensor<128x16xf8E4M3FN>
  %gs = ingot.weight "nvfp4.global_scale" {handle = 4 : i64} : tensor<f32>
  %b = ingot.linear %x, %w4 scales(%bs, %gs : tensor<128x16xf8E4M3FN>, tensor<f32>) {quant = #ingot.quant<nvfp4>} : tensor<?x256xf32>, tensor<128x256xf4E2M1FN> -> tensor<?x128xf32>
  %wz = ingot.weight "int4zero.weight" {handle = 5 : i64} : tensor<128x256xui4>
  %sz = ingot.weight "int4zero.scale" {handle = 6 : i64} : tensor<128x8xf16>
  %zz = ingot.weight "int4zero.zero" {handle = 7 : i64} : tensor<128x8xf16>
  %c = ingot.linear %x, %wz scales(%sz, %zz : tensor<128x8xf16>, tensor<128x8xf16>) {quant = #ingot.quant<int4, group_size = 32, zero>} : tensor<?x256xf32>, tensor<128x256xui4> -> tensor<?x128xf32>
  %wm = ingot.weight "int4min.weight" {handle = 8 : i64} : tensor<128x256xui4>
  %sm = ingot.weight "int4min.scale" {handle = 9 : i64} : tensor<128x8xf32>
  %mm = ingot.weight "int4min.min" {handle = 10 : i64} : tensor<128x8xf32>
  %d = ingot.linear %x, %wm scales(%sm, %mm : tensor<128x8xf32>, tensor<128x8xf32>) {quant = #ingot.quant<int4, group_size = 32, min>} : tensor<?x256xf32>, tensor<128x256xui4> -> tensor<?x128xf32>
  %again = ingot.linear %x, %wm scales(%sm, %mm : tensor<128x8xf32>, tensor<128x8xf32>) {quant = #ingot.quant<int4, group_size = 32, min>} : tensor<?x256xf32>, tensor<128x256xui4> -> tensor<?x128xf32>
  %wd = ingot.weight "dense.weight" {handle = 11 : i64} : tensor<128x256xf32>
  %e = ingot.linear %x, %wd : tensor<?x256xf32>, tensor<128x256xf32> -> tensor<?x128xf32>
  %s1 = ingot.add %a, %b : tensor<?x128xf32>
  %s2 = ingot.add %s1, %c : tensor<?x128xf32>
  %s3 = ingot.add %s2, %d : tensor<?x128xf32>
  %s4 = ingot.add %s3, %again : tensor<?x128xf32>
  %s5 = ingot.add %s4, %e : tensor<?x128xf32>
  return %s5 : tensor<?x128xf32>
}

// -----

// The producers of an fp8 linear's rows are marked ingot.fp8_rows: an rms_norm, the norm
// of an add_rms_norm (not its sum) and a silu_mul. A producer whose rows only an int4 or
// dense linear reads is not, nor is a function argument's or an add's.
// CHECK-LABEL: func.func @producers
// CHECK: ingot.rms_norm {{.*}}{epsilon = {{.*}}, ingot.fp8_rows}
// CHECK: ingot.add_rms_norm {{.*}}{epsilon = {{.*}}, ingot.fp8_rows}
// CHECK: ingot.silu_mul {{.*}}{ingot.fp8_rows}
// CHECK: %[[ADD:.*]] = ingot.add
// CHECK-NOT: ingot.fp8_rows
// CHECK: return
// NONE-LABEL: func.func @producers
// NONE-NOT: ingot.fp8_rows
func.func @producers(%x: tensor<?x256xf32>, %r: tensor<?x256xf32>) -> tensor<?x256xf32> {
  %n = ingot.weight "norm" {handle = 0 : i64} : tensor<256xf32>
  %w8 = ingot.weight "fp8.weight" {handle = 1 : i64} : tensor<256x256xf8E4M3FN>
  %s8 = ingot.weight "fp8.scale" {handle = 2 : i64} : tensor<256xf32>
  %y = ingot.rms_norm %x, %n {epsilon = 1.0e-05 : f32} : tensor<?x256xf32>, tensor<256xf32>
  %a = ingot.linear %y, %w8 scales(%s8 : tensor<256xf32>) {quant = #ingot.quant<per_channel>} : tensor<?x256xf32>, tensor<256x256xf8E4M3FN> -> tensor<?x256xf32>
  %sum, %z = ingot.add_rms_norm %a, %r, %n {epsilon = 1.0e-05 : f32} : tensor<?x256xf32>, tensor<256xf32>
  %b = ingot.linear %z, %w8 scales(%s8 : tensor<256xf32>) {quant = #ingot.quant<per_channel>} : tensor<?x256xf32>, tensor<256x256xf8E4M3FN> -> tensor<?x256xf32>
  %m = ingot.silu_mul %b, %sum : tensor<?x256xf32>
  %c = ingot.linear %m, %w8 scales(%s8 : tensor<256xf32>) {quant = #ingot.quant<per_channel>} : tensor<?x256xf32>, tensor<256x256xf8E4M3FN> -> tensor<?x256xf32>
  %d = ingot.add %c, %sum : tensor<?x256xf32>
  %e = ingot.linear %d, %w8 scales(%s8 : tensor<256xf32>) {quant = #ingot.quant<per_channel>} : tensor<?x256xf32>, tensor<256x256xf8E4M3FN> -> tensor<?x256xf32>
  %wd = ingot.weight "dense.weight" {handle = 3 : i64} : tensor<256x256xf32>
  %y2 = ingot.rms_norm %e, %n {epsilon = 1.0e-05 : f32} : tensor<?x256xf32>, tensor<256xf32>
  %f = ingot.linear %y2, %wd : tensor<?x256xf32>, tensor<256x256xf32> -> tensor<?x256xf32>
  %g = ingot.linear %x, %w8 scales(%s8 : tensor<256xf32>) {quant = #ingot.quant<per_channel>} : tensor<?x256xf32>, tensor<256x256xf8E4M3FN> -> tensor<?x256xf32>
  %h = ingot.add %f, %g : tensor<?x256xf32>
  return %h : tensor<?x256xf32>
}

// -----

// A gated linear's quantized weights bring their GEMV kernels like a linear's (here the
// only ones); its rows are no W8A8 producer's.
// CHECK-LABEL: module attributes
// CHECK-SAME: ingot.quant_kernels = ["ingot_quant_gemv_int4min_f16"]
// CHECK-NOT: ingot.w8a8_kernels
// CHECK: ingot.gated_linear
// CHECK-NOT: ingot.fp8_rows
func.func @step(%x: tensor<?x256xf32>) -> tensor<?x128xf32> {
  %wg = ingot.weight "gate.weight" {handle = 0 : i64} : tensor<128x256xui4>
  %sg = ingot.weight "gate.scale" {handle = 1 : i64} : tensor<128x8xf16>
  %mg = ingot.weight "gate.min" {handle = 2 : i64} : tensor<128x8xf16>
  %wu = ingot.weight "up.weight" {handle = 3 : i64} : tensor<128x256xui4>
  %su = ingot.weight "up.scale" {handle = 4 : i64} : tensor<128x8xf16>
  %mu = ingot.weight "up.min" {handle = 5 : i64} : tensor<128x8xf16>
  %y = ingot.gated_linear %x, %wg, %wu gate_scales(%sg, %mg : tensor<128x8xf16>, tensor<128x8xf16>) up_scales(%su, %mu : tensor<128x8xf16>, tensor<128x8xf16>) {activation = "silu", quant = #ingot.quant<int4, group_size = 32, min>} : tensor<?x256xf32>, tensor<128x256xui4>, tensor<128x256xui4> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

// A step that scales brings the scale kernel, once for the module.
// CHECK: module attributes {ingot.cuda_targets = ["sm_90a", "simt"], ingot.fused_kernels = [f32], ingot.fused_scale}
func.func @step(%x: tensor<?x256xf32>) -> tensor<?x256xf32> {
  %a = ingot.scale %x {factor = 16.0 : f32} : tensor<?x256xf32>
  %b = ingot.scale %a {factor = 0.5 : f32} : tensor<?x256xf32>
  %c = ingot.add %a, %b : tensor<?x256xf32>
  return %c : tensor<?x256xf32>
}

// -----

// GELU gating, fused into a gated_linear or alone, brings the gelu_mul kernel; SiLU does not.
// CHECK: module attributes {ingot.cuda_targets = ["sm_90a", "simt"], ingot.fused_gelu_mul, ingot.fused_kernels = [f32]}
func.func @step(%x: tensor<?x256xf32>) -> tensor<?x128xf32> {
  %wg = ingot.weight "gate.weight" {handle = 0 : i64} : tensor<128x256xf32>
  %wu = ingot.weight "up.weight" {handle = 1 : i64} : tensor<128x256xf32>
  %y = ingot.gated_linear %x, %wg, %wu {activation = "gelu"} : tensor<?x256xf32>, tensor<128x256xf32>, tensor<128x256xf32> -> tensor<?x128xf32>
  %z = ingot.add %y, %y : tensor<?x128xf32>
  return %z : tensor<?x128xf32>
}

// -----

// CHECK: module attributes {ingot.cuda_targets = ["sm_90a", "simt"], ingot.fused_gelu_mul, ingot.fused_kernels = [f32]}
func.func @step(%g: tensor<?x128xf32>, %u: tensor<?x128xf32>) -> tensor<?x128xf32> {
  %a = ingot.gelu_mul %g, %u : tensor<?x128xf32>
  %b = ingot.add %a, %u : tensor<?x128xf32>
  return %b : tensor<?x128xf32>
}

// -----

// CHECK: module attributes {ingot.cuda_targets = ["sm_90a", "simt"], ingot.fused_kernels = [f32]}
func.func @step(%g: tensor<?x128xf32>, %u: tensor<?x128xf32>) -> tensor<?x128xf32> {
  %a = ingot.silu_mul %g, %u : tensor<?x128xf32>
  %b = ingot.add %a, %u : tensor<?x128xf32>
  return %b : tensor<?x128xf32>
}
