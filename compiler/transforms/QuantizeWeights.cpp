//===- QuantizeWeights.cpp - ingot-quantize-weights ------------------------===//
//
// Rewrites unquantized ingot.linear ops into their quantized form. The new weight and
// scale tensors are `ingot.weight` ops that keep the source tensor's handle and carry an
// `#ingot.encoding` (which part, which scheme); the compile driver computes their bytes
// from the source tensor while it writes the artifact (compiler/driver/QuantizedTensors).
//
//===----------------------------------------------------------------------===//
#include "compiler/transforms/Passes.h"

#include "compiler/transforms/Fusion.h"

#include <optional>

#include "dialects/ingot/IngotDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/GlobPattern.h"

namespace ingot::compiler {
#define GEN_PASS_DEF_QUANTIZEWEIGHTS
#include "compiler/transforms/Passes.h.inc"
} // namespace ingot::compiler

namespace ingot::compiler {
namespace {

using namespace mlir;
using mlir::ingot::LinearOp;
using mlir::ingot::QuantKind;
using mlir::ingot::QuantOffsetKind;
using mlir::ingot::QuantPart;
using mlir::ingot::QuantSchemeAttr;
using mlir::ingot::WeightEncodingAttr;
using mlir::ingot::WeightOp;

/// Elements per scale of the fixed-block formats (NVIDIA NVFP4: 16; OCP MX: 32).
constexpr int64_t kNvfp4Block = 16;
constexpr int64_t kMxfp4Block = 32;

/// Checkpoint names of the embedding table and the output head (Hugging Face and GGUF),
/// which stay unquantized unless asked.
constexpr llvm::StringLiteral kHeadNames[] = {"lm_head.weight", "model.embed_tokens.weight",
                                              "output.weight", "token_embd.weight"};

/// A weight-name pattern: a glob over the whole name, or a plain substring.
struct SkipPattern {
  std::string text;
  std::optional<llvm::GlobPattern> glob;
  bool matches(StringRef name) const {
    return glob ? glob->match(name) : name.contains(text);
  }
};

/// The weight tensors that replace one source weight.
struct QuantizedParts {
  Value weight;
  SmallVector<Value, 2> scales;
};

class QuantizeWeightsPass
    : public impl::QuantizeWeightsBase<QuantizeWeightsPass> {
public:
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<QuantKind> kind = llvm::StringSwitch<std::optional<QuantKind>>(format)
                                        .Case("int4", QuantKind::Int4)
                                        .Case("fp8", QuantKind::PerChannel)
                                        .Case("nvfp4", QuantKind::NvFp4)
                                        .Case("mxfp4", QuantKind::MxFp4)
                                        .Default(std::nullopt);
    if (!kind) {
      module.emitError() << "ingot-quantize-weights: unknown format '" << format
                         << "' (choose int4, fp8, nvfp4 or mxfp4)";
      return signalPassFailure();
    }
    const int64_t group = groupSize;
    if (*kind == QuantKind::Int4 && !llvm::is_contained({32, 64, 128}, group)) {
      module.emitError() << "ingot-quantize-weights: int4 group size " << group
                         << " is not one of 32, 64, 128";
      return signalPassFailure();
    }
    for (const std::string &text : skip) {
      SkipPattern pattern{text, std::nullopt};
      if (StringRef(text).find_first_of("*?[") != StringRef::npos) {
        llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(text);
        if (!glob) {
          module.emitError() << "ingot-quantize-weights: bad skip pattern '" << text
                             << "': " << llvm::toString(glob.takeError());
          return signalPassFailure();
        }
        pattern.glob = std::move(*glob);
      }
      skipPatterns.push_back(std::move(pattern));
    }
    quantKind = *kind;

    // A module printed after `fuse` may hold gated linears over unquantized weights: their
    // linears are quantized one by one, and fusion runs again later.
    bool unquantizedGated = false;
    module.walk([&](mlir::ingot::GatedLinearOp op) { unquantizedGated |= !op.getQuantAttr(); });
    if (unquantizedGated)
      unfuseElementwise(module);
    SmallVector<LinearOp> linears;
    module.walk([&](LinearOp op) { linears.push_back(op); });
    for (LinearOp op : linears)
      rewrite(op);
    for (Operation *source : replaced)
      if (source->use_empty())
        source->erase();
  }

private:
  /// The scheme a weight gets: `format`, or for int4 the checkpoint's own int4 scheme
  /// when its group matches (so GGUF Q4_0 / Q4_1 blocks are kept exactly).
  QuantSchemeAttr schemeFor(WeightOp weight) {
    MLIRContext *ctx = weight.getContext();
    switch (quantKind) {
    case QuantKind::Int4: {
      QuantSchemeAttr source = weight.getSourceQuantAttr();
      if (source && source.getKind() == QuantKind::Int4 && source.getBlockSize() == groupSize)
        return source;
      return QuantSchemeAttr::get(ctx, QuantKind::Int4, groupSize, QuantOffsetKind::Min);
    }
    case QuantKind::NvFp4:
      return QuantSchemeAttr::get(ctx, QuantKind::NvFp4, kNvfp4Block, QuantOffsetKind::None);
    case QuantKind::MxFp4:
      return QuantSchemeAttr::get(ctx, QuantKind::MxFp4, kMxfp4Block, QuantOffsetKind::None);
    default:
      return QuantSchemeAttr::get(ctx, QuantKind::PerChannel, 0, QuantOffsetKind::None);
    }
  }

