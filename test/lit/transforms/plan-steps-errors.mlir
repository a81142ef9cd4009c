// ingot-plan-steps fails, at the op, on an op that is no serving step and on an
// activation whose rows are not [?, static dims...]; and on a module without a serving step.
// RUN: ingot-opt %s --split-input-file --ingot-plan-steps -verify-diagnostics

func.func @step(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'arith.addf' op is not a step of the serving program}}
  %y = arith.addf %x, %x : tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @step(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'ingot.add' op result #0 of type 'tensor<4x8xf32>' cannot be an activation: its shape must be [?, static dims...] (the token rows)}}
  %y = ingot.add %x, %x : tensor<4x8xf32>
  %z = ingot.add %y, %x : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{expected a serving-step function named 'step' (or exactly one function), found 2 functions}}
module {
  func.func @a() { return }
  func.func @b() { return }
}
