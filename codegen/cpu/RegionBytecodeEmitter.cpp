//===- RegionBytecodeEmitter.cpp - Attention regions to CPU bytecode ------===//
//
// Walks a mask/score region op by op (dispatching on op names) and writes
// region bytecode with RegionBytecodeBuilder.
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/RegionBytecodeEmitter.h"

#include "core/region/region_bytecode_builder.h"
#include "core/region/region_program.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Block.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <optional>

using namespace mlir;

namespace ingot {
namespace {

using Reg = RegionBytecodeBuilder::Reg;
namespace rb = region_bytecode;

// The bytecode numbers predicates as arith does, so they are copied through.
static_assert(static_cast<uint8_t>(arith::CmpIPredicate::uge) ==
                  static_cast<uint8_t>(CmpIPredicate::kUge),
              "cmpi predicate numbering");
static_assert(static_cast<uint8_t>(arith::CmpFPredicate::UNO) ==
                      static_cast<uint8_t>(CmpFPredicate::kUno) &&
                  static_cast<uint8_t>(arith::CmpFPredicate::AlwaysTrue) ==
                      static_cast<uint8_t>(CmpFPredicate::kTrue),
              "cmpf predicate numbering");

/// Operand shape of an op the emitter lowers.
enum class OpShape { Unsupported, Binary, Unary, Cast };

struct OpInfo {
  OpShape shape = OpShape::Unsupported;
  RegionOpcode opcode = RegionOpcode::kInvalid;
};

/// The opcode for an `arith`/`math` op name that maps one-to-one.
OpInfo lookupOp(StringRef name) {
  using O = RegionOpcode;
  auto binary = [](O op) { return OpInfo{OpShape::Binary, op}; };
  auto unary = [](O op) { return OpInfo{OpShape::Unary, op}; };
  auto cast = [](O op) { return OpInfo{OpShape::Cast, op}; };
  return llvm::StringSwitch<OpInfo>(name)
      .Case("arith.addi", binary(O::kAddI))
      .Case("arith.subi", binary(O::kSubI))
      .Case("arith.muli", binary(O::kMulI))
      .Case("arith.divsi", binary(O::kDivSI))
      .Case("arith.divui", binary(O::kDivUI))
      .Case("arith.remsi", binary(O::kRemSI))
      .Case("arith.remui", binary(O::kRemUI))
      .Case("arith.andi", binary(O::kAndI))
      .Case("arith.ori", binary(O::kOrI))
      .Case("arith.xori", binary(O::kXOrI))
      .Case("arith.shli", binary(O::kShLI))
      .Case("arith.shrsi", binary(O::kShRSI))
      .Case("arith.shrui", binary(O::kShRUI))
      .Case("arith.maxsi", binary(O::kMaxSI))
      .Case("arith.minsi", binary(O::kMinSI))
      .Case("arith.maxui", binary(O::kMaxUI))
      .Case("arith.minui", binary(O::kMinUI))
      .Case("arith.addf", binary(O::kAddF))
      .Case("arith.subf", binary(O::kSubF))
      .Case("arith.mulf", binary(O::kMulF))
      .Case("arith.divf", binary(O::kDivF))
      .Case("arith.maximumf", binary(O::kMaximumF))
      .Case("arith.minimumf", binary(O::kMinimumF))
      .Case("arith.maxnumf", binary(O::kMaxNumF))
      .Case("arith.minnumf", binary(O::kMinNumF))
      .Case("math.powf", binary(O::kPowF))
      .Case("math.copysign", binary(O::kCopySign))
      .Case("arith.negf", unary(O::kNegF))
      .Case("math.absf", unary(O::kAbsF))
      .Case("math.absi", unary(O::kAbsI))
      .Case("math.sqrt", unary(O::kSqrt))
      .Case("math.rsqrt", unary(O::kRsqrt))
      .Case("math.exp", unary(O::kExp))
      .Case("math.exp2", unary(O::kExp2))
      .Case("math.log", unary(O::kLog))
      .Case("math.log2", unary(O::kLog2))
      .Case("math.tanh", unary(O::kTanh))
      .Case("math.floor", unary(O::kFloor))
      .Case("math.ceil", unary(O::kCeil))
      .Case("arith.index_cast", cast(O::kIndexCast))
      .Case("arith.index_castui", cast(O::kIndexCastUI))
      .Case("arith.sitofp", cast(O::kSIToFP))
      .Case("arith.uitofp", cast(O::kUIToFP))
      .Case("arith.fptosi", cast(O::kFPToSI))
      .Case("arith.fptoui", cast(O::kFPToUI))
      .Case("arith.extsi", cast(O::kExtSI))
      .Case("arith.extui", cast(O::kExtUI))
      .Case("arith.trunci", cast(O::kTruncI))
      .Default(OpInfo{});
}

/// The bytecode type of a scalar MLIR type, if it has one.
std::optional<RegionType> toRegionType(Type type) {
  if (type.isIndex())
    return RegionType::kIndex;
  if (type.isF32())
    return RegionType::kF32;
  if (auto intType = dyn_cast<IntegerType>(type))
    if (intType.isSignless() && intType.getWidth() >= 1 &&
        intType.getWidth() <= 64)
      return static_cast<RegionType>(intType.getWidth());
  return std::nullopt;
}

class Emitter {
public:
  Emitter(RegionKind kind) : kind(kind), builder(kind) {}

