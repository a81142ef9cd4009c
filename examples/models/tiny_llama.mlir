// A complete tiny Llama serving step: 2 layers, vocab 256, hidden 64, 4 heads of 16, 2 KV
// heads (GQA), MLP 128, tied embeddings. One call runs a batch of requests, each with some
// new tokens (prefill, chunked prefill or decode alike), over the paged KV cache:
//   %tokens, %positions  [T]      new token ids and their RoPE positions
//   %cache                        the KV pool (runtime-sized number of blocks)
//   %block_tables        [R, B]   KV blocks of each request
//   %seq_lens            [R]      KV slots of each request, new tokens included
//   %query_start         [R + 1]  CSR offsets of each request's new tokens in [T]
//   %slot_mapping        [T]      KV slot each new token is written to
//   %logit_rows          [N]      which of the T rows produce logits
// and returns the logits [N, 256] and the updated cache. Weights are references: handles
// 0..19 in order of first use, names as in the Hugging Face checkpoint. The module's
// `ingot.model` dictionary is the model config the compile driver reads.
//
// Round-tripped by test/lit/examples/model-tiny_llama.test.

!cache = !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>

// CHECK: module attributes {ingot.model = {architecture = "llama", head_dim = 16 : i32, hidden_size = 64 : i64, intermediate_size = 128 : i64, max_context = 512 : i64, name = "tiny-llama", num_heads = 4 : i32, num_kv_heads = 2 : i32, num_layers = 2 : i32, rms_norm_eps = 9.99999974E-6 : f32, rope_theta = 1.000000e+04 : f64, tie_word_embeddings = true, vocab_size = 256 : i64}}
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%{{.*}}: tensor<?xi32>, %{{.*}}: tensor<?xi32>, %{{.*}}: !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>, %{{.*}}: tensor<?x?xi32>, %{{.*}}: tensor<?xi32>, %{{.*}}: tensor<?xi32>, %{{.*}}: tensor<?xi32>, %{{.*}}: tensor<?xi32>)
// CHECK-SAME: -> (tensor<?x256xf32>, !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>)
// CHECK: ingot.weight "model.embed_tokens.weight" {handle = 0 : i64} : tensor<256x64xf32>
// CHECK: ingot.weight "model.layers.0.input_layernorm.weight" {handle = 1 : i64} : tensor<64xf32>
// CHECK: ingot.weight "model.layers.0.self_attn.q_proj.weight" {handle = 2 : i64} : tensor<64x64xf32>
// CHECK: ingot.weight "model.layers.0.self_attn.k_proj.weight" {handle = 3 : i64} : tensor<32x64xf32>
// CHECK: ingot.weight "model.layers.0.self_attn.v_proj.weight" {handle = 4 : i64} : tensor<32x64xf32>
// CHECK: ingot.weight "model.layers.0.self_attn.o_proj.weight" {handle = 5 : i64} : tensor<64x64xf32>
// CHECK: ingot.weight "model.layers.0.post_attention_layernorm.weight" {handle = 6 : i64} : tensor<64xf32>
// CHECK: ingot.weight "model.layers.0.mlp.gate_proj.weight" {handle = 7 : i64} : tensor<128x64xf32>
// CHECK: ingot.weight "model.layers.0.mlp.up_proj.weight" {handle = 8 : i64} : tensor<128x64xf32>
// CHECK: ingot.weight "model.layers.0.mlp.down_proj.weight" {handle = 9 : i64} : tensor<64x128xf32>
// CHECK: ingot.weight "model.layers.1.input_layernorm.weight" {handle = 10 : i64} : tensor<64xf32>
// CHECK: ingot.weight "model.layers.1.self_attn.q_proj.weight" {handle = 11 : i64} : tensor<64x64xf32>
// CHECK: ingot.weight "model.layers.1.self_attn.k_proj.weight" {handle = 12 : i64} : tensor<32x64xf32>
// CHECK: ingot.weight "model.layers.1.self_attn.v_proj.weight" {handle = 13 : i64} : tensor<32x64xf32>
// CHECK: ingot.weight "model.layers.1.self_attn.o_proj.weight" {handle = 14 : i64} : tensor<64x64xf32>
// CHECK: ingot.weight "model.layers.1.post_attention_layernorm.weight" {handle = 15 : i64} : tensor<64xf32>
// CHECK: ingot.weight "model.layers.1.mlp.gate_proj.weight" {handle = 16 : i64} : tensor<128x64xf32>
// CHECK: ingot.weight "model.layers.1.mlp.up_proj.weight" {handle = 17 : i64} : tensor<128x64xf32>
// CHECK: ingot.weight "model.layers.1.mlp.down_proj.weight" {handle = 18 : i64} : tensor<64x128xf32>
// CHECK: ingot.weight "model.norm.weight" {handle = 19 : i64} : tensor<64xf32>
// CHECK: %[[LOGITS:.*]] = ingot.logits
// CHECK-NEXT: return %[[LOGITS]], %{{.*}} : tensor<?x256xf32>, !ingot.kv_cache<num_layers = 2, num_kv_heads = 2, head_dim = 16, element_type = f32>

