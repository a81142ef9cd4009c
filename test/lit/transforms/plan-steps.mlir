// ingot-plan-steps gives each activation its storage slot (ingot.slots, one entry per
// result): a slot is reused once the last reader of its buffer ran, the slot freed last
// first; add_rms_norm's sum takes the residual's slot when nothing reads the residual
// later. Returned values and the KV cache get no slot.
// RUN: ingot-opt %s --split-input-file --ingot-plan-steps | FileCheck %s
// The pass recomputes an earlier plan: running it twice prints the same module.
// RUN: ingot-opt %s --split-input-file --ingot-plan-steps | ingot-opt --split-input-file --ingot-plan-steps | FileCheck %s

// CHECK-LABEL: func.func @reuse
// CHECK: ingot.add %arg0, %arg1 {ingot.slots = array<i32: 0>}
// CHECK: ingot.add %{{.*}}, %arg0 {ingot.slots = array<i32: 1>}
// CHECK: ingot.add %[[B:.*]], %[[B]] {ingot.slots = array<i32: 0>}
// CHECK: ingot.add_rms_norm {{.*}}ingot.slots = array<i32: 0, 1>
// CHECK: %[[D:.*]] = ingot.add
// CHECK-NOT: ingot.slots
// CHECK: return %[[D]]
func.func @reuse(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %a = ingot.add %x, %y : tensor<?x8xf32>
  %b = ingot.add %a, %x : tensor<?x8xf32>
  %c = ingot.add %b, %b : tensor<?x8xf32>
  %w = ingot.weight "norm" {handle = 0 : i64} : tensor<8xf32>
  %s, %n = ingot.add_rms_norm %x, %c, %w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %d = ingot.add %s, %n : tensor<?x8xf32>
  return %d : tensor<?x8xf32>
}

// -----

// The residual is read after the fused op: the sum gets a slot of its own; the returned
// norm gets none.
// CHECK-LABEL: func.func @residual_read_later
// CHECK: ingot.add %arg0, %arg1 {ingot.slots = array<i32: 0>}
// CHECK: ingot.add_rms_norm {{.*}}ingot.slots = array<i32: 1, -1>
// CHECK: ingot.add {{.*}}ingot.slots = array<i32: 2>
func.func @residual_read_later(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>)
    -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %a = ingot.add %x, %y : tensor<?x8xf32>
  %w = ingot.weight "norm" {handle = 0 : i64} : tensor<8xf32>
  %s, %n = ingot.add_rms_norm %x, %a, %w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %d = ingot.add %a, %s : tensor<?x8xf32>
  %e = ingot.add %d, %x : tensor<?x8xf32>
  return %n, %e : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// Rows of different widths share a slot (the runtime sizes it for its widest buffer).
// CHECK-LABEL: func.func @widths
// CHECK: ingot.silu_mul {{.*}}ingot.slots = array<i32: 0>
// CHECK: ingot.linear {{.*}}ingot.slots = array<i32: 1>
// CHECK: ingot.linear {{.*}}ingot.slots = array<i32: 0>
// CHECK: ingot.silu_mul {{.*}}ingot.slots = array<i32: 1>
func.func @widths(%g: tensor<?x16xf32>, %u: tensor<?x16xf32>) -> tensor<?x8xf32> {
  %m = ingot.silu_mul %g, %u : tensor<?x16xf32>
  %w = ingot.weight "down" {handle = 0 : i64} : tensor<8x16xf32>
  %o = ingot.linear %m, %w : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %w2 = ingot.weight "up" {handle = 1 : i64} : tensor<16x8xf32>
  %p = ingot.linear %o, %w2 : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %r = ingot.silu_mul %p, %p : tensor<?x16xf32>
  %w3 = ingot.weight "down2" {handle = 2 : i64} : tensor<8x16xf32>
  %z = ingot.linear %r, %w3 : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  return %z : tensor<?x8xf32>
}

// -----

// A residual that is also the added value is not overwritten.
// CHECK-LABEL: func.func @read_twice
// CHECK: ingot.add_rms_norm {{.*}}ingot.slots = array<i32: 1, 2>
func.func @read_twice(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %a = ingot.add %x, %y : tensor<?x8xf32>
  %w = ingot.weight "norm" {handle = 0 : i64} : tensor<8xf32>
  %s, %n = ingot.add_rms_norm %a, %a, %w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %d = ingot.add %s, %n : tensor<?x8xf32>
  return %d : tensor<?x8xf32>
}
