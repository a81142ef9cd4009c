//===- SelectKernels.cpp - choose the CUDA kernels of a module's steps ----===//
//
// ingot-select-kernels (Passes.td) and readKernelSelection (KernelSelection.h).
//
//===----------------------------------------------------------------------===//
#include "compiler/transforms/Passes.h"

#include <algorithm>
#include <string>

#include "codegen/cuda/AttentionKernelPlan.h"
#include "codegen/cuda/AttentionKernelSource.h"
#include "codegen/cuda/QuantKernelsSource.h"
#include "compiler/transforms/KernelSelection.h"
#include "compiler/transforms/StepFunctions.h"
#include "dialects/ingot/IngotDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

namespace ingot::compiler {
#define GEN_PASS_DEF_SELECTKERNELS
#include "compiler/transforms/Passes.h.inc"
} // namespace ingot::compiler

namespace ingot::compiler {

bool isCudaTargetName(const std::string &name) {
  llvm::StringRef t = name;
  if (t == "simt")
    return true;
  if (!t.consume_front("sm_") && !t.consume_front("compute_"))
    return false;
  if (!t.empty() && (t.back() == 'a' || t.back() == 'f'))
    t = t.drop_back();
  return t.size() >= 2 && t.size() <= 3 && llvm::all_of(t, llvm::isDigit);
}

namespace {

std::string lowerCaseType(mlir::Type t) {
  std::string text;
  llvm::raw_string_ostream os(text);
  t.print(os);
  return llvm::StringRef(text).lower();
}

class SelectKernelsPass : public impl::SelectKernelsBase<SelectKernelsPass> {
public:
  using Base::Base;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    for (const std::string &t : targets)
      if (!isCudaTargetName(t)) {
        module.emitError() << "ingot-select-kernels: '" << t
                           << "' is not a CUDA target (sm_XY, sm_XYa, sm_XYf, compute_XY, "
                              "simt)";
        return signalPassFailure();
      }
    for (llvm::StringRef name : {kCudaTargetsAttr, kFusedKernelsAttr, kFusedKvWriteFp8Attr,
                                 kFusedScaleAttr, kFusedGeluMulAttr, kQuantKernelsAttr, kW8a8KernelsAttr})
      module->removeAttr(name);
    llvm::SmallVector<mlir::func::FuncOp> steps = findStepFunctions(module);
    if (steps.empty())
      return signalPassFailure();
    for (mlir::func::FuncOp step : steps)
      step.walk([](mlir::Operation *op) {
        op->removeAttr(kCudaKernelAttr);
        op->removeAttr(kCpuOnlyAttr);
        op->removeAttr(kFp8RowsAttr);
      });
    if (targets.empty())
      return;