module attributes {ingot.model = {architecture = "llama", name = "tiny-llama",
    vocab_size = 256 : i64, hidden_size = 64 : i64, intermediate_size = 128 : i64,
    num_layers = 2 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32,
    max_context = 512 : i64, rms_norm_eps = 1.0e-05 : f32, rope_theta = 1.0e+04 : f64,
    tie_word_embeddings = true}} {
  func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %cache: !cache,
                  %block_tables: tensor<?x?xi32>, %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>,
                  %slot_mapping: tensor<?xi32>, %logit_rows: tensor<?xi32>)
      -> (tensor<?x256xf32>, !cache) {
    // Token embeddings (tied: the same table projects to logits at the end).
    %embed = ingot.weight "model.embed_tokens.weight" {handle = 0 : i64} : tensor<256x64xf32>
    %h0 = ingot.embedding %tokens, %embed : tensor<?xi32>, tensor<256x64xf32> -> tensor<?x64xf32>

    // ---- Decoder layer 0: attention block ----
    %attn_norm_w_0 = ingot.weight "model.layers.0.input_layernorm.weight" {handle = 1 : i64} : tensor<64xf32>
    %x_0 = ingot.rms_norm %h0, %attn_norm_w_0 {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<64xf32>
    %wq_0 = ingot.weight "model.layers.0.self_attn.q_proj.weight" {handle = 2 : i64} : tensor<64x64xf32>
    %q_0 = ingot.linear %x_0, %wq_0 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
    %wk_0 = ingot.weight "model.layers.0.self_attn.k_proj.weight" {handle = 3 : i64} : tensor<32x64xf32>
    %k_0 = ingot.linear %x_0, %wk_0 : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
    %wv_0 = ingot.weight "model.layers.0.self_attn.v_proj.weight" {handle = 4 : i64} : tensor<32x64xf32>
    %v_0 = ingot.linear %x_0, %wv_0 : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
    // RoPE on queries and keys; positions are the tokens' positions in their requests.
    %q_rot_0 = ingot.rope %q_0, %positions {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64} : tensor<?x64xf32>, tensor<?xi32>
    %k_rot_0 = ingot.rope %k_0, %positions {num_heads = 2 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64} : tensor<?x32xf32>, tensor<?xi32>
    // Store this step's keys/values, then attend over the whole (paged) KV of each request.
    %cache_0 = ingot.kv_write %cache, %k_rot_0, %v_0, %slot_mapping {layer = 0 : i32} : !cache, tensor<?x32xf32>, tensor<?xi32>
    %attn_0 = ingot.attention %q_rot_0, %cache_0, %block_tables, %seq_lens, %query_start
        {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
        : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
    mask {
    ^bb0(%b: index, %h: index, %q: index, %kv: index):
      %causal = arith.cmpi ule, %kv, %q : index
      ingot.yield %causal : i1
    }
    %wo_0 = ingot.weight "model.layers.0.self_attn.o_proj.weight" {handle = 5 : i64} : tensor<64x64xf32>
    %o_0 = ingot.linear %attn_0, %wo_0 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
    %h_attn_0 = ingot.add %h0, %o_0 : tensor<?x64xf32>
    // ---- Decoder layer 0: MLP block ----
    %mlp_norm_w_0 = ingot.weight "model.layers.0.post_attention_layernorm.weight" {handle = 6 : i64} : tensor<64xf32>
    %y_0 = ingot.rms_norm %h_attn_0, %mlp_norm_w_0 {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<64xf32>
    %wgate_0 = ingot.weight "model.layers.0.mlp.gate_proj.weight" {handle = 7 : i64} : tensor<128x64xf32>
    %gate_0 = ingot.linear %y_0, %wgate_0 : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
    %wup_0 = ingot.weight "model.layers.0.mlp.up_proj.weight" {handle = 8 : i64} : tensor<128x64xf32>
    %up_0 = ingot.linear %y_0, %wup_0 : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
    %act_0 = ingot.silu_mul %gate_0, %up_0 : tensor<?x128xf32>
    %wdown_0 = ingot.weight "model.layers.0.mlp.down_proj.weight" {handle = 9 : i64} : tensor<64x128xf32>
    %down_0 = ingot.linear %act_0, %wdown_0 : tensor<?x128xf32>, tensor<64x128xf32> -> tensor<?x64xf32>
    %h1 = ingot.add %h_attn_0, %down_0 : tensor<?x64xf32>

    // ---- Decoder layer 1: attention block ----
    %attn_norm_w_1 = ingot.weight "model.layers.1.input_layernorm.weight" {handle = 10 : i64} : tensor<64xf32>
    %x_1 = ingot.rms_norm %h1, %attn_norm_w_1 {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<64xf32>
    %wq_1 = ingot.weight "model.layers.1.self_attn.q_proj.weight" {handle = 11 : i64} : tensor<64x64xf32>
    %q_1 = ingot.linear %x_1, %wq_1 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
    %wk_1 = ingot.weight "model.layers.1.self_attn.k_proj.weight" {handle = 12 : i64} : tensor<32x64xf32>
    %k_1 = ingot.linear %x_1, %wk_1 : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
    %wv_1 = ingot.weight "model.layers.1.self_attn.v_proj.weight" {handle = 13 : i64} : tensor<32x64xf32>
    %v_1 = ingot.linear %x_1, %wv_1 : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
    // RoPE on queries and keys; positions are the tokens' positions in their requests.
    %q_rot_1 = ingot.rope %q_1, %positions {num_heads = 4 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64} : tensor<?x64xf32>, tensor<?xi32>
    %k_rot_1 = ingot.rope %k_1, %positions {num_heads = 2 : i32, head_dim = 16 : i32, theta = 1.0e+04 : f64} : tensor<?x32xf32>, tensor<?xi32>
    // Store this step's keys/values, then attend over the whole (paged) KV of each request.
    %cache_1 = ingot.kv_write %cache_0, %k_rot_1, %v_1, %slot_mapping {layer = 1 : i32} : !cache, tensor<?x32xf32>, tensor<?xi32>
    %attn_1 = ingot.attention %q_rot_1, %cache_1, %block_tables, %seq_lens, %query_start
        {layer = 1 : i32, num_heads = 4 : i32, num_kv_heads = 2 : i32, head_dim = 16 : i32, scale = 0.25 : f32}
        : tensor<?x64xf32>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
    mask {
    ^bb0(%b: index, %h: index, %q: index, %kv: index):
      %causal = arith.cmpi ule, %kv, %q : index
      ingot.yield %causal : i1
    }
    %wo_1 = ingot.weight "model.layers.1.self_attn.o_proj.weight" {handle = 14 : i64} : tensor<64x64xf32>
    %o_1 = ingot.linear %attn_1, %wo_1 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
    %h_attn_1 = ingot.add %h1, %o_1 : tensor<?x64xf32>
    // ---- Decoder layer 1: MLP block ----
    %mlp_norm_w_1 = ingot.weight "model.layers.1.post_attention_layernorm.weight" {handle = 15 : i64} : tensor<64xf32>
    %y_1 = ingot.rms_norm %h_attn_1, %mlp_norm_w_1 {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<64xf32>
    %wgate_1 = ingot.weight "model.layers.1.mlp.gate_proj.weight" {handle = 16 : i64} : tensor<128x64xf32>
    %gate_1 = ingot.linear %y_1, %wgate_1 : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
    %wup_1 = ingot.weight "model.layers.1.mlp.up_proj.weight" {handle = 17 : i64} : tensor<128x64xf32>
    %up_1 = ingot.linear %y_1, %wup_1 : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
    %act_1 = ingot.silu_mul %gate_1, %up_1 : tensor<?x128xf32>
    %wdown_1 = ingot.weight "model.layers.1.mlp.down_proj.weight" {handle = 18 : i64} : tensor<64x128xf32>
    %down_1 = ingot.linear %act_1, %wdown_1 : tensor<?x128xf32>, tensor<64x128xf32> -> tensor<?x64xf32>
    %h2 = ingot.add %h_attn_1, %down_1 : tensor<?x64xf32>

    // Final norm, then logits only for the rows that need them (tied embedding table).
    %final_norm_w = ingot.weight "model.norm.weight" {handle = 19 : i64} : tensor<64xf32>
    %hn = ingot.rms_norm %h2, %final_norm_w {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<64xf32>
    %logits = ingot.logits %hn, %embed, %logit_rows : tensor<?x64xf32>, tensor<256x64xf32>, tensor<?xi32> -> tensor<?x256xf32>
    return %logits, %cache_1 : tensor<?x256xf32>, !cache
  }
}
