// ingot-specialize-attention fails, at the op, on a region the bytecode cannot express,
// and on a module without a serving step.
// RUN: ingot-opt %s --split-input-file --ingot-specialize-attention -verify-diagnostics

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @step(%q: tensor<?x64xf32>, %cache: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>,
                %qs: tensor<?xi32>) -> tensor<?x64xf32> {
  %o = ingot.attention %q, %cache, %bt, %sl, %qs
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
    score {
    ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
      // expected-error @+1 {{'math.sin' is not supported in CPU score region bytecode}}
      %r = math.sin %s : f32
      ingot.yield %r : f32
    }
  return %o : tensor<?x64xf32>
}

// -----

// expected-error @+1 {{expected a serving-step function named 'step' (or exactly one function), found 2 functions}}
module {
  func.func @a() { return }
  func.func @b() { return }
}
