// Canonicalization of ingot.attention regions and ingot.scale: each function shows one rewrite (or one
// region that must stay).
// RUN: ingot-opt %s -canonicalize -split-input-file | FileCheck %s

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f32>

// A mask that yields a constant true hides nothing: the region goes.
// CHECK-LABEL: func.func @drop_constant_true_mask
// CHECK: ingot.attention
// CHECK-NOT: mask
// CHECK-NOT: ingot.yield
// CHECK: return
func.func @drop_constant_true_mask(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) -> tensor<?x64xf32> {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %t = arith.constant true
    ingot.yield %t : i1
  }
  return %o : tensor<?x64xf32>
}

// -----

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f32>

// `kv <= kv` folds to true, then the mask is dropped.
// CHECK-LABEL: func.func @drop_mask_true_after_folding
// CHECK: ingot.attention
// CHECK-NOT: mask
// CHECK: return
func.func @drop_mask_true_after_folding(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) -> tensor<?x64xf32> {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %self = arith.cmpi ule, %kv, %kv : index
    %causal = arith.cmpi ule, %kv, %qi : index
    %either = arith.ori %causal, %self : i1
    ingot.yield %either : i1
  }
  return %o : tensor<?x64xf32>
}

// -----

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f32>

// A causal mask and an always-false mask stay as they are.
// CHECK-LABEL: func.func @keep_real_masks
// CHECK: ingot.attention
// CHECK-SAME: mask {
// CHECK: %[[C:.*]] = arith.cmpi ule, %kv, %q : index
// CHECK-NEXT: ingot.yield %[[C]] : i1
// CHECK: ingot.attention
// CHECK-SAME: mask {
// CHECK: %[[F:.*]] = arith.constant false
// CHECK-NEXT: ingot.yield %[[F]] : i1
func.func @keep_real_masks(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %causal = arith.cmpi ule, %kv, %qi : index
    ingot.yield %causal : i1
  }
  %p = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %f = arith.constant false
    ingot.yield %f : i1
  }
  return %o, %p : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f32>

// A score region returning its score unchanged (here after `s * 1.0` folds) goes.
// CHECK-LABEL: func.func @drop_identity_score
// CHECK: ingot.attention
// CHECK-SAME: scale = 2.500000e-01 : f32
// CHECK-NOT: score
// CHECK: return
func.func @drop_identity_score(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) -> tensor<?x64xf32> {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  score {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
    %one = arith.constant 1.0 : f32
    %same = arith.mulf %s, %one : f32
    ingot.yield %same : f32
  }
  return %o : tensor<?x64xf32>
}

// -----

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f32>

// A constant score (here 2.0 + 3.0, folded) weighs every visible key alike: that is
// `scale = 0` without a score region. The mask stays.
// CHECK-LABEL: func.func @fold_constant_score
// CHECK: ingot.attention
// CHECK-SAME: scale = 0.000000e+00 : f32
// CHECK-SAME: mask {
// CHECK: arith.cmpi ule
// CHECK-NOT: score
// CHECK: return
func.func @fold_constant_score(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) -> tensor<?x64xf32> {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index):
    %causal = arith.cmpi ule, %kv, %qi : index
    ingot.yield %causal : i1
  } score {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
    %two = arith.constant 2.0 : f32
    %three = arith.constant 3.0 : f32
    %five = arith.addf %two, %three : f32
    ingot.yield %five : f32
  }
  return %o : tensor<?x64xf32>
}

// -----

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f32>

// softmax is shift-invariant: `s + 4.0` is `s`, and the region goes.
// CHECK-LABEL: func.func @strip_constant_shift
// CHECK: ingot.attention
// CHECK-SAME: scale = 2.500000e-01 : f32
// CHECK-NOT: score
// CHECK: return
func.func @strip_constant_shift(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) -> tensor<?x64xf32> {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  score {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
    %four = arith.constant 4.0 : f32
    %r = arith.addf %s, %four : f32
    ingot.yield %r : f32
  }
  return %o : tensor<?x64xf32>
}

