// ingot-shard-tensor-parallel on one GQA decoder layer shaped like SmolLM2's attention
// (9 query heads over 3 kv heads, head_dim 2), with Qwen2-style q/k/v biases, an o bias,
// an MLP of 10 and an untied head over a vocabulary of 32:
// - tp=2: kv heads split 2 + 1 (q heads 6 + 3), MLP 5 + 5, vocab 16 + 16;
// - tp=4: kv head 0 replicated on ranks 0 and 1 (q heads 2 + 1), kv heads 1 and 2 on
//   ranks 2 and 3 (3 q heads each), MLP 3 + 3 + 2 + 2, vocab 8 each;
// - tp=1: the module is unchanged.
// RUN: ingot-opt %s --ingot-shard-tensor-parallel=tp=2 | FileCheck %s --check-prefix=TP2
// RUN: ingot-opt %s --ingot-shard-tensor-parallel=tp=4 | FileCheck %s --check-prefix=TP4
// RUN: ingot-opt %s --ingot-shard-tensor-parallel=tp=1 | FileCheck %s --check-prefix=TP1
// RUN: ingot-opt %s --ingot-shard-tensor-parallel=tp=4 | ingot-opt | FileCheck %s --check-prefix=TP4

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 3, head_dim = 2, element_type = f32>

module attributes {ingot.model = {architecture = "llama", name = "gqa-9-3", vocab_size = 32 : i64,
    hidden_size = 16 : i64, intermediate_size = 10 : i64, num_layers = 1 : i32, num_heads = 9 : i32,
    num_kv_heads = 3 : i32, head_dim = 2 : i32, max_context = 64 : i64, rms_norm_eps = 1.0e-05 : f32,
    rope_theta = 1.0e+04 : f64, tie_word_embeddings = false}} {
  func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %cache: !cache,
                  %block_tables: tensor<?x?xi32>, %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>,
                  %slot_mapping: tensor<?xi32>, %logit_rows: tensor<?xi32>)
      -> (tensor<?x32xf32>, !cache) {
    %embed = ingot.weight "model.embed_tokens.weight" {handle = 0 : i64} : tensor<32x16xf32>
    %h0 = ingot.embedding %tokens, %embed : tensor<?xi32>, tensor<32x16xf32> -> tensor<?x16xf32>
    %norm_w = ingot.weight "model.layers.0.input_layernorm.weight" {handle = 1 : i64} : tensor<16xf32>
    %x = ingot.rms_norm %h0, %norm_w {epsilon = 1.0e-05 : f32} : tensor<?x16xf32>, tensor<16xf32>
    %wq = ingot.weight "model.layers.0.self_attn.q_proj.weight" {handle = 2 : i64} : tensor<18x16xf32>
    %bq = ingot.weight "model.layers.0.self_attn.q_proj.bias" {handle = 3 : i64} : tensor<18xf32>
    %wk = ingot.weight "model.layers.0.self_attn.k_proj.weight" {handle = 4 : i64} : tensor<6x16xf32>
    %bk = ingot.weight "model.layers.0.self_attn.k_proj.bias" {handle = 5 : i64} : tensor<6xf32>
    %wv = ingot.weight "model.layers.0.self_attn.v_proj.weight" {handle = 6 : i64} : tensor<6x16xf32>
    %bv = ingot.weight "model.layers.0.self_attn.v_proj.bias" {handle = 7 : i64} : tensor<6xf32>
    %q = ingot.linear %x, %wq bias(%bq : tensor<18xf32>) : tensor<?x16xf32>, tensor<18x16xf32> -> tensor<?x18xf32>
    %k = ingot.linear %x, %wk bias(%bk : tensor<6xf32>) : tensor<?x16xf32>, tensor<6x16xf32> -> tensor<?x6xf32>
    %v = ingot.linear %x, %wv bias(%bv : tensor<6xf32>) : tensor<?x16xf32>, tensor<6x16xf32> -> tensor<?x6xf32>
    %q_rot = ingot.rope %q, %positions {num_heads = 9 : i32, head_dim = 2 : i32, theta = 1.0e+04 : f64} : tensor<?x18xf32>, tensor<?xi32>
    %k_rot = ingot.rope %k, %positions {num_heads = 3 : i32, head_dim = 2 : i32, theta = 1.0e+04 : f64} : tensor<?x6xf32>, tensor<?xi32>
    %cache_0 = ingot.kv_write %cache, %k_rot, %v, %slot_mapping {layer = 0 : i32} : !cache, tensor<?x6xf32>, tensor<?xi32>
    %attn = ingot.attention %q_rot, %cache_0, %block_tables, %seq_lens, %query_start
        {layer = 0 : i32, num_heads = 9 : i32, num_kv_heads = 3 : i32, head_dim = 2 : i32, scale = 0.7 : f32}
        : tensor<?x18xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
    mask {
    ^bb0(%b: index, %h: index, %qi: index, %kv: index):
      %causal = arith.cmpi ule, %kv, %qi : index
      ingot.yield %causal : i1
    }
    %wo = ingot.weight "model.layers.0.self_attn.o_proj.weight" {handle = 8 : i64} : tensor<16x18xf32>
    %bo = ingot.weight "model.layers.0.self_attn.o_proj.bias" {handle = 9 : i64} : tensor<16xf32>
    %o = ingot.linear %attn, %wo bias(%bo : tensor<16xf32>) : tensor<?x18xf32>, tensor<16x18xf32> -> tensor<?x16xf32>
    %h1 = ingot.add %h0, %o : tensor<?x16xf32>
    %post_w = ingot.weight "model.layers.0.post_attention_layernorm.weight" {handle = 10 : i64} : tensor<16xf32>
    %y = ingot.rms_norm %h1, %post_w {epsilon = 1.0e-05 : f32} : tensor<?x16xf32>, tensor<16xf32>
    %wg = ingot.weight "model.layers.0.mlp.gate_proj.weight" {handle = 11 : i64} : tensor<10x16xf32>
    %wu = ingot.weight "model.layers.0.mlp.up_proj.weight" {handle = 12 : i64} : tensor<10x16xf32>
    %wd = ingot.weight "model.layers.0.mlp.down_proj.weight" {handle = 13 : i64} : tensor<16x10xf32>
    %gate = ingot.linear %y, %wg : tensor<?x16xf32>, tensor<10x16xf32> -> tensor<?x10xf32>
    %up = ingot.linear %y, %wu : tensor<?x16xf32>, tensor<10x16xf32> -> tensor<?x10xf32>
    %act = ingot.silu_mul %gate, %up : tensor<?x10xf32>
    %down = ingot.linear %act, %wd : tensor<?x10xf32>, tensor<16x10xf32> -> tensor<?x16xf32>
    %h2 = ingot.add %h1, %down : tensor<?x16xf32>
    %final_w = ingot.weight "model.norm.weight" {handle = 14 : i64} : tensor<16xf32>
    %z = ingot.rms_norm %h2, %final_w {epsilon = 1.0e-05 : f32} : tensor<?x16xf32>, tensor<16xf32>
    %head = ingot.weight "lm_head.weight" {handle = 15 : i64} : tensor<32x16xf32>
    %logits = ingot.logits %z, %head, %logit_rows : tensor<?x16xf32>, tensor<32x16xf32>, tensor<?xi32> -> tensor<?x32xf32>
    return %logits, %cache_0 : tensor<?x32xf32>, !cache
  }
}

