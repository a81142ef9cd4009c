//===- SimtInstrument.cpp - LLVM pass plugin for SIMT-emulated CUDA code ------------===//
//
// Loaded by the host compiler (clang -fpass-plugin) when the SIMT emulator builds a kernel
// translation unit (codegen/cuda/emulator/simt_module.cc). Two module passes:
//
//  - SharedArena (at the start of the pipeline): every thread_local of the module is a
//    `__shared__` array (the device prelude defines `__shared__` as thread_local). Each
//    static one gets an offset in the block's shared arena, between red zones of
//    kSharedRedZone bytes; every `extern __shared__` (dynamic) one starts after the last
//    static array. Each access through llvm.threadlocal.address becomes the arena base
//    (__ingot_simt_shared_base(), once per function) plus the offset, and the layout is
//    emitted as `__ingot_simt_shared_layout` (ingot_simt/abi.h, SharedLayout) for the
//    engine's bounds and race checks.
//  - Instrument (after optimization, so registers stay registers): a call to
//    __ingot_simt_access(address, size | write | atomic, site) before every load, store,
//    atomic and memory intrinsic whose address may be device or shared memory (not the
//    thread's own stack, not a by-value parameter, not a constant, not the thread record),
//    with the access's source line from the debug line table; and a call to
//    __ingot_simt_flops(n) at the start of each basic block holding n floating-point
//    operations (add, sub, mul, div, sqrt; an FMA is 2; vectors count each lane).
//
// Functions of the emulator itself (namespace ingot::simt, the __ingot_simt_* hooks) are
// left alone.
//
//===----------------------------------------------------------------------===//

#include <map>
#include <string>
#include <tuple>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/IR/ReplaceConstant.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Plugins/PassPlugin.h"

using namespace llvm;

