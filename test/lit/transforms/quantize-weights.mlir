// ingot-quantize-weights: each format's weight and scale types and shapes, names and
// handles of the derived weights, skip patterns, the embedding table and output head left
// alone, int4 schemes kept from the checkpoint (source_quant), and bad options.
// RUN: ingot-opt %s --ingot-quantize-weights | FileCheck %s --check-prefix=INT4
// RUN: ingot-opt %s --ingot-quantize-weights 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN
// RUN: ingot-opt %s --ingot-quantize-weights="format=int4 group-size=64" | FileCheck %s --check-prefix=G64
// RUN: ingot-opt %s --ingot-quantize-weights="format=fp8" | FileCheck %s --check-prefix=FP8
// RUN: ingot-opt %s --ingot-quantize-weights="format=nvfp4" | FileCheck %s --check-prefix=NVFP4
// RUN: ingot-opt %s --ingot-quantize-weights="format=mxfp4" | FileCheck %s --check-prefix=MXFP4
// RUN: ingot-opt %s --ingot-quantize-weights="format=nvfp4 skip=*.mlp.*,q_proj" | FileCheck %s --check-prefix=SKIP
// RUN: ingot-opt %s --ingot-quantize-weights="format=fp8 quantize-head=true" | FileCheck %s --check-prefix=HEAD
// RUN: ingot-opt %s --ingot-quantize-weights | ingot-opt --ingot-quantize-weights | FileCheck %s --check-prefix=INT4
// RUN: not ingot-opt %s --ingot-quantize-weights="format=int3" 2>&1 | FileCheck %s --check-prefix=BAD-FORMAT
// RUN: not ingot-opt %s --ingot-quantize-weights="group-size=48" 2>&1 | FileCheck %s --check-prefix=BAD-GROUP
// RUN: not ingot-opt %s --ingot-quantize-weights="skip=[a" 2>&1 | FileCheck %s --check-prefix=BAD-SKIP

func.func @layer(%x: tensor<?x64xf32>, %h: tensor<?x128xf32>, %c: tensor<?x48xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x16xf32>) {
  %q = ingot.weight "model.layers.0.self_attn.q_proj.weight" {handle = 3 : i64} : tensor<64x64xf32>
  %down = ingot.weight "model.layers.0.mlp.down_proj.weight" {handle = 9 : i64} : tensor<64x128xbf16>
  %bias = ingot.weight "model.layers.0.mlp.down_proj.bias" {handle = 10 : i64} : tensor<64xf32>
  %odd = ingot.weight "model.layers.0.odd.weight" {handle = 11 : i64} : tensor<16x48xf16>
  %y = ingot.linear %x, %q : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %z = ingot.linear %h, %down bias(%bias : tensor<64xf32>) : tensor<?x128xf32>, tensor<64x128xbf16> -> tensor<?x64xf32>
  %o = ingot.linear %c, %odd : tensor<?x48xf32>, tensor<16x48xf16> -> tensor<?x16xf32>
  return %y, %z, %o : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x16xf32>
}

// INT4-LABEL: func.func @layer
// INT4-NOT: tensor<64x64xf32>
// INT4: %[[Q:.*]] = ingot.weight "model.layers.0.self_attn.q_proj.weight" {encoding = #ingot.encoding<weight, #ingot.quant<int4, group_size = 32, min>>, handle = 3 : i64} : tensor<64x64xui4>
// INT4-NEXT: %[[QS:.*]] = ingot.weight "model.layers.0.self_attn.q_proj.weight_scale" {encoding = #ingot.encoding<scale, #ingot.quant<int4, group_size = 32, min>>, handle = 3 : i64} : tensor<64x2xf16>
// INT4-NEXT: %[[QM:.*]] = ingot.weight "model.layers.0.self_attn.q_proj.weight_min" {encoding = #ingot.encoding<offset, #ingot.quant<int4, group_size = 32, min>>, handle = 3 : i64} : tensor<64x2xf16>
// INT4: ingot.weight "model.layers.0.mlp.down_proj.weight" {{.*}} : tensor<64x128xui4>
// INT4: ingot.weight "model.layers.0.mlp.down_proj.weight_scale" {{.*}} : tensor<64x4xf16>
// INT4: ingot.weight "model.layers.0.mlp.down_proj.weight_min" {{.*}} : tensor<64x4xf16>
// INT4: %[[ODD:.*]] = ingot.weight "model.layers.0.odd.weight" {handle = 11 : i64} : tensor<16x48xf16>
// INT4: ingot.linear %{{.*}}, %[[Q]] scales(%[[QS]], %[[QM]] : tensor<64x2xf16>, tensor<64x2xf16>) {quant = #ingot.quant<int4, group_size = 32, min>} : tensor<?x64xf32>, tensor<64x64xui4> -> tensor<?x64xf32>
// INT4: ingot.linear %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<64xf32>) scales({{.*}} : tensor<64x4xf16>, tensor<64x4xf16>) {quant = #ingot.quant<int4, group_size = 32, min>} : tensor<?x128xf32>, tensor<64x128xui4> -> tensor<?x64xf32>
// INT4: ingot.linear %{{.*}}, %[[ODD]] : tensor<?x48xf32>, tensor<16x48xf16> -> tensor<?x16xf32>

