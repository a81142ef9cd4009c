// Tensor-parallel parts of the ingot dialect round-trip: all_reduce, all_gather, the
// #ingot.shard weight attribute and the vocab-parallel embedding's vocab_start.
// RUN: ingot-opt %s -split-input-file | FileCheck %s
// RUN: ingot-opt %s -split-input-file | ingot-opt -split-input-file | FileCheck %s

module attributes {ingot.tp = 2 : i64} {
  // CHECK-LABEL: func.func @step_tp1
  // CHECK-SAME: ingot.tp_rank = 1
  func.func @step_tp1(%tokens: tensor<?xi32>, %x: tensor<?x32xf32>, %rows: tensor<?xi32>)
      -> (tensor<?x64xf32>, tensor<?x256xf32>) attributes {ingot.tp_rank = 1 : i64} {
    // CHECK: ingot.weight "model.embed_tokens.weight" {handle = 0 : i64, shard = #ingot.shard<dim = 0, offset = 128, size = 128, source_size = 256>} : tensor<128x64xf32>
    %table = ingot.weight "model.embed_tokens.weight" {handle = 0 : i64, shard = #ingot.shard<dim = 0, offset = 128, size = 128, source_size = 256>} : tensor<128x64xf32>
    // CHECK: ingot.embedding %{{.*}}, %{{.*}} {vocab_start = 128 : i64} : tensor<?xi32>, tensor<128x64xf32> -> tensor<?x64xf32>
    %e = ingot.embedding %tokens, %table {vocab_start = 128 : i64} : tensor<?xi32>, tensor<128x64xf32> -> tensor<?x64xf32>
    // CHECK: ingot.all_reduce %{{.*}} : tensor<?x64xf32>
    %h = ingot.all_reduce %e : tensor<?x64xf32>
    // CHECK: shard = #ingot.shard<dim = 1, offset = 32, size = 32, source_size = 64>} : tensor<64x32xf32>
    %wo = ingot.weight "model.layers.0.self_attn.o_proj.weight" {handle = 1 : i64, shard = #ingot.shard<dim = 1, offset = 32, size = 32, source_size = 64>} : tensor<64x32xf32>
    %part = ingot.linear %x, %wo : tensor<?x32xf32>, tensor<64x32xf32> -> tensor<?x64xf32>
    %sum = ingot.all_reduce %part : tensor<?x64xf32>
    %y = ingot.add %h, %sum : tensor<?x64xf32>
    %local = ingot.logits %y, %table, %rows : tensor<?x64xf32>, tensor<128x64xf32>, tensor<?xi32> -> tensor<?x128xf32>
    // CHECK: ingot.all_gather %{{.*}} : tensor<?x128xf32> -> tensor<?x256xf32>
    %logits = ingot.all_gather %local : tensor<?x128xf32> -> tensor<?x256xf32>
    return %y, %logits : tensor<?x64xf32>, tensor<?x256xf32>
  }
}

// -----

// Without a module group size, all_gather takes any whole multiple of the input.
// CHECK-LABEL: func.func @gather_any_group
func.func @gather_any_group(%x: tensor<?x48xbf16>) -> tensor<?x144xbf16> {
  // CHECK: ingot.all_gather %{{.*}} : tensor<?x48xbf16> -> tensor<?x144xbf16>
  %y = ingot.all_gather %x : tensor<?x48xbf16> -> tensor<?x144xbf16>
  return %y : tensor<?x144xbf16>
}
