// A one-layer bf16 model whose attention the CUDA kernels take in full (head dim 64, 4 query
// heads per kv head, bf16 queries and KV cache): decode, combine, prefill and block-mask
// kernels. Input of compile-cuda-kernels.test.

!cache = !ingot.kv_cache<num_layers = 1, num_kv_heads = 1, head_dim = 64, element_type = bf16>

module attributes {ingot.model = {architecture = "llama", name = "bf16-attention-d64",
    vocab_size = 64 : i64, hidden_size = 256 : i64, intermediate_size = 256 : i64,
    num_layers = 1 : i32, num_heads = 4 : i32, num_kv_heads = 1 : i32, head_dim = 64 : i32,
    max_context = 256 : i64, rms_norm_eps = 1.0e-05 : f32, rope_theta = 1.0e+04 : f64,
    tie_word_embeddings = true}} {
  func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %cache: !cache,
                  %block_tables: tensor<?x?xi32>, %seq_lens: tensor<?xi32>, %query_start: tensor<?xi32>,
                  %slot_mapping: tensor<?xi32>, %logit_rows: tensor<?xi32>)
      -> (tensor<?x64xf32>, !cache) {
    %embed = ingot.weight "model.embed_tokens.weight" {handle = 0 : i64} : tensor<64x256xbf16>
    %h0 = ingot.embedding %tokens, %embed : tensor<?xi32>, tensor<64x256xbf16> -> tensor<?x256xbf16>
    %wq = ingot.weight "model.layers.0.self_attn.q_proj.weight" {handle = 1 : i64} : tensor<256x256xbf16>
    %q = ingot.linear %h0, %wq : tensor<?x256xbf16>, tensor<256x256xbf16> -> tensor<?x256xbf16>
    %wk = ingot.weight "model.layers.0.self_attn.k_proj.weight" {handle = 2 : i64} : tensor<64x256xbf16>
    %k = ingot.linear %h0, %wk : tensor<?x256xbf16>, tensor<64x256xbf16> -> tensor<?x64xbf16>
    %wv = ingot.weight "model.layers.0.self_attn.v_proj.weight" {handle = 3 : i64} : tensor<64x256xbf16>
    %v = ingot.linear %h0, %wv : tensor<?x256xbf16>, tensor<64x256xbf16> -> tensor<?x64xbf16>
    %cache_0 = ingot.kv_write %cache, %k, %v, %slot_mapping {layer = 0 : i32} : !cache, tensor<?x64xbf16>, tensor<?xi32>
    %attn = ingot.attention %q, %cache_0, %block_tables, %seq_lens, %query_start
        {layer = 0 : i32, num_heads = 4 : i32, num_kv_heads = 1 : i32, head_dim = 64 : i32, scale = 0.125 : f32}
        : tensor<?x256xbf16>, !cache, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>
    mask {
    ^bb0(%b: index, %h: index, %q_slot: index, %kv: index):
      %causal = arith.cmpi ule, %kv, %q_slot : index
      ingot.yield %causal : i1
    }
    %h1 = ingot.add %h0, %attn : tensor<?x256xbf16>
    %logits = ingot.logits %h1, %embed, %logit_rows : tensor<?x256xbf16>, tensor<64x256xbf16>, tensor<?xi32> -> tensor<?x64xf32>
    return %logits, %cache_0 : tensor<?x64xf32>, !cache
  }
}
