// The ingot dialect: registration, the kv_cache type and the quant/rope-scaling attributes.
#include "dialects/ingot/IngotDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::ingot;

#include "dialects/ingot/IngotOpsDialect.cpp.inc"

#include "dialects/ingot/IngotEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/ingot/IngotAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/ingot/IngotOpsTypes.cpp.inc"

void IngotDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/ingot/IngotOpsTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/ingot/IngotAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/ingot/IngotOps.cpp.inc"
      >();
}

bool mlir::ingot::isRegionValueType(Type type) {
  return type.isIndex() || type.isF32() || isRegionLoadableType(type);
}

bool mlir::ingot::isRegionLoadableType(Type type) {
  if (type.isF32())
    return true;
  auto intType = dyn_cast<IntegerType>(type);
  if (!intType || !intType.isSignless())
    return false;
  return llvm::is_contained({1u, 8u, 16u, 32u, 64u}, intType.getWidth());
}

//===----------------------------------------------------------------------===//
// KvCacheType
//===----------------------------------------------------------------------===//

LogicalResult KvCacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                                  unsigned numLayers, unsigned numKvHeads,
                                  unsigned headDim, unsigned blockSize,
                                  Type elementType) {
  if (numLayers == 0)
    return emitError() << "kv_cache needs num_layers > 0";
  if (numKvHeads == 0)
    return emitError() << "kv_cache needs num_kv_heads > 0";
  if (headDim == 0)
    return emitError() << "kv_cache needs head_dim > 0";
  if (blockSize == 0)
    return emitError() << "kv_cache needs block_size > 0";
  if (!elementType.isF32() && !elementType.isF16() && !elementType.isBF16() &&
      !isa<Float8E4M3FNType>(elementType))
    return emitError() << "kv_cache element_type must be f32, f16, bf16 or "
                          "f8E4M3FN, got "
                       << elementType;
  return success();
}

//===----------------------------------------------------------------------===//
// QuantSchemeAttr
//===----------------------------------------------------------------------===//

/// NVFP4 scales one f8E4M3FN factor per 16 weights (NVIDIA's block size).
static constexpr int64_t kNvFp4BlockSize = 16;
/// MXFP4 scales one f8E8M0FNU factor per 32 weights (OCP Microscaling spec).
static constexpr int64_t kMxFp4BlockSize = 32;

static int64_t defaultBlockSize(QuantKind kind) {
  switch (kind) {
  case QuantKind::NvFp4:
    return kNvFp4BlockSize;
  case QuantKind::MxFp4:
    return kMxFp4BlockSize;
  default:
    return 0;
  }
}

/// Parses `<kind (, group_size = N | , block_size = N | , zero | , min | , none)*>`.
/// The printer emits only what the kind needs; the verifier rejects the rest.
Attribute QuantSchemeAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  SMLoc kindLoc = parser.getCurrentLocation();
  StringRef kindName;
  if (parser.parseKeyword(&kindName))
    return {};
  std::optional<QuantKind> kind = symbolizeQuantKind(kindName);
  if (!kind) {
    parser.emitError(kindLoc) << "unknown quantization scheme '" << kindName
                              << "'; expected per_tensor, per_channel, nvfp4, "
                                 "mxfp4 or int4";
    return {};
  }
  int64_t blockSize = defaultBlockSize(*kind);
  QuantOffsetKind offsetKind = QuantOffsetKind::None;
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc keyLoc = parser.getCurrentLocation();
    StringRef key;
    if (parser.parseKeyword(&key))
      return {};
    if (key == "group_size" || key == "block_size") {
      if (parser.parseEqual() || parser.parseInteger(blockSize))
        return {};
    } else if (std::optional<QuantOffsetKind> offset =
                   symbolizeQuantOffsetKind(key)) {
      offsetKind = *offset;
    } else {
      parser.emitError(keyLoc) << "unexpected '" << key
                               << "' in #ingot.quant; expected group_size = N "
                                  "or a zero/min kind";
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<QuantSchemeAttr>(kindLoc, parser.getContext(), *kind,
                                            blockSize, offsetKind);
}

void QuantSchemeAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyQuantKind(getKind());
  if (getKind() == QuantKind::Int4)
    printer << ", group_size = " << getBlockSize() << ", "
            << stringifyQuantOffsetKind(getOffsetKind());
  printer << ">";
}