// -----

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f32>

// A constant factor on the score moves into `scale`: (s * 2.0 - 1.0) -> scale 0.5;
// s / 8.0 -> scale 0.03125.
// CHECK-LABEL: func.func @fold_score_factor_into_scale
// CHECK: ingot.attention
// CHECK-SAME: scale = 5.000000e-01 : f32
// CHECK-NOT: score
// CHECK: ingot.attention
// CHECK-SAME: scale = 3.125000e-02 : f32
// CHECK-NOT: score
// CHECK: return
func.func @fold_score_factor_into_scale(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  score {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
    %two = arith.constant 2.0 : f32
    %one = arith.constant 1.0 : f32
    %d = arith.mulf %two, %s : f32
    %r = arith.subf %d, %one : f32
    ingot.yield %r : f32
  }
  %p = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  score {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
    %eight = arith.constant 8.0 : f32
    %r = arith.divf %s, %eight : f32
    ingot.yield %r : f32
  }
  return %o, %p : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 16, element_type = f32>

// Soft-capping and ALiBi depend on the score non-linearly or per key: they stay,
// though the constant shift after soft-capping is stripped.
// CHECK-LABEL: func.func @keep_real_scores
// CHECK: ingot.attention
// CHECK-SAME: scale = 2.500000e-01 : f32
// CHECK-SAME: score {
// CHECK: %[[T:.*]] = math.tanh
// CHECK: %[[CAPPED:.*]] = arith.mulf %[[T]], %{{.*}} : f32
// CHECK-NEXT: ingot.yield %[[CAPPED]] : f32
// CHECK: ingot.attention
// CHECK-SAME: score {
// CHECK: %[[BIAS:.*]] = arith.mulf
// CHECK: %[[R:.*]] = arith.addf %score, %[[BIAS]] : f32
// CHECK-NEXT: ingot.yield %[[R]] : f32
func.func @keep_real_scores(%q: tensor<?x64xf32>, %c: !cache, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>, %slopes: tensor<4xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %o = ingot.attention %q, %c, %bt, %sl, %qs {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  score {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
    %cap = arith.constant 30.0 : f32
    %ten = arith.constant 10.0 : f32
    %x = arith.divf %s, %cap : f32
    %t = math.tanh %x : f32
    %capped = arith.mulf %t, %cap : f32
    %shifted = arith.addf %capped, %ten : f32
    ingot.yield %shifted : f32
  }
  %p = ingot.attention %q, %c, %bt, %sl, %qs extra(%slopes : tensor<4xf32>) {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
      : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  score {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
    %slope = ingot.region_load 0 [%h] : f32
    %d = arith.subi %kv, %qi : index
    %d64 = arith.index_cast %d : index to i64
    %df = arith.sitofp %d64 : i64 to f32
    %bias = arith.mulf %slope, %df : f32
    %r = arith.addf %s, %bias : f32
    ingot.yield %r : f32
  }
  return %o, %p : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// A scale by 1 folds to its input; any other factor stays (two scales are not merged:
// x * a * b and x * (a * b) round differently).
// CHECK-LABEL: func.func @scale_by_one
// CHECK-NEXT: %[[S:.*]] = ingot.scale %arg0 {factor = 2.000000e+00 : f32} : tensor<?x64xf32>
// CHECK-NEXT: %[[T:.*]] = ingot.scale %[[S]] {factor = 3.000000e+00 : f32} : tensor<?x64xf32>
// CHECK-NEXT: return %arg0, %[[T]]
func.func @scale_by_one(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %a = ingot.scale %x {factor = 1.0 : f32} : tensor<?x64xf32>
  %b = ingot.scale %x {factor = 2.0 : f32} : tensor<?x64xf32>
  %c = ingot.scale %b {factor = 3.0 : f32} : tensor<?x64xf32>
  return %a, %c : tensor<?x64xf32>, tensor<?x64xf32>
}