  FailureOr<std::vector<uint8_t>> run(Region &region,
                                      ArrayRef<Type> extraOperandTypes);

private:
  LogicalResult declareOperands(Operation *parent, ArrayRef<Type> types);
  LogicalResult checkSignature(Region &region, Block &block);
  LogicalResult emitOp(Operation &op);
  FailureOr<Reg> lookup(Operation &op, Value value);
  FailureOr<RegionType> resultType(Operation &op);

  RegionKind kind;
  RegionBytecodeBuilder builder;
  llvm::DenseMap<Value, Reg> registers;
  SmallVector<std::pair<RegionType, int64_t>> operandSpecs;
  const char *regionName() const {
    return kind == RegionKind::kMask ? "mask" : "score";
  }
};

LogicalResult Emitter::declareOperands(Operation *parent,
                                       ArrayRef<Type> types) {
  if (types.size() > rb::kMaxOperands)
    return parent->emitError() << "attention op has " << types.size()
                               << " extra operands; CPU region bytecode "
                                  "supports at most "
                               << rb::kMaxOperands;
  for (auto [i, type] : llvm::enumerate(types)) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    std::optional<RegionType> element =
        tensor ? toRegionType(tensor.getElementType()) : std::nullopt;
    if (!element || !isValidOperandElementType(static_cast<uint8_t>(*element)) ||
        tensor.getRank() > static_cast<int64_t>(rb::kMaxOperandRank))
      return parent->emitError()
             << "extra operand #" << i << " of type " << type
             << " is not supported by CPU region bytecode (a ranked tensor "
                "of i1, i8, i16, i32, i64 or f32 with rank <= "
             << rb::kMaxOperandRank << ")";
    builder.addOperand(*element, static_cast<uint8_t>(tensor.getRank()));
    operandSpecs.push_back({*element, tensor.getRank()});
  }
  return success();
}

LogicalResult Emitter::checkSignature(Region &region, Block &block) {
  Operation *parent = region.getParentOp();
  unsigned expected = kind == RegionKind::kMask ? rb::kMaskArgumentCount
                                                : rb::kScoreArgumentCount;
  bool ok = block.getNumArguments() == expected;
  for (auto [i, arg] : llvm::enumerate(block.getArguments())) {
    bool isScore = kind == RegionKind::kScore && i == 0;
    ok = ok && (isScore ? arg.getType().isF32() : arg.getType().isIndex());
  }
  if (!ok)
    return parent->emitError()
           << regionName() << " region must take "
           << (kind == RegionKind::kMask ? "(index, index, index, index)"
                                         : "(f32, index, index, index, index)");
  return success();
}

FailureOr<Reg> Emitter::lookup(Operation &op, Value value) {
  auto it = registers.find(value);
  if (it == registers.end())
    return op.emitError() << "operand not defined inside the " << regionName()
                          << " region";
  return it->second;
}

FailureOr<RegionType> Emitter::resultType(Operation &op) {
  if (op.getNumResults() != 1)
    return op.emitError() << "expected one result for CPU region bytecode";
  std::optional<RegionType> type = toRegionType(op.getResult(0).getType());
  if (!type)
    return op.emitError() << "result type " << op.getResult(0).getType()
                          << " is not supported by CPU region bytecode "
                             "(i1..i64, index, f32)";
  return *type;
}

LogicalResult Emitter::emitOp(Operation &op) {
  StringRef name = op.getName().getStringRef();
  if (op.getNumRegions() != 0)
    return op.emitError() << "'" << name
                          << "' has regions; not supported in CPU region "
                             "bytecode";
  SmallVector<Reg, 4> srcs;
  for (Value operand : op.getOperands()) {
    FailureOr<Reg> reg = lookup(op, operand);
    if (failed(reg))
      return failure();
    srcs.push_back(*reg);
  }
  for (Value operand : op.getOperands())
    if (!toRegionType(operand.getType()))
      return op.emitError() << "operand type " << operand.getType()
                            << " is not supported by CPU region bytecode";

  if (name == "ingot.yield") {
    if (srcs.size() != 1)
      return op.emitError() << "expected exactly one yielded value";
    builder.yield(srcs[0]);
    return success();
  }

  FailureOr<RegionType> type = resultType(op);
  if (failed(type))
    return failure();
  Reg result = 0;
  OpInfo info = lookupOp(name);
  if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
    Attribute value = constant.getValue();
    if (auto intAttr = dyn_cast<IntegerAttr>(value);
        intAttr && *type != RegionType::kF32) {
      result = builder.constantInt(*type, intAttr.getValue().getZExtValue());
    } else if (auto floatAttr = dyn_cast<FloatAttr>(value);
               floatAttr && *type == RegionType::kF32) {
      result = builder.constantF32(floatAttr.getValue().convertToFloat());
    } else {
      return op.emitError() << "unsupported constant " << value
                            << " in CPU region bytecode";
    }
  } else if (auto cmpi = dyn_cast<arith::CmpIOp>(op)) {
    result = builder.cmpi(
        static_cast<CmpIPredicate>(static_cast<uint8_t>(cmpi.getPredicate())),
        srcs[0], srcs[1]);
  } else if (auto cmpf = dyn_cast<arith::CmpFOp>(op)) {
    result = builder.cmpf(
        static_cast<CmpFPredicate>(static_cast<uint8_t>(cmpf.getPredicate())),
        srcs[0], srcs[1]);
  } else if (name == "arith.select") {
    if (srcs.size() != 3 || !op.getOperand(0).getType().isInteger(1))
      return op.emitError()
             << "only scalar arith.select is supported in CPU region bytecode";
    result = builder.select(srcs[0], srcs[1], srcs[2]);
  } else if (name == "ingot.region_load") {
    auto index = op.getAttrOfType<IntegerAttr>("operand_index");
    if (!index || index.getInt() < 0 ||
        index.getInt() >= static_cast<int64_t>(operandSpecs.size()))
      return op.emitError() << "region_load of a missing extra operand";
    auto [element, rank] = operandSpecs[index.getInt()];
    if (element != *type || rank != static_cast<int64_t>(srcs.size()))
      return op.emitError()
             << "region_load does not match extra operand #" << index.getInt();
    result = builder.load(static_cast<uint8_t>(index.getInt()),
                          std::vector<Reg>(srcs.begin(), srcs.end()));
  } else if (info.shape == OpShape::Binary && srcs.size() == 2) {
    result = builder.binary(info.opcode, srcs[0], srcs[1]);
  } else if (info.shape == OpShape::Unary && srcs.size() == 1) {
    result = builder.unary(info.opcode, srcs[0]);
  } else if (info.shape == OpShape::Cast && srcs.size() == 1) {
    result = builder.cast(info.opcode, *type, srcs[0]);
  } else {
    return op.emitError() << "'" << name << "' is not supported in CPU "
                          << regionName() << " region bytecode";
  }
  registers[op.getResult(0)] = result;
  return success();
}

