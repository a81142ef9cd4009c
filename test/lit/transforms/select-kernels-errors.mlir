// ingot-select-kernels refuses a target it does not know, and an attention op with regions
// that ingot-specialize-attention has not named.
// RUN: not ingot-opt %s --split-input-file --ingot-select-kernels=targets=sm_9x 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: ingot-opt %s --split-input-file --ingot-select-kernels=targets=compute_80 -verify-diagnostics

// TARGET: error: ingot-select-kernels: 'sm_9x' is not a CUDA target (sm_XY, sm_XYa, sm_XYf, compute_XY, simt)

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 32, element_type = f32>
func.func @step(%q: tensor<?x64xf32>, %cache: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>,
                %qs: tensor<?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{ingot-select-kernels: this attention's regions have no variant name; run ingot-specialize-attention first}}
  %o = ingot.attention %q, %cache, %bt, %sl, %qs
      {layer = 0 : i32, num_heads = 2 : i32, num_kv_heads = 2 : i32, head_dim = 32 : i32, scale = 0.125 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
    mask {
    ^bb0(%b: index, %h: index, %qi: index, %kv: index):
      %v = arith.cmpi ule, %kv, %qi : index
      ingot.yield %v : i1
    }
  return %o : tensor<?x64xf32>
}