namespace {

/// ingot_simt/abi.h, kSharedRedZone.
constexpr uint64_t kSharedRedZone = 64;
/// ingot_simt/abi.h, kAccessWrite / kAccessAtomic.
constexpr uint64_t kAccessWrite = 1ull << 32;
constexpr uint64_t kAccessAtomic = 1ull << 33;

bool isRuntimeFunction(const Function &F) {
  const StringRef n = F.getName();
  return n.starts_with("__ingot_simt") || n.starts_with("_ZN5ingot4simt") ||
         n.starts_with("_ZNK5ingot4simt");
}

Constant *cString(Module &M, StringMap<Constant *> &cache, StringRef text) {
  auto it = cache.find(text);
  if (it != cache.end()) return it->second;
  Constant *data = ConstantDataArray::getString(M.getContext(), text);
  auto *gv = new GlobalVariable(M, data->getType(), /*isConstant=*/true,
                                GlobalValue::PrivateLinkage, data, ".ingot_simt.str");
  gv->setUnnamedAddr(GlobalValue::UnnamedAddr::Global);
  cache[text] = gv;
  return gv;
}

// ---- SharedArena ---------------------------------------------------------------------------

struct SharedArena : PassInfoMixin<SharedArena> {
  PreservedAnalyses run(Module &M, ModuleAnalysisManager &) {
    LLVMContext &C = M.getContext();
    const DataLayout &DL = M.getDataLayout();
    Type *i8 = Type::getInt8Ty(C), *i64 = Type::getInt64Ty(C);
    PointerType *ptr = PointerType::get(C, 0);

    struct Placed {
      GlobalVariable *var;
      uint64_t offset, size;
    };
    std::vector<Placed> placed;
    std::vector<GlobalVariable *> dynamic;
    uint64_t offset = kSharedRedZone;
    for (GlobalVariable &G : M.globals()) {
      if (!G.isThreadLocal()) continue;
      if (G.isDeclaration()) {
        dynamic.push_back(&G);
        continue;
      }
      if (G.hasInitializer() && !G.getInitializer()->isNullValue() &&
          !isa<UndefValue>(G.getInitializer()))
        C.emitError("__shared__ variable " + G.getName() + " has an initializer");
      Type *T = G.getValueType();
      const uint64_t size = DL.getTypeAllocSize(T);
      Align align = std::max({G.getAlign().valueOrOne(), DL.getPrefTypeAlign(T), Align(16)});
      offset = alignTo(offset, align);
      placed.push_back({&G, offset, size});
      offset += size + kSharedRedZone;
    }
    const uint64_t dynamicOffset = alignTo(offset, 16);

    FunctionCallee baseFn = M.getOrInsertFunction("__ingot_simt_shared_base", ptr);
    DenseMap<Function *, Value *> bases;
    auto baseOf = [&](Function *F) -> Value * {
      auto it = bases.find(F);
      if (it != bases.end()) return it->second;
      IRBuilder<> B(&*F->getEntryBlock().getFirstInsertionPt());
      Value *base = B.CreateCall(baseFn, {}, "ingot.simt.shared");
      bases[F] = base;
      return base;
    };
    bool failed = false;
    auto rewrite = [&](GlobalVariable *G, uint64_t at) {
      SmallVector<Constant *, 1> roots{G};
      convertUsersOfConstantsToInstructions(roots);
      for (Use &U : make_early_inc_range(G->uses())) {
        auto *I = dyn_cast<Instruction>(U.getUser());
        if (!I) {
          C.emitError("__shared__ variable " + G->getName() + " is used outside a function");
          failed = true;
          continue;
        }
        IRBuilder<> B(I);
        Value *address = B.CreateConstInBoundsGEP1_64(i8, baseOf(I->getFunction()), at);
        auto *II = dyn_cast<IntrinsicInst>(I);
        if (II && II->getIntrinsicID() == Intrinsic::threadlocal_address) {
          II->replaceAllUsesWith(address);
          II->eraseFromParent();
        } else {
          U.set(address);
        }
      }
    };
    for (const Placed &p : placed) rewrite(p.var, p.offset);
    for (GlobalVariable *G : dynamic) rewrite(G, dynamicOffset);
    if (failed) return PreservedAnalyses::none();

    // The layout table: {name, offset, size} per static array.
    StringMap<Constant *> strings;
    StructType *varType = StructType::get(C, {ptr, i64, i64});
    std::vector<Constant *> entries;
    for (const Placed &p : placed)
      entries.push_back(ConstantStruct::get(
          varType, {cString(M, strings, p.var->getName()), ConstantInt::get(i64, p.offset),
                    ConstantInt::get(i64, p.size)}));
    ArrayType *tableType = ArrayType::get(varType, entries.size());
    auto *table = new GlobalVariable(M, tableType, true, GlobalValue::PrivateLinkage,
                                     ConstantArray::get(tableType, entries), ".ingot_simt.shared");
    StructType *layoutType = StructType::get(C, {i64, i64, ptr});
    new GlobalVariable(M, layoutType, true, GlobalValue::ExternalLinkage,
                       ConstantStruct::get(layoutType, {ConstantInt::get(i64, entries.size()),
                                                        ConstantInt::get(i64, dynamicOffset), table}),
                       "__ingot_simt_shared_layout");
    for (const Placed &p : placed) {
      p.var->removeDeadConstantUsers();
      if (p.var->use_empty()) p.var->eraseFromParent();
    }
    for (GlobalVariable *G : dynamic) {
      G->removeDeadConstantUsers();
      if (G->use_empty()) G->eraseFromParent();
    }
    return PreservedAnalyses::none();
  }
};

// ---- Instrument ----------------------------------------------------------------------------

/// Whether `object` (an underlying object) is derived from the frame address: the thread
/// record the prelude's self() finds (the record and the stack are the thread's own).
bool fromFrameAddress(const Value *object) {
  for (int depth = 0; depth < 8 && object; ++depth) {
    if (const auto *call = dyn_cast<IntrinsicInst>(object)) {
      if (call->getIntrinsicID() == Intrinsic::frameaddress) return true;
      if (call->getIntrinsicID() == Intrinsic::ptrmask) {
        object = call->getArgOperand(0);
        continue;
      }
      return false;
    }
    if (const auto *cast = dyn_cast<IntToPtrInst>(object)) {
      object = cast->getOperand(0);
      continue;
    }
    if (const auto *bin = dyn_cast<BinaryOperator>(object)) {
      object = isa<Constant>(bin->getOperand(1)) ? bin->getOperand(0) : bin->getOperand(1);
      continue;
    }
    if (const auto *cast = dyn_cast<PtrToIntInst>(object)) {
      object = getUnderlyingObject(cast->getOperand(0));
      continue;
    }
    return false;
  }
  return false;
}

/// Whether an access through `pointer` needs no check: the thread's own stack (allocas,
/// by-value parameters), constants, the thread record and the engine's entry points it
/// points to (Thread::ops; the arena pointer is read only by __ingot_simt_shared_base).
bool unchecked(const Value *pointer) {
  const Value *object = getUnderlyingObject(pointer, 16);
  if (isa<AllocaInst>(object)) return true;
  if (const auto *arg = dyn_cast<Argument>(object))
    return arg->hasByValAttr();
  if (const auto *gv = dyn_cast<GlobalVariable>(object)) return gv->isConstant();
  if (const auto *load = dyn_cast<LoadInst>(object))
    return fromFrameAddress(getUnderlyingObject(load->getPointerOperand(), 16));
  return fromFrameAddress(object);
}

uint64_t lanes(Type *T) {
  if (auto *v = dyn_cast<FixedVectorType>(T)) return v->getNumElements();
  return 1;
}

uint64_t flopsOf(const Instruction &I) {
  switch (I.getOpcode()) {
    case Instruction::FAdd:
    case Instruction::FSub:
    case Instruction::FMul:
    case Instruction::FDiv:
    case Instruction::FRem:
      return lanes(I.getType());
    default:
      break;
  }
  if (const auto *II = dyn_cast<IntrinsicInst>(&I)) {
    switch (II->getIntrinsicID()) {
      case Intrinsic::fma:
      case Intrinsic::fmuladd:
        return 2 * lanes(II->getType());
      case Intrinsic::sqrt:
        return lanes(II->getType());
      default:
        return 0;
    }
  }
  if (const auto *call = dyn_cast<CallInst>(&I))
    if (const Function *callee = call->getCalledFunction()) {
      const StringRef n = callee->getName();
      if (n == "fmaf" || n == "fma") return 2;
      if (n == "sqrtf" || n == "sqrt") return 1;
    }
  return 0;
}

struct Instrument : PassInfoMixin<Instrument> {
  PreservedAnalyses run(Module &M, ModuleAnalysisManager &) {
    LLVMContext &C = M.getContext();
    const DataLayout &DL = M.getDataLayout();
    Type *i32 = Type::getInt32Ty(C), *i64 = Type::getInt64Ty(C), *voidTy = Type::getVoidTy(C);
    PointerType *ptr = PointerType::get(C, 0);
    FunctionCallee access = M.getOrInsertFunction("__ingot_simt_access", voidTy, ptr, i64, ptr);
    FunctionCallee flops = M.getOrInsertFunction("__ingot_simt_flops", voidTy, i64);
    StructType *siteType = StructType::get(C, {ptr, i32, i32, ptr});
    StringMap<Constant *> strings;
    std::map<std::tuple<std::string, unsigned, unsigned, std::string>, Constant *> sites;
    Constant *nullPtr = ConstantPointerNull::get(ptr);

    auto siteOf = [&](const Instruction &I) -> Constant * {
      const DILocation *loc = I.getDebugLoc().get();
      if (!loc) return nullPtr;
      std::string function;
      if (const DISubprogram *sp = loc->getScope()->getSubprogram())
        function = sp->getLinkageName().empty() ? sp->getName().str() : sp->getLinkageName().str();
      auto key = std::make_tuple(loc->getFilename().str(), loc->getLine(), loc->getColumn(), function);
      auto it = sites.find(key);
      if (it != sites.end()) return it->second;
      Constant *init = ConstantStruct::get(
          siteType, {cString(M, strings, loc->getFilename()), ConstantInt::get(i32, loc->getLine()),
                     ConstantInt::get(i32, loc->getColumn()),
                     function.empty() ? nullPtr : cString(M, strings, function)});
      auto *gv = new GlobalVariable(M, siteType, true, GlobalValue::PrivateLinkage, init,
                                    ".ingot_simt.site");
      sites[key] = gv;
      return gv;
    };

    for (Function &F : M) {
      if (F.isDeclaration() || isRuntimeFunction(F)) continue;
      for (BasicBlock &BB : F) {
        uint64_t n = 0;
        struct Access {
          Instruction *at;
          Value *pointer;
          Value *size;  // i64
          uint64_t flags;
        };
        std::vector<Access> accesses;
        for (Instruction &I : BB) {
          n += flopsOf(I);
          if (auto *L = dyn_cast<LoadInst>(&I)) {
            accesses.push_back({&I, L->getPointerOperand(),
                                ConstantInt::get(i64, DL.getTypeStoreSize(L->getType())),
                                L->isAtomic() ? kAccessAtomic : 0});
          } else if (auto *S = dyn_cast<StoreInst>(&I)) {
            accesses.push_back({&I, S->getPointerOperand(),
                                ConstantInt::get(i64, DL.getTypeStoreSize(S->getValueOperand()->getType())),
                                kAccessWrite | (S->isAtomic() ? kAccessAtomic : 0)});
          } else if (auto *R = dyn_cast<AtomicRMWInst>(&I)) {
            accesses.push_back({&I, R->getPointerOperand(),
                                ConstantInt::get(i64, DL.getTypeStoreSize(R->getValOperand()->getType())),
                                kAccessWrite | kAccessAtomic});
          } else if (auto *X = dyn_cast<AtomicCmpXchgInst>(&I)) {
            accesses.push_back({&I, X->getPointerOperand(),
                                ConstantInt::get(i64, DL.getTypeStoreSize(X->getCompareOperand()->getType())),
                                kAccessWrite | kAccessAtomic});
          } else if (auto *T = dyn_cast<MemTransferInst>(&I)) {
            accesses.push_back({&I, T->getRawSource(), T->getLength(), 0});
            accesses.push_back({&I, T->getRawDest(), T->getLength(), kAccessWrite});
          } else if (auto *S = dyn_cast<MemSetInst>(&I)) {
            accesses.push_back({&I, S->getRawDest(), S->getLength(), kAccessWrite});
          }
        }
        for (const Access &a : accesses) {
          if (unchecked(a.pointer)) continue;
          IRBuilder<> B(a.at);
          Value *size = B.CreateAnd(B.CreateZExtOrTrunc(a.size, i64), ConstantInt::get(i64, 0xffffffffull));
          Value *info = B.CreateOr(size, ConstantInt::get(i64, a.flags));
          B.CreateCall(access, {a.pointer, info, siteOf(*a.at)});
        }
        if (n > 0) {
          IRBuilder<> B(&*BB.getFirstInsertionPt());
          B.CreateCall(flops, {ConstantInt::get(i64, n)});
        }
      }
    }
    return PreservedAnalyses::none();
  }
};

}  // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "IngotSimtInstrument", "1", [](PassBuilder &PB) {
            PB.registerPipelineStartEPCallback(
                [](ModulePassManager &MPM, OptimizationLevel) { MPM.addPass(SharedArena()); });
            PB.registerOptimizerLastEPCallback(
                [](ModulePassManager &MPM, OptimizationLevel, ThinOrFullLTOPhase) {
                  MPM.addPass(Instrument());
                });
          }};
}