    mlir::Builder b(module.getContext());
    llvm::SmallVector<mlir::Attribute> targetAttrs;
    for (const std::string &t : targets)
      targetAttrs.push_back(b.getStringAttr(t));
    module->setAttr(kCudaTargetsAttr, b.getArrayAttr(targetAttrs));
    selectFusedKernels(module, steps);
    if (mlir::failed(selectLinearKernels(module, steps)))
      return signalPassFailure();
    for (mlir::func::FuncOp step : steps) {
      mlir::WalkResult walk = step.walk([&](mlir::ingot::AttentionOp op) {
        return mlir::failed(selectAttentionKernel(op)) ? mlir::WalkResult::interrupt()
                                                        : mlir::WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return signalPassFailure();
    }
  }

private:
  /// Marks the op that makes an fp8 linear's input rows as their quantizing producer
  /// (kFp8RowsAttr) when it is one the producer kernels fuse: an rms_norm, the norm of an
  /// add_rms_norm, or a silu_mul.
  static void markFp8Producer(mlir::Value input) {
    mlir::Operation *producer = input.getDefiningOp();
    if (!producer)
      return;
    auto fused = llvm::dyn_cast<mlir::ingot::AddRmsNormOp>(producer);
    auto norm = llvm::dyn_cast<mlir::ingot::RmsNormOp>(producer);
    const bool fusable = (norm && norm.getGroupCount() == 1) ||
                         llvm::isa<mlir::ingot::SiluMulOp>(producer) ||
                         (fused && input == fused.getResult());
    if (fusable)
      producer->setAttr(kFp8RowsAttr, mlir::UnitAttr::get(producer->getContext()));
  }

  /// The fused kernels' element types: those of the steps' intermediate values (results of
  /// step ops that are neither returned nor the KV cache), f32 first; and the kernels only
  /// some modules need (the fp8 KV write, the scale, gelu_mul).
  static void selectFusedKernels(mlir::ModuleOp module, llvm::ArrayRef<mlir::func::FuncOp> steps) {
    bool f32 = false, bf16 = false, kvFp8 = false, scale = false, gelu = false;
    for (mlir::func::FuncOp step : steps) {
      for (mlir::Type t : step.getArgumentTypes())
        if (auto cache = llvm::dyn_cast<mlir::ingot::KvCacheType>(t))
          kvFp8 |= llvm::isa<mlir::Float8E4M3FNType>(cache.getElementType());
      llvm::DenseSet<mlir::Value> returned;
      for (mlir::Operation &op : step.getBody().front()) {
        if (op.hasTrait<mlir::OpTrait::IsTerminator>())
          returned.insert(op.operand_begin(), op.operand_end());
      }
      for (mlir::Operation &op : step.getBody().front()) {
        scale |= llvm::isa<mlir::ingot::ScaleOp>(op);
        gelu |= llvm::isa<mlir::ingot::GeluMulOp>(op);
        if (auto gated = llvm::dyn_cast<mlir::ingot::GatedLinearOp>(op))
          gelu |= gated.getActivation() == "gelu";
        if (llvm::isa<mlir::ingot::WeightOp, mlir::ingot::KvWriteOp>(op))
          continue;
        for (mlir::Value r : op.getResults()) {
          auto ranked = llvm::dyn_cast<mlir::RankedTensorType>(r.getType());
          if (!ranked || returned.contains(r))
            continue;
          f32 |= ranked.getElementType().isF32();
          bf16 |= ranked.getElementType().isBF16();
        }
      }
    }
    mlir::Builder b(module.getContext());
    llvm::SmallVector<mlir::Attribute> types;
    if (f32)
      types.push_back(mlir::TypeAttr::get(b.getF32Type()));
    if (bf16)
      types.push_back(mlir::TypeAttr::get(b.getBF16Type()));
    module->setAttr(kFusedKernelsAttr, b.getArrayAttr(types));
    if (kvFp8)
      module->setAttr(kFusedKvWriteFp8Attr, b.getUnitAttr());
    if (scale)
      module->setAttr(kFusedScaleAttr, b.getUnitAttr());
    if (gelu)
      module->setAttr(kFusedGeluMulAttr, b.getUnitAttr());
  }

  /// The GEMV kernel that reads `op`'s quantized `weight` (with its `scales`), or an error
  /// at the op (the linear's verifier already refuses int4 without an offset or with other
  /// scale types; the checks stay for modules built without verification).
  static mlir::FailureOr<codegen::QuantGemvKernel>
  quantGemvKernel(mlir::Operation *op, mlir::Value weightValue, mlir::ValueRange scales,
                  mlir::ingot::QuantSchemeAttr quant) {
    using quantgemv::Format;
    using quantgemv::ScaleType;
    std::string weight = "?";
    if (auto w = weightValue.getDefiningOp<mlir::ingot::WeightOp>())
      weight = w.getName().str();
    auto fail = [&](const std::string &why) {
      op->emitError() << "ingot-select-kernels: quantized linear weight '" << weight
                      << "': " << why;
      return mlir::failure();
    };
    codegen::QuantGemvKernel k;
    switch (quant.getKind()) {
    case mlir::ingot::QuantKind::PerTensor:
    case mlir::ingot::QuantKind::PerChannel:
      k.format = Format::kFp8;
      return k;
    case mlir::ingot::QuantKind::NvFp4:
      k.format = Format::kNvfp4;
      return k;
    case mlir::ingot::QuantKind::MxFp4:
      k.format = Format::kMxfp4;
      return k;
    case mlir::ingot::QuantKind::Int4:
      break;
    }
    if (quant.getOffsetKind() == mlir::ingot::QuantOffsetKind::Min)
      k.format = Format::kInt4Min;
    else if (quant.getOffsetKind() == mlir::ingot::QuantOffsetKind::Zero)
      k.format = Format::kInt4Zero;
    else
      return fail("int4 group quantization needs an offset (zero or min)");
    if (scales.empty())
      return fail("its int4 scales are missing");
    mlir::Type scale = llvm::cast<mlir::ShapedType>(scales.front().getType()).getElementType();
    if (scale.isF16())
      k.scaleType = ScaleType::kF16;
    else if (scale.isBF16())
      k.scaleType = ScaleType::kBF16;
    else if (scale.isF32())
      k.scaleType = ScaleType::kF32;
    else
      return fail("int4 scales are " + lowerCaseType(scale) +
                  "; the GEMV kernels read f16, bf16 or f32 scales");
    return k;
  }

  /// `ingot.quant_kernels`: the GEMV kernels of the steps' quantized linears and gated
  /// linears (each brings its tensor-core GEMM), in codegen::allQuantGemvKernels order;
  /// `ingot.w8a8_kernels` when a linear holds fp8 weights (the activation quantizer,
  /// epilogue and producers). A gated linear's fp8 weights run through the weight-only
  /// GEMV: ingot-fuse-elementwise leaves fp8 MLPs unfused, so W8A8 keeps its producers.
  static mlir::LogicalResult selectLinearKernels(mlir::ModuleOp module,
                                                 llvm::ArrayRef<mlir::func::FuncOp> steps) {
    std::vector<codegen::QuantGemvKernel> used;
    bool fp8 = false;
    auto use = [&](mlir::Operation *op, mlir::Value weight, mlir::ValueRange scales,
                   mlir::ingot::QuantSchemeAttr quant) {
      mlir::FailureOr<codegen::QuantGemvKernel> k = quantGemvKernel(op, weight, scales, quant);
      if (mlir::succeeded(k) && std::find(used.begin(), used.end(), *k) == used.end())
        used.push_back(*k);
      return k;
    };
    for (mlir::func::FuncOp step : steps) {
      mlir::WalkResult walk = step.walk([&](mlir::Operation *op) {
        if (auto gated = llvm::dyn_cast<mlir::ingot::GatedLinearOp>(op)) {
          mlir::ingot::QuantSchemeAttr quant = gated.getQuantAttr();
          if (quant && (mlir::failed(use(op, gated.getGateWeight(), gated.getGateScales(), quant)) ||
                        mlir::failed(use(op, gated.getUpWeight(), gated.getUpScales(), quant))))
            return mlir::WalkResult::interrupt();
          return mlir::WalkResult::advance();
        }
        auto linear = llvm::dyn_cast<mlir::ingot::LinearOp>(op);
        mlir::ingot::QuantSchemeAttr quant = linear ? linear.getQuantAttr() : nullptr;
        if (!quant)
          return mlir::WalkResult::advance();
        mlir::FailureOr<codegen::QuantGemvKernel> k =
            use(op, linear.getWeight(), linear.getScales(), quant);
        if (mlir::failed(k))
          return mlir::WalkResult::interrupt();
        if (k->format == quantgemv::Format::kFp8) {
          fp8 = true;
          markFp8Producer(linear.getInput());
        }
        return mlir::WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return mlir::failure();
    }
    mlir::Builder b(module.getContext());
    llvm::SmallVector<mlir::Attribute> names;
    for (const codegen::QuantGemvKernel &k : codegen::allQuantGemvKernels())
      if (std::find(used.begin(), used.end(), k) != used.end())
        names.push_back(b.getStringAttr(codegen::quantGemvKernelName(k)));
    if (!names.empty())
      module->setAttr(kQuantKernelsAttr, b.getArrayAttr(names));
    if (fp8)
      module->setAttr(kW8a8KernelsAttr, b.getUnitAttr());
    return mlir::success();
  }

  /// `ingot.cuda_kernel` (the decode kernel's symbol) or `ingot.cpu_only` (why none).
  static mlir::LogicalResult selectAttentionKernel(mlir::ingot::AttentionOp op) {
    std::string variant = kDenseVariantName;
    if (op.hasMask() || op.hasScore()) {
      auto name = op->getAttrOfType<mlir::StringAttr>(kVariantAttr);
      if (!name)
        return op.emitError("ingot-select-kernels: this attention's regions have no variant "
                            "name; run ingot-specialize-attention first");
      variant = name.str();
    }
    const int64_t heads = op.getNumHeads(), kvHeads = op.getNumKvHeads();
    if (kvHeads <= 0 || heads % kvHeads != 0)
      return op.emitError() << "ingot-select-kernels: num_heads (" << heads
                            << ") is not a multiple of num_kv_heads (" << kvHeads << ")";
    auto cache = llvm::cast<mlir::ingot::KvCacheType>(op.getCache().getType());
    mlir::Type query = llvm::cast<mlir::RankedTensorType>(op.getQuery().getType()).getElementType();
    mlir::Type pool = cache.getElementType();
    codegen::AttentionShape shape;
    shape.headDim = static_cast<int>(op.getHeadDim());
    shape.group = static_cast<int>(heads / kvHeads);
    shape.kvFp8 = llvm::isa<mlir::Float8E4M3FNType>(pool);
    shape.dtype = query.isF32() ? codegen::AttentionDtype::kF32 : codegen::AttentionDtype::kBF16;
    const std::string shapeText =
        "attention " + variant + " with head dim " + std::to_string(shape.headDim) + ", " +
        std::to_string(shape.group) + " query heads per kv head, " + lowerCaseType(query) +
        " queries and " + lowerCaseType(pool) + " KV cache";
    std::string why;
    if ((query != pool && !shape.kvFp8) || !(query.isF32() || query.isBF16()))
      why = "the kernels take f32 or bf16 queries and the same or an fp8 KV cache";
    else
      why = codegen::unsupportedAttentionShape(shape);
    mlir::Builder b(op.getContext());
    if (!why.empty()) {
      op->setAttr(kCpuOnlyAttr, b.getStringAttr(shapeText + ": " + why));
      return mlir::success();
    }
    codegen::DecodeInstance decode{shape.dtype, shape.headDim, shape.group, shape.kvFp8};
    op->setAttr(kCudaKernelAttr, b.getStringAttr(codegen::decodeKernelName(variant, decode)));
    return mlir::success();
  }
};

} // namespace

KernelSelection readKernelSelection(mlir::ModuleOp module) {
  KernelSelection selection;
  if (auto targets = module->getAttrOfType<mlir::ArrayAttr>(kCudaTargetsAttr))
    for (mlir::Attribute t : targets)
      if (auto s = llvm::dyn_cast<mlir::StringAttr>(t))
        selection.targets.push_back(s.str());
  if (auto types = module->getAttrOfType<mlir::ArrayAttr>(kFusedKernelsAttr))
    for (mlir::Attribute t : types)
      if (auto type = llvm::dyn_cast<mlir::TypeAttr>(t))
        selection.fusedTypes.push_back(lowerCaseType(type.getValue()));
  selection.fusedKvWriteFp8 = module->hasAttr(kFusedKvWriteFp8Attr);
  selection.fusedScale = module->hasAttr(kFusedScaleAttr);
  selection.fusedGeluMul = module->hasAttr(kFusedGeluMulAttr);
  if (auto names = module->getAttrOfType<mlir::ArrayAttr>(kQuantKernelsAttr))
    for (mlir::Attribute n : names)
      if (auto s = llvm::dyn_cast<mlir::StringAttr>(n))
        selection.quantKernels.push_back(s.str());
  selection.w8a8Kernels = module->hasAttr(kW8a8KernelsAttr);
  llvm::StringSet<> seen;
  for (mlir::func::FuncOp step : findStepFunctions(module))
    step.walk([&](mlir::ingot::AttentionOp op) {
      if (auto why = op->getAttrOfType<mlir::StringAttr>(kCpuOnlyAttr))
        if (seen.insert(why.getValue()).second)
          selection.cpuOnly.push_back(why.str());
    });
  return selection;
}

} // namespace ingot::compiler
