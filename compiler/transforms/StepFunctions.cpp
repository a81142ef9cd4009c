//===- StepFunctions.cpp - the serving-step functions of a compiled module -===//
#include "compiler/transforms/StepFunctions.h"

#include <array>

#include "dialects/ingot/IngotDialect.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

namespace ingot::compiler {

/// Largest tensor-parallel group a module may declare.
constexpr int64_t kMaxTensorParallel = 1024;

/// The serving-step function's arguments, in order; the runtime binds them by position.
/// rank -1 marks the KV cache.
struct StepInput {
  const char *name;
  int rank;
};
constexpr std::array<StepInput, kNumStepInputs> kStepInputs = {{
    {"tokens", 1},       // token ids of every new token, all requests concatenated
    {"positions", 1},    // rope position of each new token
    {"kv_cache", -1},    // the paged KV pool
    {"block_tables", 2}, // [request, logical block] -> physical block
    {"seq_lens", 1},     // KV length of each request after this step
    {"query_start", 1},  // CSR offsets of each request's new tokens (requests + 1)
    {"slot_mapping", 1}, // KV slot each new token is written to
    {"logit_rows", 1},   // which token rows produce logits
}};

llvm::SmallVector<mlir::func::FuncOp> findStepFunctions(mlir::ModuleOp module) {
  auto funcs = llvm::to_vector(module.getOps<mlir::func::FuncOp>());
  if (auto tp = module->getAttrOfType<mlir::IntegerAttr>(mlir::ingot::kTensorParallelAttrName);
      tp && tp.getInt() != 1) {
    const int64_t n = tp.getInt();
    if (n < 1 || n > kMaxTensorParallel) {
      module.emitError() << "'" << mlir::ingot::kTensorParallelAttrName << "' = " << n
                         << " is not a tensor-parallel group size (1 .. "
                         << kMaxTensorParallel << ")";
      return {};
    }
    llvm::SmallVector<mlir::func::FuncOp> byRank(n);
    for (mlir::func::FuncOp f : funcs) {
      auto rank = f->getAttrOfType<mlir::IntegerAttr>(mlir::ingot::kTensorParallelRankAttrName);
      if (!rank)
        continue;
      if (rank.getInt() < 0 || rank.getInt() >= n || byRank[rank.getInt()]) {
        f.emitError() << "'" << mlir::ingot::kTensorParallelRankAttrName << "' = "
                      << rank.getInt() << " is out of range or repeated in a module sharded "
                      << "over " << n << " ranks";
        return {};
      }
      byRank[rank.getInt()] = f;
    }
    for (int64_t r = 0; r < n; ++r)
      if (!byRank[r]) {
        module.emitError() << "the module is sharded over " << n
                           << " ranks but has no step function with '"
                           << mlir::ingot::kTensorParallelRankAttrName << "' = " << r;
        return {};
      }
    return byRank;
  }
  for (mlir::func::FuncOp f : funcs)
    if (f.getSymName() == "step")
      return {f};
  if (funcs.size() == 1)
    return {funcs.front()};
  module.emitError() << "expected a serving-step function named 'step' (or exactly "
                        "one function), found "
                     << funcs.size() << " functions";
  return {};
}

size_t countStepTensors(llvm::ArrayRef<mlir::func::FuncOp> steps) {
  size_t sharded = 0;
  llvm::StringSet<> replicated;
  for (mlir::func::FuncOp step : steps)
    step.walk([&](mlir::ingot::WeightOp op) {
      if (op.getShardAttr() || steps.size() == 1)
        ++sharded;
      else
        replicated.insert(op.getName());
    });
  return sharded + replicated.size();
}

const char *stepInputName(unsigned i) { return i < kStepInputs.size() ? kStepInputs[i].name : ""; }

mlir::LogicalResult verifyStepSignature(mlir::func::FuncOp func) {
  mlir::FunctionType type = func.getFunctionType();
  if (type.getNumInputs() < kStepInputs.size())
    return func.emitError() << "a serving step takes at least " << kStepInputs.size()
                            << " arguments (tokens, positions, cache, block_tables, "
                               "seq_lens, query_start, slot_mapping, logit_rows), found "
                            << type.getNumInputs();
  // Arguments after the eight are extra inputs of attention regions (tree masks,
  // document ids): tensors the regions can load.
  for (unsigned i = kStepInputs.size(); i < type.getNumInputs(); ++i)
    if (!llvm::isa<mlir::RankedTensorType>(type.getInput(i)))
      return func.emitError() << "serving-step argument " << i
                              << " (an extra attention input) must be a ranked tensor, found "
                              << type.getInput(i);
  for (auto [i, input] : llvm::enumerate(kStepInputs)) {
    mlir::Type t = type.getInput(i);
    bool ok;
    if (input.rank < 0) {
      ok = llvm::isa<mlir::ingot::KvCacheType>(t);
    } else {
      auto ranked = llvm::dyn_cast<mlir::RankedTensorType>(t);
      ok = ranked && ranked.getRank() == input.rank &&
           ranked.getElementType().isSignlessInteger(32);
    }
    if (!ok)
      return func.emitError() << "serving-step argument " << i << " ('" << input.name
                              << "') must be "
                              << (input.rank < 0 ? "an !ingot.kv_cache"
                                  : input.rank == 1 ? "a tensor<?xi32>"
                                                    : "a tensor<?x?xi32>")
                              << ", found " << t;
  }
  if (type.getNumResults() != 2 ||
      !llvm::isa<mlir::RankedTensorType>(type.getResult(0)) ||
      !llvm::isa<mlir::ingot::KvCacheType>(type.getResult(1)))
    return func.emitError("a serving step returns (logits, updated kv cache)");
  return mlir::success();
}

schema::OpKind stepKind(mlir::Operation *op) {
  return llvm::StringSwitch<schema::OpKind>(op->getName().getStringRef())
      .Case("ingot.embedding", schema::OpKind::Embedding)
      .Case("ingot.rms_norm", schema::OpKind::RmsNorm)
      .Case("ingot.add_rms_norm", schema::OpKind::AddRmsNorm)
      .Case("ingot.rope_kv_write", schema::OpKind::RopeKvWrite)
      .Case("ingot.layer_norm", schema::OpKind::LayerNorm)
      .Case("ingot.linear", schema::OpKind::Linear)
      .Case("ingot.gated_linear", schema::OpKind::GatedLinear)
      .Case("ingot.rope", schema::OpKind::Rope)
      .Case("ingot.kv_write", schema::OpKind::KvWrite)
      .Case("ingot.attention", schema::OpKind::Attention)
      .Case("ingot.silu_mul", schema::OpKind::SiluMul)
      .Case("ingot.gelu_mul", schema::OpKind::GeluMul)
      .Case("ingot.add", schema::OpKind::Add)
      .Case("ingot.scale", schema::OpKind::Scale)
      .Case("ingot.logits", schema::OpKind::Logits)
      .Case("ingot.all_reduce", schema::OpKind::AllReduce)
      .Case("ingot.all_gather", schema::OpKind::AllGather)
      .Default(schema::OpKind::Invalid);
}

} // namespace ingot::compiler
