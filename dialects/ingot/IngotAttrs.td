// Attributes and enums of the ingot dialect: weight quantization, RoPE scaling, shards.
#ifndef INGOT_ATTRS_TD
#define INGOT_ATTRS_TD

include "dialects/ingot/IngotDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Ingot_QuantKind : I32Enum<"QuantKind", "weight quantization scheme", [
    I32EnumCase<"PerTensor", 0, "per_tensor">,
    I32EnumCase<"PerChannel", 1, "per_channel">,
    I32EnumCase<"NvFp4", 2, "nvfp4">,
    I32EnumCase<"MxFp4", 3, "mxfp4">,
    I32EnumCase<"Int4", 4, "int4">
  ]> {
  let cppNamespace = "::mlir::ingot";
}

def Ingot_QuantOffsetKind : I32Enum<"QuantOffsetKind",
    "how the second int4 tensor enters dequantization", [
    I32EnumCase<"None", 0, "none">,
    I32EnumCase<"Zero", 1, "zero">,
    I32EnumCase<"Min", 2, "min">
  ]> {
  let cppNamespace = "::mlir::ingot";
}

def Ingot_QuantPart : I32Enum<"QuantPart",
    "which tensor of a quantized weight an ingot.weight is", [
    I32EnumCase<"Weight", 0, "weight">,
    I32EnumCase<"Scale", 1, "scale">,
    I32EnumCase<"Offset", 2, "offset">,
    I32EnumCase<"GlobalScale", 3, "global_scale">
  ]> {
  let cppNamespace = "::mlir::ingot";
}

def Ingot_RopeScalingKind : I32Enum<"RopeScalingKind", "RoPE frequency scaling", [
    I32EnumCase<"None", 0, "none">,
    I32EnumCase<"Linear", 1, "linear">,
    I32EnumCase<"Llama3", 2, "llama3">,
    I32EnumCase<"Yarn", 3, "yarn">
  ]> {
  let cppNamespace = "::mlir::ingot";
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class Ingot_Attr<string name, string attrMnemonic>
    : AttrDef<Ingot_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def Ingot_QuantSchemeAttr : Ingot_Attr<"QuantScheme", "quant"> {
  let summary = "How a quantized weight is turned back into real numbers";
  let description = [{
    Names the scheme of a quantized `ingot.linear` weight and so which scale
    operands the op takes (N = output features, K = input features):

    | scheme | weight element | scale operands, in order |
    |---|---|---|
    | `per_tensor` | `f8E4M3FN` | `tensor<f32>` or `tensor<1xf32>` |
    | `per_channel` | `f8E4M3FN` | `tensor<Nxf32>` |
    | `nvfp4` (block 16) | `f4E2M1FN` | `tensor<NxK/16xf8E4M3FN>`, global `tensor<f32>` or `tensor<1xf32>` |
    | `mxfp4` (block 32) | `f4E2M1FN` | `tensor<NxK/32xf8E8M0FNU>` |
    | `int4` (group g) | `i4` / `ui4` | scales `tensor<NxK/gxT>`, zeros or mins `tensor<NxK/gxT>` (T in f16, bf16, f32; a `zero` tensor may instead hold the weight's integer type) |

    For `int4`, `zero` means `w = (q - z) * s` and `min` means `w = q * s + m`.

    ```mlir
    #ingot.quant<per_tensor>
    #ingot.quant<per_channel>
    #ingot.quant<nvfp4>
    #ingot.quant<mxfp4>
    #ingot.quant<int4, group_size = 128, zero>
    #ingot.quant<int4, group_size = 32, min>
    ```
  }];
  let parameters = (ins
    "::mlir::ingot::QuantKind":$kind,
    "int64_t":$block_size,
    "::mlir::ingot::QuantOffsetKind":$offset_kind
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Number of scale operands `ingot.linear` takes under this scheme.
    unsigned getNumScaleOperands() const;
    /// True for schemes whose scales cover blocks/groups along K.
    bool isBlockScaled() const { return getBlockSize() > 0; }
  }];
}

def Ingot_WeightEncodingAttr : Ingot_Attr<"WeightEncoding", "encoding"> {
  let summary = "Which part of a quantized encoding of its checkpoint tensor a weight is";
  let description = [{
    Marks an `ingot.weight` as derived from the checkpoint tensor its `handle`
    names by quantizing that tensor under `scheme`: `weight` is the packed
    values, `scale` the scales, `offset` the int4 zeros or mins, `global_scale`
    the NVFP4 tensor scale. The compiler computes the bytes while it writes the
    artifact (`ingot-quantize-weights` creates these ops), so the module never
    holds weight data.

    ```mlir
    #ingot.encoding<weight, #ingot.quant<nvfp4>>
    #ingot.encoding<offset, #ingot.quant<int4, group_size = 32, min>>
    ```
  }];
  let parameters = (ins
    "::mlir::ingot::QuantPart":$part,
    "::mlir::ingot::QuantSchemeAttr":$scheme
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Ingot_RopeScalingAttr : Ingot_Attr<"RopeScaling", "rope_scaling"> {
  let summary = "Context-extension scaling of rotary position embedding frequencies";
  let description = [{
    The frequency scaling an `ingot.rope` applies, with the parameters of
    Hugging Face's `rope_scaling` config. Only the keys that matter for a kind are
    accepted and printed.

    ```mlir
    #ingot.rope_scaling<none>
    #ingot.rope_scaling<linear, factor = 2.0>
    #ingot.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>
    #ingot.rope_scaling<yarn, factor = 4.0, original_max_position = 32768, beta_fast = 32.0, beta_slow = 1.0, attn_factor = 1.0>
    ```
  }];
  let parameters = (ins
    "::mlir::ingot::RopeScalingKind":$kind,
    "::llvm::APFloat":$factor,
    "::llvm::APFloat":$low_freq_factor,
    "::llvm::APFloat":$high_freq_factor,
    "int64_t":$original_max_position,
    "::llvm::APFloat":$beta_fast,
    "::llvm::APFloat":$beta_slow,
    "::llvm::APFloat":$attn_factor
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Ingot_ShardAttr : Ingot_Attr<"Shard", "shard"> {
  let summary = "Which slice of its checkpoint tensor a tensor-parallel weight is";
  let description = [{
    Marks an `ingot.weight` as the slice `[offset, offset + size)` along
    dimension `dim` of the checkpoint tensor its `handle` names (one rank's
    part of a column- or row-parallel linear, a vocab-parallel table, a head
    block of a bias). `size` equals the weight's extent along `dim`,
    `source_size` is the source's extent along `dim`; the other dimensions
    are the source's. `ingot-shard-tensor-parallel` creates these;
    the compile driver cuts the bytes from the source tensor while it writes
    the artifact (docs/tensor-parallel.md).

    ```mlir
    #ingot.shard<dim = 0, offset = 384, size = 192, source_size = 576>
    #ingot.shard<dim = 1, offset = 0, size = 768, source_size = 1536>
    ```
  }];
  let parameters = (ins "int64_t":$dim, "int64_t":$offset, "int64_t":$size,
                        "int64_t":$source_size);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // INGOT_ATTRS_TD