// WARN: warning: weight 'model.layers.0.odd.weight' stays unquantized: its 48 input features are not a multiple of the int4 block size 32

// G64: ingot.weight "model.layers.0.self_attn.q_proj.weight_scale" {{.*}}group_size = 64{{.*}} : tensor<64x1xf16>
// G64: ingot.weight "model.layers.0.mlp.down_proj.weight_min" {{.*}}group_size = 64{{.*}} : tensor<64x2xf16>

// FP8: ingot.weight "model.layers.0.self_attn.q_proj.weight" {encoding = #ingot.encoding<weight, #ingot.quant<per_channel>>, handle = 3 : i64} : tensor<64x64xf8E4M3FN>
// FP8-NEXT: ingot.weight "model.layers.0.self_attn.q_proj.weight_scale" {encoding = #ingot.encoding<scale, #ingot.quant<per_channel>>, handle = 3 : i64} : tensor<64xf32>
// FP8: ingot.weight "model.layers.0.odd.weight" {{.*}} : tensor<16x48xf8E4M3FN>
// FP8: ingot.linear {{.*}} scales(%{{.*}} : tensor<64xf32>) {quant = #ingot.quant<per_channel>} : tensor<?x64xf32>, tensor<64x64xf8E4M3FN> -> tensor<?x64xf32>

// NVFP4: ingot.weight "model.layers.0.self_attn.q_proj.weight" {encoding = #ingot.encoding<weight, #ingot.quant<nvfp4>>, handle = 3 : i64} : tensor<64x64xf4E2M1FN>
// NVFP4-NEXT: ingot.weight "model.layers.0.self_attn.q_proj.weight_scale" {encoding = #ingot.encoding<scale, #ingot.quant<nvfp4>>, handle = 3 : i64} : tensor<64x4xf8E4M3FN>
// NVFP4-NEXT: ingot.weight "model.layers.0.self_attn.q_proj.weight_global_scale" {encoding = #ingot.encoding<global_scale, #ingot.quant<nvfp4>>, handle = 3 : i64} : tensor<1xf32>
// NVFP4: ingot.weight "model.layers.0.odd.weight" {{.*}} : tensor<16x48xf4E2M1FN>
// NVFP4: ingot.weight "model.layers.0.odd.weight_scale" {{.*}} : tensor<16x3xf8E4M3FN>
// NVFP4: ingot.linear {{.*}} scales(%{{.*}}, %{{.*}} : tensor<64x4xf8E4M3FN>, tensor<1xf32>) {quant = #ingot.quant<nvfp4>} : tensor<?x64xf32>, tensor<64x64xf4E2M1FN> -> tensor<?x64xf32>

// MXFP4: ingot.weight "model.layers.0.self_attn.q_proj.weight" {encoding = #ingot.encoding<weight, #ingot.quant<mxfp4>>, handle = 3 : i64} : tensor<64x64xf4E2M1FN>
// MXFP4-NEXT: ingot.weight "model.layers.0.self_attn.q_proj.weight_scale" {encoding = #ingot.encoding<scale, #ingot.quant<mxfp4>>, handle = 3 : i64} : tensor<64x2xf8E8M0FNU>
// MXFP4-NEXT: ingot.weight "model.layers.0.mlp.down_proj.weight" {{.*}} : tensor<64x128xf4E2M1FN>
// MXFP4-NEXT: ingot.weight "model.layers.0.mlp.down_proj.weight_scale" {{.*}} : tensor<64x4xf8E8M0FNU>
// MXFP4: ingot.weight "model.layers.0.odd.weight" {handle = 11 : i64} : tensor<16x48xf16>