LogicalResult
QuantSchemeAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        QuantKind kind, int64_t blockSize,
                        QuantOffsetKind offsetKind) {
  if (kind == QuantKind::Int4) {
    if (blockSize < 16 || !llvm::isPowerOf2_64(blockSize))
      return emitError() << "int4 group_size must be a power of two >= 16, got "
                         << blockSize;
    if (offsetKind == QuantOffsetKind::None)
      return emitError() << "int4 quantization needs a 'zero' or 'min' kind";
    return success();
  }
  if (blockSize != defaultBlockSize(kind))
    return emitError() << stringifyQuantKind(kind) << " has block size "
                       << defaultBlockSize(kind) << ", got " << blockSize;
  if (offsetKind != QuantOffsetKind::None)
    return emitError() << "only int4 quantization takes a zero/min kind";
  return success();
}

unsigned QuantSchemeAttr::getNumScaleOperands() const {
  switch (getKind()) {
  case QuantKind::NvFp4:
  case QuantKind::Int4:
    return 2;
  default:
    return 1;
  }
}

//===----------------------------------------------------------------------===//
// WeightEncodingAttr
//===----------------------------------------------------------------------===//

/// Parses `<part, #ingot.quant<...>>`.
Attribute WeightEncodingAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  SMLoc partLoc = parser.getCurrentLocation();
  StringRef partName;
  if (parser.parseKeyword(&partName))
    return {};
  std::optional<QuantPart> part = symbolizeQuantPart(partName);
  if (!part) {
    parser.emitError(partLoc) << "unknown quantized weight part '" << partName
                              << "'; expected weight, scale, offset or global_scale";
    return {};
  }
  QuantSchemeAttr scheme;
  if (parser.parseComma() || parser.parseAttribute(scheme) || parser.parseGreater())
    return {};
  return parser.getChecked<WeightEncodingAttr>(partLoc, parser.getContext(), *part,
                                               scheme);
}

void WeightEncodingAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyQuantPart(getPart()) << ", ";
  printer.printAttribute(getScheme());
  printer << ">";
}

LogicalResult
WeightEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           QuantPart part, QuantSchemeAttr scheme) {
  if (!scheme)
    return emitError() << "#ingot.encoding needs a #ingot.quant scheme";
  if (part == QuantPart::Offset && scheme.getKind() != QuantKind::Int4)
    return emitError() << "only int4 has an offset (zero or min) part, not "
                       << stringifyQuantKind(scheme.getKind());
  if (part == QuantPart::GlobalScale && scheme.getKind() != QuantKind::NvFp4)
    return emitError() << "only nvfp4 has a global_scale part, not "
                       << stringifyQuantKind(scheme.getKind());
  return success();
}

//===----------------------------------------------------------------------===//
// RopeScalingAttr
//===----------------------------------------------------------------------===//

namespace {
/// Parameters of a RoPE scaling, with Hugging Face's defaults.
struct RopeScalingParams {
  double factor = 1.0;
  double lowFreqFactor = 1.0;
  double highFreqFactor = 4.0;
  int64_t originalMaxPosition = 0;
  double betaFast = 32.0;
  double betaSlow = 1.0;
  double attnFactor = 1.0;
};
} // namespace

/// The keys a scaling kind accepts, in printing order.
static ArrayRef<StringRef> ropeScalingKeys(RopeScalingKind kind) {
  static const StringRef linear[] = {"factor"};
  static const StringRef llama3[] = {"factor", "low_freq_factor",
                                     "high_freq_factor", "original_max_position"};
  static const StringRef yarn[] = {"factor", "original_max_position",
                                   "beta_fast", "beta_slow", "attn_factor"};
  switch (kind) {
  case RopeScalingKind::None:
    return {};
  case RopeScalingKind::Linear:
    return linear;
  case RopeScalingKind::Llama3:
    return llama3;
  case RopeScalingKind::Yarn:
    return yarn;
  }
  return {};
}

static double *floatField(RopeScalingParams &p, StringRef key) {
  return llvm::StringSwitch<double *>(key)
      .Case("factor", &p.factor)
      .Case("low_freq_factor", &p.lowFreqFactor)
      .Case("high_freq_factor", &p.highFreqFactor)
      .Case("beta_fast", &p.betaFast)
      .Case("beta_slow", &p.betaSlow)
      .Case("attn_factor", &p.attnFactor)
      .Default(nullptr);
}

