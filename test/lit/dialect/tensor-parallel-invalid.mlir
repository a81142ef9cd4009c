// Verifier errors of the tensor-parallel parts of the ingot dialect, one per split.
// RUN: ingot-opt %s -split-input-file -verify-diagnostics

func.func @f() {
  // expected-error @+1 {{shard size 64 differs from the weight's dimension 0 (32)}}
  %w = ingot.weight "w" {handle = 0 : i64, shard = #ingot.shard<dim = 0, offset = 0, size = 64, source_size = 64>} : tensor<32x16xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{shard dim 2 is out of range for 'tensor<32x16xf32>'}}
  %w = ingot.weight "w" {handle = 0 : i64, shard = #ingot.shard<dim = 2, offset = 0, size = 16, source_size = 32>} : tensor<32x16xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{shard offset must be >= 0, got -4}}
  %w = ingot.weight "w" {handle = 0 : i64, shard = #ingot.shard<dim = 0, offset = -4, size = 32, source_size = 64>} : tensor<32x16xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{shard size must be > 0, got 0}}
  %w = ingot.weight "w" {handle = 0 : i64, shard = #ingot.shard<dim = 0, offset = 0, size = 0, source_size = 64>} : tensor<32x16xf32>
  return
}

// -----

func.func @f() {
  // A quantized part may be sharded, but packed 4-bit codes only on byte boundaries.
  %ok = ingot.weight "w" {encoding = #ingot.encoding<weight, #ingot.quant<per_channel>>, handle = 0 : i64, shard = #ingot.shard<dim = 0, offset = 0, size = 32, source_size = 64>} : tensor<32x16xf8E4M3FN>
  // expected-error @+1 {{shard [3, 35) of packed 'f4E2M1FN' elements does not fall on bytes}}
  %w = ingot.weight "w4" {encoding = #ingot.encoding<weight, #ingot.quant<mxfp4>>, handle = 1 : i64, shard = #ingot.shard<dim = 1, offset = 3, size = 32, source_size = 64>} : tensor<8x32xf4E2M1FN>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{shard [48, 80) does not fit in the source's 64 along dim 0}}
  %w = ingot.weight "w" {handle = 0 : i64, shard = #ingot.shard<dim = 0, offset = 48, size = 32, source_size = 64>} : tensor<32x16xf32>
  return
}

// -----

func.func @f(%t: tensor<?xi32>, %table: tensor<128x64xf32>) {
  // expected-error @+1 {{vocab_start must be >= 0, got -1}}
  %e = ingot.embedding %t, %table {vocab_start = -1 : i64} : tensor<?xi32>, tensor<128x64xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @f(%x: tensor<?xf32>) {
  // expected-error @+1 {{expects a [tokens, features] tensor, got 'tensor<?xf32>'}}
  %y = ingot.all_reduce %x : tensor<?xf32>
  return
}

// -----

func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "ingot.all_reduce"(%x) : (tensor<?x64xf32>) -> tensor<?x32xf32>
  return
}

// -----

module attributes {ingot.tp = 4 : i64} {
  func.func @f(%x: tensor<?x64xf32>) {
    // expected-error @+1 {{result's last dimension 128 is not the input's 64 times the group size 4 (module 'ingot.tp')}}
    %y = ingot.all_gather %x : tensor<?x64xf32> -> tensor<?x128xf32>
    return
  }
}

// -----

func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{result's last dimension 96 is not a multiple of the input's 64}}
  %y = ingot.all_gather %x : tensor<?x64xf32> -> tensor<?x96xf32>
  return
}

// -----

func.func @f(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{dimension 0 of the result (8) differs from the input's (4)}}
  %y = ingot.all_gather %x : tensor<4x64xf32> -> tensor<8x128xf32>
  return
}

// -----

func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{result element type 'bf16' differs from the input's 'f32'}}
  %y = ingot.all_gather %x : tensor<?x64xf32> -> tensor<?x128xbf16>
  return
}