FailureOr<std::vector<uint8_t>>
Emitter::run(Region &region, ArrayRef<Type> extraOperandTypes) {
  Operation *parent = region.getParentOp();
  if (!region.hasOneBlock())
    return parent->emitError() << regionName()
                               << " region must have exactly one block";
  Block &block = region.front();
  if (failed(declareOperands(parent, extraOperandTypes)) ||
      failed(checkSignature(region, block)))
    return failure();
  Operation *terminator = block.getTerminator();
  if (!terminator || terminator->getName().getStringRef() != "ingot.yield")
    return parent->emitError()
           << regionName() << " region must end with ingot.yield";

  // Liveness: an op is emitted when one of its results reaches the yield.
  // Users follow definitions in a single block, so one backward walk suffices.
  llvm::DenseSet<Operation *> live;
  live.insert(terminator);
  for (Operation &op : llvm::reverse(block)) {
    if (live.contains(&op))
      continue;
    if (llvm::any_of(op.getUsers(),
                     [&](Operation *user) { return live.contains(user); }))
      live.insert(&op);
  }
  if (live.size() > rb::kMaxInstructions - rb::kScoreArgumentCount)
    return parent->emitError() << regionName() << " region has " << live.size()
                               << " live ops; CPU region bytecode supports "
                                  "at most "
                               << rb::kMaxInstructions;

  for (BlockArgument arg : block.getArguments())
    if (llvm::any_of(arg.getUsers(),
                     [&](Operation *user) { return live.contains(user); }))
      registers[arg] = builder.argument(arg.getArgNumber());

  for (Operation &op : block)
    if (live.contains(&op) && failed(emitOp(op)))
      return failure();

  std::vector<uint8_t> bytes = builder.finish();
  // The runtime decoder is the judge of well-formedness; never hand out bytes
  // it would refuse.
  StatusOr<RegionProgram> check = decodeRegionBytecode(bytes);
  if (!check.ok())
    return parent->emitError() << "emitted " << regionName()
                               << " bytecode does not decode: "
                               << check.status().message();
  return bytes;
}

} // namespace

FailureOr<std::vector<uint8_t>>
emitRegionBytecode(Region &region, RegionKind kind,
                   ArrayRef<Type> extraOperandTypes) {
  Emitter emitter(kind);
  return emitter.run(region, extraOperandTypes);
}

} // namespace ingot
