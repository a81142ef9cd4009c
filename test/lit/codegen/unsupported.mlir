// Ops the CPU bytecode cannot express are diagnosed at the op.
// RUN: not ingot-region-bc %s 2>&1 | FileCheck %s

// CHECK: error: 'math.sin' is not supported in CPU score region bytecode

func.func @unsupported(%q: tensor<?x64xf32>, %cache: !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) -> tensor<?x64xf32> {
  %o = ingot.attention %q, %cache, %bt, %sl, %qs
         {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 2.500000e-01 : f32}
         : tensor<?x64xf32>, !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>,
           tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
       score {
       ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
         %r = math.sin %s : f32
         ingot.yield %r : f32
       }
  return %o : tensor<?x64xf32>
}