// TP1: module attributes {ingot.model = {{.*}}} {
// TP1-NOT: ingot.tp
// TP1-LABEL: func.func @step(
// TP1-NOT: shard
// TP1-NOT: all_reduce
// TP1-NOT: all_gather

// TP2: module attributes {ingot.model = {{.*}}, ingot.tp = 2 : i64}
// TP2-NOT: func.func @step(
// TP2-LABEL: func.func @step_tp0(
// TP2-SAME: !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 2, element_type = f32>
// TP2-SAME: -> (tensor<?x32xf32>, !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 2, element_type = f32>)
// TP2-SAME: attributes {ingot.tp_rank = 0 : i64}
// TP2: %[[E:.*]] = ingot.weight "model.embed_tokens.weight" {handle = 0 : i64, shard = #ingot.shard<dim = 0, offset = 0, size = 16, source_size = 32>} : tensor<16x16xf32>
// TP2: %[[EMB:.*]] = ingot.embedding %{{.*}}, %[[E]] {vocab_start = 0 : i64} : tensor<?xi32>, tensor<16x16xf32> -> tensor<?x16xf32>
// TP2: %[[H0:.*]] = ingot.all_reduce %[[EMB]] : tensor<?x16xf32>
// TP2: ingot.rms_norm %[[H0]]
// TP2: "model.layers.0.self_attn.q_proj.weight" {handle = 2 : i64, shard = #ingot.shard<dim = 0, offset = 0, size = 12, source_size = 18>} : tensor<12x16xf32>
// TP2: "model.layers.0.self_attn.q_proj.bias" {handle = 3 : i64, shard = #ingot.shard<dim = 0, offset = 0, size = 12, source_size = 18>} : tensor<12xf32>
// TP2: "model.layers.0.self_attn.k_proj.weight" {handle = 4 : i64, shard = #ingot.shard<dim = 0, offset = 0, size = 4, source_size = 6>} : tensor<4x16xf32>
// TP2: "model.layers.0.self_attn.k_proj.bias" {handle = 5 : i64, shard = #ingot.shard<dim = 0, offset = 0, size = 4, source_size = 6>} : tensor<4xf32>
// TP2: "model.layers.0.self_attn.v_proj.weight" {handle = 6 : i64, shard = #ingot.shard<dim = 0, offset = 0, size = 4, source_size = 6>} : tensor<4x16xf32>
// TP2: ingot.linear {{.*}} -> tensor<?x12xf32>
// TP2: ingot.rope {{.*}} {head_dim = 2 : i32, num_heads = 6 : i32, {{.*}}} : tensor<?x12xf32>
// TP2: ingot.rope {{.*}} {head_dim = 2 : i32, num_heads = 2 : i32, {{.*}}} : tensor<?x4xf32>
// TP2: ingot.kv_write {{.*}} : !ingot.kv_cache<num_layers = 1, num_kv_heads = 2, head_dim = 2, element_type = f32>, tensor<?x4xf32>
// TP2: ingot.attention {{.*}} {head_dim = 2 : i32, layer = 0 : i32, num_heads = 6 : i32, num_kv_heads = 2 : i32, {{.*}}} : tensor<?x12xf32>
// TP2: "model.layers.0.self_attn.o_proj.weight" {handle = 8 : i64, shard = #ingot.shard<dim = 1, offset = 0, size = 12, source_size = 18>} : tensor<16x12xf32>
// TP2: %[[O:.*]] = ingot.linear %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<16xf32>) : tensor<?x12xf32>, tensor<16x12xf32> -> tensor<?x16xf32>
// TP2-NEXT: %[[OSUM:.*]] = ingot.all_reduce %[[O]] : tensor<?x16xf32>
// TP2-NEXT: ingot.add %[[H0]], %[[OSUM]]
// TP2: "model.layers.0.mlp.gate_proj.weight" {handle = 11 : i64, shard = #ingot.shard<dim = 0, offset = 0, size = 5, source_size = 10>} : tensor<5x16xf32>
// TP2: "model.layers.0.mlp.down_proj.weight" {handle = 13 : i64, shard = #ingot.shard<dim = 1, offset = 0, size = 5, source_size = 10>} : tensor<16x5xf32>
// TP2: ingot.silu_mul {{.*}} : tensor<?x5xf32>
// TP2: %[[D:.*]] = ingot.linear {{.*}} : tensor<?x5xf32>, tensor<16x5xf32> -> tensor<?x16xf32>
// TP2-NEXT: ingot.all_reduce %[[D]] : tensor<?x16xf32>
// TP2: "model.norm.weight" {handle = 14 : i64} : tensor<16xf32>
// TP2: "lm_head.weight" {handle = 15 : i64, shard = #ingot.shard<dim = 0, offset = 0, size = 16, source_size = 32>} : tensor<16x16xf32>
// TP2: %[[L:.*]] = ingot.logits {{.*}} -> tensor<?x16xf32>
// TP2-NEXT: %[[G:.*]] = ingot.all_gather %[[L]] : tensor<?x16xf32> -> tensor<?x32xf32>
// TP2-NEXT: return %[[G]], %{{.*}} : tensor<?x32xf32>, !ingot.kv_cache<num_layers = 1, num_kv_heads = 2,
// TP2-LABEL: func.func @step_tp1(
// TP2-SAME: !ingot.kv_cache<num_layers = 1, num_kv_heads = 1, head_dim = 2, element_type = f32>
// TP2-SAME: attributes {ingot.tp_rank = 1 : i64}
// TP2: shard = #ingot.shard<dim = 0, offset = 16, size = 16, source_size = 32>
// TP2: ingot.embedding {{.*}} {vocab_start = 16 : i64}
// TP2: "model.layers.0.self_attn.q_proj.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 12, size = 6, source_size = 18>} : tensor<6x16xf32>
// TP2: "model.layers.0.self_attn.k_proj.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 4, size = 2, source_size = 6>} : tensor<2x16xf32>
// TP2: ingot.attention {{.*}} {head_dim = 2 : i32, layer = 0 : i32, num_heads = 3 : i32, num_kv_heads = 1 : i32
// TP2: "model.layers.0.self_attn.o_proj.weight" {{.*}}shard = #ingot.shard<dim = 1, offset = 12, size = 6, source_size = 18>} : tensor<16x6xf32>
// The o bias is added on rank 0 only.
// TP2-NOT: o_proj.bias
// TP2: %[[O1:.*]] = ingot.linear %{{.*}}, %{{.*}} : tensor<?x6xf32>, tensor<16x6xf32> -> tensor<?x16xf32>
// TP2-NEXT: ingot.all_reduce %[[O1]]
// TP2: "model.layers.0.mlp.up_proj.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 5, size = 5, source_size = 10>} : tensor<5x16xf32>
// TP2: "lm_head.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 16, size = 16, source_size = 32>}
// TP2: ingot.all_gather {{.*}} : tensor<?x16xf32> -> tensor<?x32xf32>
// TP2-NOT: func.func

