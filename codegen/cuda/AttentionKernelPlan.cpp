//===- AttentionKernelPlan.cpp - the CUDA kernels one attention shape needs ===//
#include "codegen/cuda/AttentionKernelPlan.h"

#include "codegen/cuda/AttentionRegionEmitter.h"

namespace ingot::codegen {

std::string unsupportedAttentionShape(const AttentionShape &shape) {
  if (shape.headDim != 32 && shape.headDim != 64 && shape.headDim != 128 &&
      shape.headDim != 256)
    return "the kernels take head dim 32, 64, 128 or 256, not " +
           std::to_string(shape.headDim);
  const int maxGroup = shape.headDim == 256 ? 8 : 16;
  if (shape.group < 1 || shape.group > maxGroup)
    return "the kernels take 1.." + std::to_string(maxGroup) +
           " query heads per kv head at head dim " + std::to_string(shape.headDim) + ", not " +
           std::to_string(shape.group);
  return "";
}

StatusOr<std::vector<AttentionKernelUnit>>
attentionKernelUnits(const std::string &variantName, const std::vector<uint8_t> &maskBytecode,
                     const std::vector<uint8_t> &scoreBytecode, const AttentionShape &shape) {
  if (std::string why = unsupportedAttentionShape(shape); !why.empty())
    return invalidArgument("attention variant " + variantName + ": " + why);
  StatusOr<std::string> variant =
      emitAttentionVariantStruct(variantName, maskBytecode, scoreBytecode);
  if (!variant.ok())
    return invalidArgument("attention variant " + variantName + ": " +
                           variant.status().message());
  const bool prefill = shape.dtype == AttentionDtype::kBF16 &&
                       (shape.headDim == 64 || shape.headDim == 128);
  std::vector<AttentionKernelUnit> units;
  auto add = [&](AttentionKernelKind kind, std::string name, uint32_t threads) -> Status {
    StatusOr<std::string> source = attentionKernelUnit(*variant, variantName, kind, shape.dtype,
                                                       shape.headDim, shape.group,
                                                       shape.kvFp8);
    if (!source.ok())
      return source.status();
    AttentionKernelUnit unit;
    unit.name = std::move(name);
    unit.kind = kind;
    unit.blockDim = {threads, 1, 1};
    unit.source = std::move(source).value();
    units.push_back(std::move(unit));
    return okStatus();
  };
  const DecodeInstance decode{shape.dtype, shape.headDim, shape.group, shape.kvFp8};
  if (Status s = add(AttentionKernelKind::kDecode, decodeKernelName(variantName, decode),
                     kDecodeThreads);
      !s.ok())
    return s;
  // The combine kernel runs one thread per head-dim column.
  if (Status s = add(AttentionKernelKind::kCombine, combineKernelName(shape.dtype, shape.headDim),
                     static_cast<uint32_t>(shape.headDim));
      !s.ok())
    return s;
  if (prefill) {
    const PrefillInstance in{shape.headDim, shape.group, shape.kvFp8};
    if (Status s = add(AttentionKernelKind::kPrefill, prefillKernelName(variantName, in),
                       kPrefillThreads);
        !s.ok())
      return s;
    if (Status s = add(AttentionKernelKind::kBlockMask, blockMaskKernelName(variantName, in),
                       kPrefillThreads);
        !s.ok())
      return s;
  }
  return units;
}

} // namespace ingot::codegen
