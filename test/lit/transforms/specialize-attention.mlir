// ingot-specialize-attention names each distinct (mask, score) pair of the step's attention
// ops "variant<N>", in the order of first use; ops whose regions lower to the same bytecode
// share a name, ops without regions get none, and running it again changes nothing.
// RUN: ingot-opt %s --split-input-file --ingot-specialize-attention | FileCheck %s
// RUN: ingot-opt %s --split-input-file --ingot-specialize-attention | ingot-opt --split-input-file --ingot-specialize-attention | FileCheck %s

!cache = !ingot.kv_cache<num_layers = 4, num_kv_heads = 2, head_dim = 16, element_type = f32>

// CHECK-LABEL: func.func @step
func.func @step(%q: tensor<?x64xf32>, %cache: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>,
                %qs: tensor<?xi32>) -> tensor<?x64xf32> {
  // CHECK: ingot.attention {{.*}} {head_dim = 16 : i32, layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, scale = 2.500000e-01 : f32} :
  %dense = ingot.attention %q, %cache, %bt, %sl, %qs
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  // CHECK: ingot.attention {{.*}}ingot.variant = "variant0"
  %causal = ingot.attention %dense, %cache, %bt, %sl, %qs
      {layer = 1 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
    mask {
    ^bb0(%b: index, %h: index, %qi: index, %kv: index):
      %v = arith.cmpi ule, %kv, %qi : index
      ingot.yield %v : i1
    }
  // A soft-capped score: a second variant.
  // CHECK: ingot.attention {{.*}}ingot.variant = "variant1"
  %capped = ingot.attention %causal, %cache, %bt, %sl, %qs
      {layer = 2 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
    score {
    ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
      %cap = arith.constant 30.0 : f32
      %x = arith.divf %s, %cap : f32
      %t = math.tanh %x : f32
      %r = arith.mulf %t, %cap : f32
      ingot.yield %r : f32
    }
  // The causal mask again, spelled with other names and a dead op: the same bytecode, so
  // the same variant.
  // CHECK: ingot.attention {{.*}}ingot.variant = "variant0"
  %again = ingot.attention %capped, %cache, %bt, %sl, %qs
      {layer = 3 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
    mask {
    ^bb0(%req: index, %head: index, %query: index, %key: index):
      %unused = arith.addi %req, %head : index
      %visible = arith.cmpi ule, %key, %query : index
      ingot.yield %visible : i1
    }
  return %again : tensor<?x64xf32>
}

// -----

// A name from an earlier run, or one written by hand, is recomputed.
// CHECK-LABEL: func.func @step
// CHECK: ingot.attention {{.*}}ingot.variant = "variant0"
// CHECK-NOT: stale
!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f32>
func.func @step(%q: tensor<?x64xf32>, %cache: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>,
                %qs: tensor<?xi32>) -> tensor<?x64xf32> {
  %o = ingot.attention %q, %cache, %bt, %sl, %qs
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32, ingot.variant = "stale"}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
    mask {
    ^bb0(%b: index, %h: index, %qi: index, %kv: index):
      %v = arith.cmpi ule, %kv, %qi : index
      ingot.yield %v : i1
    }
  return %o : tensor<?x64xf32>
}
