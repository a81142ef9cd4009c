// ingot-fuse-elementwise fuses a gated MLP's gate and up linears and their silu_mul or
// gelu_mul into one ingot.gated_linear at the activation's place, for dense weights and for
// quantized ones (each weight keeps its scales). It leaves the three ops alone when a
// linear has a bias or another reader, when the linears read different inputs or differ
// in weight type or scheme, and when fp8 weights make the MLP a W8A8 one on CUDA.
// RUN: ingot-opt %s --split-input-file --ingot-fuse-elementwise | FileCheck %s
// RUN: ingot-opt %s --split-input-file --ingot-fuse-elementwise | ingot-opt --split-input-file | FileCheck %s

// The Llama MLP: gate, up, silu_mul, down.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>)
// CHECK: %[[WG:.*]] = ingot.weight "gate"
// CHECK: %[[WU:.*]] = ingot.weight "up"
// CHECK: %[[WD:.*]] = ingot.weight "down"
// CHECK-NOT: ingot.silu_mul
// CHECK: %[[Y:.*]] = ingot.gated_linear %[[X]], %[[WG]], %[[WU]] {activation = "silu"} : tensor<?x8xf32>, tensor<16x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
// CHECK-NEXT: %[[D:.*]] = ingot.linear %[[Y]], %[[WD]]
// CHECK-NEXT: return %[[D]]
func.func @mlp(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %wg = ingot.weight "gate" {handle = 0 : i64} : tensor<16x8xf32>
  %wu = ingot.weight "up" {handle = 1 : i64} : tensor<16x8xf32>
  %wd = ingot.weight "down" {handle = 2 : i64} : tensor<8x16xf32>
  %g = ingot.linear %x, %wg : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %u = ingot.linear %x, %wu : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %a = ingot.silu_mul %g, %u : tensor<?x16xf32>
  %d = ingot.linear %a, %wd : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  return %d : tensor<?x8xf32>
}

// -----

// Gemma's gelu_mul, int4 weights: each weight keeps its own scales.
// CHECK-LABEL: func.func @int4_gelu
// CHECK: ingot.gated_linear %arg0, %arg1, %arg2 gate_scales(%arg3, %arg4 : tensor<16x1xf16>, tensor<16x1xf16>) up_scales(%arg5, %arg6 : tensor<16x1xf16>, tensor<16x1xf16>) {activation = "gelu", quant = #ingot.quant<int4, group_size = 32, min>} : tensor<?x32xf32>, tensor<16x32xui4>, tensor<16x32xui4> -> tensor<?x16xf32>
// CHECK-NOT: ingot.linear
// CHECK-NOT: ingot.gelu_mul
func.func @int4_gelu(%x: tensor<?x32xf32>, %wg: tensor<16x32xui4>, %wu: tensor<16x32xui4>,
                     %sg: tensor<16x1xf16>, %mg: tensor<16x1xf16>,
                     %su: tensor<16x1xf16>, %mu: tensor<16x1xf16>) -> tensor<?x16xf32> {
  %g = ingot.linear %x, %wg scales(%sg, %mg : tensor<16x1xf16>, tensor<16x1xf16>) {quant = #ingot.quant<int4, group_size = 32, min>} : tensor<?x32xf32>, tensor<16x32xui4> -> tensor<?x16xf32>
  %u = ingot.linear %x, %wu scales(%su, %mu : tensor<16x1xf16>, tensor<16x1xf16>) {quant = #ingot.quant<int4, group_size = 32, min>} : tensor<?x32xf32>, tensor<16x32xui4> -> tensor<?x16xf32>
  %a = ingot.gelu_mul %g, %u : tensor<?x16xf32>
  return %a : tensor<?x16xf32>
}

// -----

// Not fused: a bias, a second reader of the gate, two different inputs.
// CHECK-LABEL: func.func @not_fusable
// CHECK-NOT: ingot.gated_linear
// CHECK-COUNT-3: ingot.silu_mul
// CHECK-NOT: ingot.gated_linear
func.func @not_fusable(%x: tensor<?x8xf32>, %z: tensor<?x8xf32>, %w: tensor<16x8xf32>,
                       %b: tensor<16xf32>) -> (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>) {
  %g1 = ingot.linear %x, %w bias(%b : tensor<16xf32>) : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %u1 = ingot.linear %x, %w : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %a1 = ingot.silu_mul %g1, %u1 : tensor<?x16xf32>
  %g2 = ingot.linear %x, %w : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %u2 = ingot.linear %x, %w : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %a2 = ingot.silu_mul %g2, %u2 : tensor<?x16xf32>
  %g3 = ingot.linear %x, %w : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %u3 = ingot.linear %z, %w : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %a3 = ingot.silu_mul %g3, %u3 : tensor<?x16xf32>
  return %a1, %a2, %g2, %a3 : tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>
}

// -----

// Not fused: gate and up of different weight types.
// CHECK-LABEL: func.func @mixed_types
// CHECK-NOT: ingot.gated_linear
// CHECK: ingot.silu_mul
func.func @mixed_types(%x: tensor<?x8xf32>, %wg: tensor<16x8xf32>, %wu: tensor<16x8xbf16>) -> tensor<?x16xf32> {
  %g = ingot.linear %x, %wg : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %u = ingot.linear %x, %wu : tensor<?x8xf32>, tensor<16x8xbf16> -> tensor<?x16xf32>
  %a = ingot.silu_mul %g, %u : tensor<?x16xf32>
  return %a : tensor<?x16xf32>
}

// -----

// Not fused: fp8 gate and up (W8A8 on CUDA) ...
// CHECK-LABEL: func.func @fp8_gate_up
// CHECK-NOT: ingot.gated_linear
// CHECK: ingot.silu_mul
func.func @fp8_gate_up(%x: tensor<?x8xf32>, %wg: tensor<16x8xf8E4M3FN>, %wu: tensor<16x8xf8E4M3FN>,
                       %sg: tensor<16xf32>, %su: tensor<16xf32>) -> tensor<?x16xf32> {
  %g = ingot.linear %x, %wg scales(%sg : tensor<16xf32>) {quant = #ingot.quant<per_channel>} : tensor<?x8xf32>, tensor<16x8xf8E4M3FN> -> tensor<?x16xf32>
  %u = ingot.linear %x, %wu scales(%su : tensor<16xf32>) {quant = #ingot.quant<per_channel>} : tensor<?x8xf32>, tensor<16x8xf8E4M3FN> -> tensor<?x16xf32>
  %a = ingot.silu_mul %g, %u : tensor<?x16xf32>
  return %a : tensor<?x16xf32>
}

// -----

// ... or an fp8 down projection, whose input rows the silu_mul quantizes on CUDA.
// CHECK-LABEL: func.func @fp8_down
// CHECK-NOT: ingot.gated_linear
// CHECK: ingot.silu_mul
func.func @fp8_down(%x: tensor<?x8xf32>, %wg: tensor<16x8xf32>, %wu: tensor<16x8xf32>,
                    %wd: tensor<8x16xf8E4M3FN>, %sd: tensor<8xf32>) -> tensor<?x8xf32> {
  %g = ingot.linear %x, %wg : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %u = ingot.linear %x, %wu : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %a = ingot.silu_mul %g, %u : tensor<?x16xf32>
  %d = ingot.linear %a, %wd scales(%sd : tensor<8xf32>) {quant = #ingot.quant<per_channel>} : tensor<?x16xf32>, tensor<8x16xf8E4M3FN> -> tensor<?x8xf32>
  return %d : tensor<?x8xf32>
}