// TP4: module attributes {ingot.model = {{.*}}, ingot.tp = 4 : i64}
// TP4-LABEL: func.func @step_tp0(
// TP4-SAME: !ingot.kv_cache<num_layers = 1, num_kv_heads = 1, head_dim = 2, element_type = f32>
// TP4: "model.embed_tokens.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 0, size = 8, source_size = 32>}
// TP4: "model.layers.0.self_attn.q_proj.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 0, size = 4, source_size = 18>} : tensor<4x16xf32>
// TP4: "model.layers.0.self_attn.k_proj.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 0, size = 2, source_size = 6>} : tensor<2x16xf32>
// TP4: ingot.attention {{.*}} num_heads = 2 : i32, num_kv_heads = 1 : i32
// TP4: "model.layers.0.self_attn.o_proj.weight" {{.*}}shard = #ingot.shard<dim = 1, offset = 0, size = 4, source_size = 18>}
// TP4: "model.layers.0.mlp.gate_proj.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 0, size = 3, source_size = 10>}
// TP4: ingot.all_gather {{.*}} : tensor<?x8xf32> -> tensor<?x32xf32>
// TP4-LABEL: func.func @step_tp1(
// TP4-SAME: !ingot.kv_cache<num_layers = 1, num_kv_heads = 1, head_dim = 2, element_type = f32>
// Rank 1 shares kv head 0 with rank 0 and runs the group's third query head.
// TP4: "model.layers.0.self_attn.q_proj.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 4, size = 2, source_size = 18>} : tensor<2x16xf32>
// TP4: "model.layers.0.self_attn.q_proj.bias" {{.*}}shard = #ingot.shard<dim = 0, offset = 4, size = 2, source_size = 18>} : tensor<2xf32>
// TP4: "model.layers.0.self_attn.k_proj.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 0, size = 2, source_size = 6>} : tensor<2x16xf32>
// TP4: "model.layers.0.self_attn.v_proj.bias" {{.*}}shard = #ingot.shard<dim = 0, offset = 0, size = 2, source_size = 6>} : tensor<2xf32>
// TP4: ingot.attention {{.*}} num_heads = 1 : i32, num_kv_heads = 1 : i32
// TP4: "model.layers.0.self_attn.o_proj.weight" {{.*}}shard = #ingot.shard<dim = 1, offset = 4, size = 2, source_size = 18>}
// TP4: "model.layers.0.mlp.gate_proj.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 3, size = 3, source_size = 10>}
// TP4-LABEL: func.func @step_tp2(
// TP4: "model.layers.0.self_attn.q_proj.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 6, size = 6, source_size = 18>} : tensor<6x16xf32>
// TP4: "model.layers.0.self_attn.k_proj.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 2, size = 2, source_size = 6>} : tensor<2x16xf32>
// TP4: ingot.attention {{.*}} num_heads = 3 : i32, num_kv_heads = 1 : i32
// TP4: "model.layers.0.mlp.gate_proj.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 6, size = 2, source_size = 10>}
// TP4-LABEL: func.func @step_tp3(
// TP4-SAME: attributes {ingot.tp_rank = 3 : i64}
// TP4: "model.embed_tokens.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 24, size = 8, source_size = 32>}
// TP4: ingot.embedding {{.*}} {vocab_start = 24 : i64}
// TP4: "model.layers.0.self_attn.q_proj.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 12, size = 6, source_size = 18>} : tensor<6x16xf32>
// TP4: "model.layers.0.self_attn.k_proj.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 4, size = 2, source_size = 6>} : tensor<2x16xf32>
// TP4: "model.layers.0.self_attn.o_proj.weight" {{.*}}shard = #ingot.shard<dim = 1, offset = 12, size = 6, source_size = 18>}
// TP4: "model.layers.0.mlp.down_proj.weight" {{.*}}shard = #ingot.shard<dim = 1, offset = 8, size = 2, source_size = 10>} : tensor<16x2xf32>
// TP4: "lm_head.weight" {{.*}}shard = #ingot.shard<dim = 0, offset = 24, size = 8, source_size = 32>}
