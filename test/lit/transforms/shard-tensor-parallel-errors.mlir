// ingot-shard-tensor-parallel refuses what it cannot split, with a message naming why:
// tp < 1, more ranks than heads, step shapes it does not recognise, quantized o / down
// projections whose split would cut a quantization block, attention regions that read the head index; a vocabulary tp does not divide stays
// replicated with a warning.
// RUN: not ingot-opt %s --split-input-file --ingot-shard-tensor-parallel=tp=0 2>&1 | FileCheck %s --check-prefix=TP0
// RUN: not ingot-opt %s --split-input-file --ingot-shard-tensor-parallel=tp=5 2>&1 | FileCheck %s --check-prefix=TP5
// RUN: ingot-opt %s --split-input-file --ingot-shard-tensor-parallel=tp=2 -verify-diagnostics

// TP0: error: ingot-shard-tensor-parallel: tp must be >= 1, got 0
// TP5: error: ingot-shard-tensor-parallel: tp = 5 is more than the model's 4 attention heads

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 2, element_type = f32>

// A plain layer: 4 heads over 2 kv heads; the vocabulary (7) is odd.
func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %cache: !cache,
                %block_tables: tensor<?x?xi32>, %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>,
                %slot_mapping: tensor<?xi32>, %logit_rows: tensor<?xi32>) -> (tensor<?x7xf32>, !cache) {
  %embed = ingot.weight "model.embed_tokens.weight" {handle = 0 : i64} : tensor<7x8xf32>
  // expected-warning @+1 {{the vocabulary (7) is not a multiple of tp = 2; ingot.embedding stays replicated}}
  %x = ingot.embedding %tokens, %embed : tensor<?xi32>, tensor<7x8xf32> -> tensor<?x8xf32>
  %wq = ingot.weight "q" {handle = 1 : i64} : tensor<8x8xf32>
  %wk = ingot.weight "k" {handle = 2 : i64} : tensor<4x8xf32>
  %wv = ingot.weight "v" {handle = 3 : i64} : tensor<4x8xf32>
  %wo = ingot.weight "o" {handle = 4 : i64} : tensor<8x8xf32>
  %q = ingot.linear %x, %wq : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %k = ingot.linear %x, %wk : tensor<?x8xf32>, tensor<4x8xf32> -> tensor<?x4xf32>
  %v = ingot.linear %x, %wv : tensor<?x8xf32>, tensor<4x8xf32> -> tensor<?x4xf32>
  %c = ingot.kv_write %cache, %k, %v, %slot_mapping {layer = 0 : i32} : !cache, tensor<?x4xf32>, tensor<?xi32>
  %a = ingot.attention %q, %c, %block_tables, %seq_lens, %query_start
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 2 : i32, scale = 0.7 : f32}
      : tensor<?x8xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  %o = ingot.linear %a, %wo : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %h = ingot.add %x, %o : tensor<?x8xf32>
  // expected-warning @+1 {{the vocabulary (7) is not a multiple of tp = 2; ingot.logits stays replicated}}
  %logits = ingot.logits %h, %embed, %logit_rows : tensor<?x8xf32>, tensor<7x8xf32>, tensor<?xi32> -> tensor<?x7xf32>
  return %logits, %c : tensor<?x7xf32>, !cache
}

// -----

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 2, element_type = f32>

// The attention output feeds two ops: not a Llama-style o projection.
func.func @step(%x: tensor<?x8xf32>, %cache: !cache, %block_tables: tensor<?x?xi32>,
                %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>, %slots: tensor<?xi32>)
    -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %wq = ingot.weight "q" {handle = 1 : i64} : tensor<8x8xf32>
  %wk = ingot.weight "k" {handle = 2 : i64} : tensor<4x8xf32>
  %wv = ingot.weight "v" {handle = 3 : i64} : tensor<4x8xf32>
  %wo = ingot.weight "o" {handle = 4 : i64} : tensor<8x8xf32>
  %q = ingot.linear %x, %wq : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %k = ingot.linear %x, %wk : tensor<?x8xf32>, tensor<4x8xf32> -> tensor<?x4xf32>
  %v = ingot.linear %x, %wv : tensor<?x8xf32>, tensor<4x8xf32> -> tensor<?x4xf32>
  %c = ingot.kv_write %cache, %k, %v, %slots {layer = 0 : i32} : !cache, tensor<?x4xf32>, tensor<?xi32>
  // expected-error @+1 {{the attention output does not feed exactly one linear (the o projection)}}
  %a = ingot.attention %q, %c, %block_tables, %seq_lens, %query_start
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 2 : i32, scale = 0.7 : f32}
      : tensor<?x8xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  %o = ingot.linear %a, %wo : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  return %o, %a : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 2, element_type = f32>