Attribute RopeScalingAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  SMLoc kindLoc = parser.getCurrentLocation();
  StringRef kindName;
  if (parser.parseKeyword(&kindName))
    return {};
  std::optional<RopeScalingKind> kind = symbolizeRopeScalingKind(kindName);
  if (!kind) {
    parser.emitError(kindLoc) << "unknown rope scaling '" << kindName
                              << "'; expected none, linear, llama3 or yarn";
    return {};
  }
  RopeScalingParams params;
  ArrayRef<StringRef> allowed = ropeScalingKeys(*kind);
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc keyLoc = parser.getCurrentLocation();
    StringRef key;
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return {};
    if (!llvm::is_contained(allowed, key)) {
      parser.emitError(keyLoc) << "'" << key << "' is not a parameter of "
                               << kindName << " rope scaling";
      return {};
    }
    if (key == "original_max_position") {
      if (parser.parseInteger(params.originalMaxPosition))
        return {};
    } else if (parser.parseFloat(*floatField(params, key))) {
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<RopeScalingAttr>(
      kindLoc, parser.getContext(), *kind, APFloat(params.factor),
      APFloat(params.lowFreqFactor), APFloat(params.highFreqFactor),
      params.originalMaxPosition, APFloat(params.betaFast),
      APFloat(params.betaSlow), APFloat(params.attnFactor));
}

void RopeScalingAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyRopeScalingKind(getKind());
  for (StringRef key : ropeScalingKeys(getKind())) {
    printer << ", " << key << " = ";
    if (key == "original_max_position") {
      printer << getOriginalMaxPosition();
      continue;
    }
    printer.printFloat(llvm::StringSwitch<APFloat>(key)
                           .Case("factor", getFactor())
                           .Case("low_freq_factor", getLowFreqFactor())
                           .Case("high_freq_factor", getHighFreqFactor())
                           .Case("beta_fast", getBetaFast())
                           .Case("beta_slow", getBetaSlow())
                           .Default(getAttnFactor()));
  }
  printer << ">";
}

LogicalResult RopeScalingAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, RopeScalingKind kind,
    APFloat factorValue, APFloat lowFreqValue, APFloat highFreqValue,
    int64_t originalMaxPosition, APFloat betaFastValue, APFloat betaSlowValue,
    APFloat attnFactorValue) {
  double factor = factorValue.convertToDouble();
  double lowFreqFactor = lowFreqValue.convertToDouble();
  double highFreqFactor = highFreqValue.convertToDouble();
  double betaFast = betaFastValue.convertToDouble();
  double betaSlow = betaSlowValue.convertToDouble();
  double attnFactor = attnFactorValue.convertToDouble();
  if (kind == RopeScalingKind::None)
    return success();
  if (!(factor > 0.0))
    return emitError() << "rope scaling factor must be > 0, got " << factor;
  if ((kind == RopeScalingKind::Llama3 || kind == RopeScalingKind::Yarn) &&
      originalMaxPosition <= 0)
    return emitError() << stringifyRopeScalingKind(kind)
                       << " rope scaling needs original_max_position > 0";
  if (kind == RopeScalingKind::Llama3 &&
      !(lowFreqFactor > 0.0 && highFreqFactor > lowFreqFactor))
    return emitError() << "llama3 rope scaling needs 0 < low_freq_factor < "
                          "high_freq_factor";
  if (kind == RopeScalingKind::Yarn &&
      !(betaSlow > 0.0 && betaFast > betaSlow && attnFactor > 0.0))
    return emitError() << "yarn rope scaling needs 0 < beta_slow < beta_fast "
                          "and attn_factor > 0";
  return success();
}

//===----------------------------------------------------------------------===//
// ShardAttr
//===----------------------------------------------------------------------===//

LogicalResult ShardAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t dim, int64_t offset, int64_t size,
                                int64_t sourceSize) {
  if (dim < 0)
    return emitError() << "shard dim must be >= 0, got " << dim;
  if (offset < 0)
    return emitError() << "shard offset must be >= 0, got " << offset;
  if (size <= 0)
    return emitError() << "shard size must be > 0, got " << size;
  if (offset > sourceSize || size > sourceSize - offset)
    return emitError() << "shard [" << offset << ", " << offset + size
                       << ") does not fit in the source's " << sourceSize << " along dim "
                       << dim;
  return success();
}