// SKIP-LABEL: func.func @layer
// SKIP: ingot.weight "model.layers.0.self_attn.q_proj.weight" {handle = 3 : i64} : tensor<64x64xf32>
// SKIP: ingot.weight "model.layers.0.mlp.down_proj.weight" {handle = 9 : i64} : tensor<64x128xbf16>
// SKIP: ingot.weight "model.layers.0.odd.weight" {encoding = #ingot.encoding<weight, #ingot.quant<nvfp4>>, handle = 11 : i64} : tensor<16x48xf4E2M1FN>

// The tied embedding table feeds ingot.embedding and ingot.logits: never quantized. A
// linear output head is quantized only with quantize-head.
func.func @head(%tokens: tensor<?xi32>, %rows: tensor<?xi32>) -> (tensor<?x256xf32>, tensor<?x256xf32>) {
  %table = ingot.weight "model.embed_tokens.weight" {handle = 0 : i64} : tensor<256x64xbf16>
  %lm_head = ingot.weight "lm_head.weight" {handle = 20 : i64} : tensor<256x64xbf16>
  %h = ingot.embedding %tokens, %table : tensor<?xi32>, tensor<256x64xbf16> -> tensor<?x64xf32>
  %tied = ingot.logits %h, %table, %rows : tensor<?x64xf32>, tensor<256x64xbf16>, tensor<?xi32> -> tensor<?x256xf32>
  %untied = ingot.linear %h, %lm_head : tensor<?x64xf32>, tensor<256x64xbf16> -> tensor<?x256xf32>
  return %tied, %untied : tensor<?x256xf32>, tensor<?x256xf32>
}

// INT4-LABEL: func.func @head
// INT4: ingot.weight "model.embed_tokens.weight" {handle = 0 : i64} : tensor<256x64xbf16>
// INT4: ingot.weight "lm_head.weight" {handle = 20 : i64} : tensor<256x64xbf16>
// INT4-NOT: encoding
// INT4: return

// HEAD-LABEL: func.func @head
// HEAD: ingot.weight "model.embed_tokens.weight" {handle = 0 : i64} : tensor<256x64xbf16>
// HEAD: ingot.weight "lm_head.weight" {encoding = #ingot.encoding<weight, #ingot.quant<per_channel>>, handle = 20 : i64} : tensor<256x64xf8E4M3FN>
// HEAD: ingot.logits %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<256x64xbf16>

// A checkpoint tensor stored as GGUF Q4_0 blocks keeps its zero-point scheme under int4
// with group 32 (so the driver copies the blocks); another group re-quantizes with mins.
func.func @source_quant(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = ingot.weight "model.layers.1.mlp.up_proj.weight" {handle = 5 : i64, source_quant = #ingot.quant<int4, group_size = 32, zero>} : tensor<64x64xbf16>
  %y = ingot.linear %x, %w : tensor<?x64xf32>, tensor<64x64xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// INT4-LABEL: func.func @source_quant
// INT4: ingot.weight "model.layers.1.mlp.up_proj.weight" {encoding = #ingot.encoding<weight, #ingot.quant<int4, group_size = 32, zero>>, handle = 5 : i64} : tensor<64x64xui4>
// INT4-NEXT: ingot.weight "model.layers.1.mlp.up_proj.weight_scale" {{.*}} : tensor<64x2xf16>
// INT4-NEXT: ingot.weight "model.layers.1.mlp.up_proj.weight_zero" {encoding = #ingot.encoding<offset, #ingot.quant<int4, group_size = 32, zero>>, handle = 5 : i64} : tensor<64x2xf16>
// INT4: {quant = #ingot.quant<int4, group_size = 32, zero>}

// G64-LABEL: func.func @source_quant
// G64: ingot.weight "model.layers.1.mlp.up_proj.weight_min" {{.*}}#ingot.quant<int4, group_size = 64, min>{{.*}} : tensor<64x1xf16>

// BAD-FORMAT: error: ingot-quantize-weights: unknown format 'int3' (choose int4, fp8, nvfp4 or mxfp4)
// BAD-GROUP: error: ingot-quantize-weights: int4 group size 48 is not one of 32, 64, 128
// BAD-SKIP: error: ingot-quantize-weights: bad skip pattern '[a'