// A linear outside any attention or gated MLP.
func.func @step(%x: tensor<?x8xf32>, %cache: !cache, %block_tables: tensor<?x?xi32>,
                %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>, %slots: tensor<?xi32>)
    -> (tensor<?x8xf32>, tensor<?x3xf32>) {
  %wq = ingot.weight "q" {handle = 1 : i64} : tensor<8x8xf32>
  %wk = ingot.weight "k" {handle = 2 : i64} : tensor<4x8xf32>
  %wv = ingot.weight "v" {handle = 3 : i64} : tensor<4x8xf32>
  %wo = ingot.weight "o" {handle = 4 : i64} : tensor<8x8xf32>
  %wx = ingot.weight "extra" {handle = 5 : i64} : tensor<3x8xf32>
  %q = ingot.linear %x, %wq : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %k = ingot.linear %x, %wk : tensor<?x8xf32>, tensor<4x8xf32> -> tensor<?x4xf32>
  %v = ingot.linear %x, %wv : tensor<?x8xf32>, tensor<4x8xf32> -> tensor<?x4xf32>
  %c = ingot.kv_write %cache, %k, %v, %slots {layer = 0 : i32} : !cache, tensor<?x4xf32>, tensor<?xi32>
  %a = ingot.attention %q, %c, %block_tables, %seq_lens, %query_start
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 2 : i32, scale = 0.7 : f32}
      : tensor<?x8xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  %o = ingot.linear %a, %wo : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  // expected-error @+1 {{this ingot.linear is neither a q/k/v/o projection of an attention nor a gate/up/down projection of a gated MLP}}
  %e = ingot.linear %x, %wx : tensor<?x8xf32>, tensor<3x8xf32> -> tensor<?x3xf32>
  return %o, %e : tensor<?x8xf32>, tensor<?x3xf32>
}

// -----

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 2, element_type = f32>

// ALiBi-style score reading the head index: local head numbers would be wrong.
func.func @step(%x: tensor<?x8xf32>, %cache: !cache, %block_tables: tensor<?x?xi32>,
                %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>, %slots: tensor<?xi32>)
    -> tensor<?x8xf32> {
  %wq = ingot.weight "q" {handle = 1 : i64} : tensor<8x8xf32>
  %wk = ingot.weight "k" {handle = 2 : i64} : tensor<4x8xf32>
  %wv = ingot.weight "v" {handle = 3 : i64} : tensor<4x8xf32>
  %wo = ingot.weight "o" {handle = 4 : i64} : tensor<8x8xf32>
  %q = ingot.linear %x, %wq : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %k = ingot.linear %x, %wk : tensor<?x8xf32>, tensor<4x8xf32> -> tensor<?x4xf32>
  %v = ingot.linear %x, %wv : tensor<?x8xf32>, tensor<4x8xf32> -> tensor<?x4xf32>
  %c = ingot.kv_write %cache, %k, %v, %slots {layer = 0 : i32} : !cache, tensor<?x4xf32>, tensor<?xi32>
  // expected-error @+1 {{the attention's score region reads the head index, which sharding would renumber per rank}}
  %a = ingot.attention %q, %c, %block_tables, %seq_lens, %query_start
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 2 : i32, scale = 0.7 : f32}
      : tensor<?x8xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  score {
  ^bb0(%s: f32, %b: index, %h: index, %qi: index, %kv: index):
    %hi = arith.index_cast %h : index to i32
    %hf = arith.sitofp %hi : i32 to f32
    %r = arith.subf %s, %hf : f32
    ingot.yield %r : f32
  }
  %o = ingot.linear %a, %wo : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  return %o : tensor<?x8xf32>
}

// -----

!cache8 = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 8, element_type = f32>