  /// True when `weight` is the embedding table or output head, by name or by use.
  bool isHead(WeightOp weight) {
    if (llvm::is_contained(kHeadNames, weight.getName()))
      return true;
    return llvm::any_of(weight->getUsers(), [](Operation *user) {
      return isa<mlir::ingot::EmbeddingOp, mlir::ingot::LogitsOp>(user);
    });
  }

  void rewrite(LinearOp op) {
    if (op.getQuantAttr())
      return;
    auto weight = op.getWeight().getDefiningOp<WeightOp>();
    if (!weight || weight.getEncodingAttr())
      return;
    RankedTensorType type = weight.getResult().getType();
    Type element = type.getElementType();
    if (!element.isF32() && !element.isF16() && !element.isBF16())
      return;
    StringRef name = weight.getName();
    if (llvm::any_of(skipPatterns, [&](const SkipPattern &p) { return p.matches(name); }))
      return;
    if (!quantizeHead && isHead(weight))
      return;
    // Only a weight that feeds nothing but linears is replaced (it is then erased).
    if (!llvm::all_of(weight->getUses(), [](OpOperand &use) {
          auto user = dyn_cast<LinearOp>(use.getOwner());
          return user && use.get() == user.getWeight() && !user.getQuantAttr();
        }))
      return;
    QuantSchemeAttr scheme = schemeFor(weight);
    int64_t k = type.getDimSize(1);
    if (scheme.isBlockScaled() && k % scheme.getBlockSize() != 0) {
      op.emitWarning() << "weight '" << name << "' stays unquantized: its " << k
                       << " input features are not a multiple of the " << format
                       << " block size " << scheme.getBlockSize();
      return;
    }

    auto [it, inserted] = parts.try_emplace(weight.getOperation());
    if (inserted)
      it->second = createParts(weight, scheme);
    OpBuilder b(op);
    auto quantized = LinearOp::create(b, op.getLoc(), op.getResult().getType(), op.getInput(),
                                      it->second.weight, op.getBias(), it->second.scales,
                                      scheme);
    op.getResult().replaceAllUsesWith(quantized.getResult());
    op.erase();
    replaced.insert(weight.getOperation());
  }

  /// Creates the encoded weight ops right after `weight`: the packed weight (same name),
  /// then `<name>_scale`, and `<name>_min` / `<name>_zero` or `<name>_global_scale`.
  QuantizedParts createParts(WeightOp weight, QuantSchemeAttr scheme) {
    MLIRContext *ctx = weight.getContext();
    OpBuilder b(ctx);
    b.setInsertionPointAfter(weight);
    int64_t n = weight.getResult().getType().getDimSize(0);
    int64_t k = weight.getResult().getType().getDimSize(1);
    auto make = [&](QuantPart part, StringRef suffix, ArrayRef<int64_t> shape,
                    Type element) -> Value {
      auto encoding = WeightEncodingAttr::get(ctx, part, scheme);
      return WeightOp::create(b, weight.getLoc(), RankedTensorType::get(shape, element),
                              (weight.getName() + suffix).str(), weight.getHandle(),
                              /*source_quant=*/nullptr, encoding)
          .getResult();
    };
    QuantizedParts out;
    int64_t blocks = scheme.isBlockScaled() ? k / scheme.getBlockSize() : 0;
    switch (scheme.getKind()) {
    case QuantKind::Int4: {
      bool zero = scheme.getOffsetKind() == QuantOffsetKind::Zero;
      out.weight = make(QuantPart::Weight, "", {n, k}, IntegerType::get(ctx, 4, IntegerType::Unsigned));
      out.scales.push_back(make(QuantPart::Scale, "_scale", {n, blocks}, b.getF16Type()));
      out.scales.push_back(
          make(QuantPart::Offset, zero ? "_zero" : "_min", {n, blocks}, b.getF16Type()));
      break;
    }
    case QuantKind::NvFp4:
      out.weight = make(QuantPart::Weight, "", {n, k}, b.getType<Float4E2M1FNType>());
      out.scales.push_back(
          make(QuantPart::Scale, "_scale", {n, blocks}, b.getType<Float8E4M3FNType>()));
      out.scales.push_back(make(QuantPart::GlobalScale, "_global_scale", {1}, b.getF32Type()));
      break;
    case QuantKind::MxFp4:
      out.weight = make(QuantPart::Weight, "", {n, k}, b.getType<Float4E2M1FNType>());
      out.scales.push_back(
          make(QuantPart::Scale, "_scale", {n, blocks}, b.getType<Float8E8M0FNUType>()));
      break;
    default:
      out.weight = make(QuantPart::Weight, "", {n, k}, b.getType<Float8E4M3FNType>());
      out.scales.push_back(make(QuantPart::Scale, "_scale", {n}, b.getF32Type()));
      break;
    }
    return out;
  }

  QuantKind quantKind = QuantKind::Int4;
  SmallVector<SkipPattern> skipPatterns;
  llvm::DenseMap<Operation *, QuantizedParts> parts;
  llvm::SetVector<Operation *> replaced;
};

} // namespace
} // namespace ingot::compiler