// A quantized o projection whose per-rank input range cuts its blocks: at tp 2 each rank
// takes 2 heads of 8 = 16 inputs, MXFP4 blocks are 32.
func.func @step(%x: tensor<?x32xf32>, %cache: !cache8, %block_tables: tensor<?x?xi32>,
                %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>, %slots: tensor<?xi32>)
    -> tensor<?x32xf32> {
  %wq = ingot.weight "q" {handle = 1 : i64} : tensor<32x32xf32>
  %wk = ingot.weight "k" {handle = 2 : i64} : tensor<16x32xf32>
  %wv = ingot.weight "v" {handle = 3 : i64} : tensor<16x32xf32>
  %wo = ingot.weight "o" {encoding = #ingot.encoding<weight, #ingot.quant<mxfp4>>, handle = 4 : i64} : tensor<32x32xf4E2M1FN>
  %so = ingot.weight "o_scale" {encoding = #ingot.encoding<scale, #ingot.quant<mxfp4>>, handle = 4 : i64} : tensor<32x1xf8E8M0FNU>
  %q = ingot.linear %x, %wq : tensor<?x32xf32>, tensor<32x32xf32> -> tensor<?x32xf32>
  %k = ingot.linear %x, %wk : tensor<?x32xf32>, tensor<16x32xf32> -> tensor<?x16xf32>
  %v = ingot.linear %x, %wv : tensor<?x32xf32>, tensor<16x32xf32> -> tensor<?x16xf32>
  %c = ingot.kv_write %cache, %k, %v, %slots {layer = 0 : i32} : !cache8, tensor<?x16xf32>, tensor<?xi32>
  %a = ingot.attention %q, %c, %block_tables, %seq_lens, %query_start
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 8 : i32, scale = 0.35 : f32}
      : tensor<?x32xf32>, !cache8, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  // expected-error @+1 {{rank 0 of 2 takes input features [0, 16) of 'o', which cut its #ingot.quant<mxfp4> blocks of 32}}
  %o = ingot.linear %a, %wo scales(%so : tensor<32x1xf8E8M0FNU>) {quant = #ingot.quant<mxfp4>} : tensor<?x32xf32>, tensor<32x32xf4E2M1FN> -> tensor<?x32xf32>
  return %o : tensor<?x32xf32>
}

// -----

!cache8 = !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 8, element_type = f32>

// A quantized down projection whose intermediate dimension (one MXFP4 block of 32) cannot
// give each of 2 ranks whole blocks.
func.func @step(%x: tensor<?x32xf32>, %cache: !cache8, %block_tables: tensor<?x?xi32>,
                %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>, %slots: tensor<?xi32>)
    -> tensor<?x32xf32> {
  %wq = ingot.weight "q" {handle = 1 : i64} : tensor<32x32xf32>
  %wk = ingot.weight "k" {handle = 2 : i64} : tensor<16x32xf32>
  %wv = ingot.weight "v" {handle = 3 : i64} : tensor<16x32xf32>
  %wo = ingot.weight "o" {handle = 4 : i64} : tensor<32x32xf32>
  %wg = ingot.weight "gate" {handle = 5 : i64} : tensor<32x32xf32>
  %wu = ingot.weight "up" {handle = 6 : i64} : tensor<32x32xf32>
  %wd = ingot.weight "down" {encoding = #ingot.encoding<weight, #ingot.quant<mxfp4>>, handle = 7 : i64} : tensor<32x32xf4E2M1FN>
  %sd = ingot.weight "down_scale" {encoding = #ingot.encoding<scale, #ingot.quant<mxfp4>>, handle = 7 : i64} : tensor<32x1xf8E8M0FNU>
  %q = ingot.linear %x, %wq : tensor<?x32xf32>, tensor<32x32xf32> -> tensor<?x32xf32>
  %k = ingot.linear %x, %wk : tensor<?x32xf32>, tensor<16x32xf32> -> tensor<?x16xf32>
  %v = ingot.linear %x, %wv : tensor<?x32xf32>, tensor<16x32xf32> -> tensor<?x16xf32>
  %c = ingot.kv_write %cache, %k, %v, %slots {layer = 0 : i32} : !cache8, tensor<?x16xf32>, tensor<?xi32>
  %a = ingot.attention %q, %c, %block_tables, %seq_lens, %query_start
      {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 8 : i32, scale = 0.35 : f32}
      : tensor<?x32xf32>, !cache8, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
  %o = ingot.linear %a, %wo : tensor<?x32xf32>, tensor<32x32xf32> -> tensor<?x32xf32>
  %g = ingot.linear %o, %wg : tensor<?x32xf32>, tensor<32x32xf32> -> tensor<?x32xf32>
  %u = ingot.linear %o, %wu : tensor<?x32xf32>, tensor<32x32xf32> -> tensor<?x32xf32>
  %act = ingot.silu_mul %g, %u : tensor<?x32xf32>
  // expected-error @+1 {{the MLP's 32 intermediate features are 1 quantization blocks of 32 (#ingot.quant<mxfp4>), too few to give each of 2 ranks whole blocks}}
  %d = ingot.linear %act, %wd scales(%sd : tensor<32x1xf8E8M0FNU>) {quant = #ingot.quant<mxfp4>} : tensor<?x32xf32>, tensor<32x32xf4E2M1FN> -> tensor<?x32xf32>
  return %d : tensor<?x32xf32>
}

// -----

// No attention to split heads over.
// expected-error @+1 {{the step has no ingot.attention to split heads over}}
func.func @step(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  return %x : tensor<?x8xf32>
}
