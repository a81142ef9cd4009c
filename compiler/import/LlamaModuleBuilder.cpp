//===- LlamaModuleBuilder.cpp - Llama-family serving step in the ingot dialect ===//
#include "compiler/import/LlamaModuleBuilder.h"

#include <cmath>

#include "dialects/ingot/IngotDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace ingot::importer {
namespace {

using namespace mlir;

Type elementTypeOf(MLIRContext *ctx, schema::DType dtype) {
  switch (dtype) {
  case schema::DType::F32:
    return Float32Type::get(ctx);
  case schema::DType::F16:
    return Float16Type::get(ctx);
  case schema::DType::BF16:
    return BFloat16Type::get(ctx);
  case schema::DType::F8E4M3FN:
    return Float8E4M3FNType::get(ctx);
  default:
    return {};
  }
}

/// Emits one Llama-family serving step; one instance per module.
class Builder {
public:
  Builder(MLIRContext &ctx, const ImportedModel &model)
      : ctx(ctx), model(model), cfg(model.config), b(&ctx), loc(UnknownLoc::get(&ctx)) {}

  FailureOr<OwningOpRef<ModuleOp>> build(std::string &error) {
    if (failed(checkConfig(error)))
      return failure();
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    module->getOperation()->setAttr("ingot.model", configAttr());
    b.setInsertionPointToEnd(module->getBody());

    f32 = b.getF32Type();
    Type i32 = b.getI32Type();
    auto vec = RankedTensorType::get({ShapedType::kDynamic}, i32);
    auto mat = RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic}, i32);
    Type kvElement = elementTypeOf(&ctx, cfg.kvDtype);
    cacheType = mlir::ingot::KvCacheType::get(&ctx, cfg.numLayers, cfg.numKvHeads, cfg.headDim,
                                        cfg.kvBlockSize, kvElement);
    auto logitsType =
        RankedTensorType::get({ShapedType::kDynamic, cfg.vocabSize}, f32);
    // After the eight step inputs: the speculative-decoding tree of each request (see
    // treeCausalMask), read only by the attention mask.
    auto cube = RankedTensorType::get(
        {ShapedType::kDynamic, ShapedType::kDynamic, ShapedType::kDynamic}, i32);
    SmallVector<Type> inputs = {vec, vec, cacheType, mat, vec, vec, vec, vec, vec, cube};
    SmallVector<Type> results = {logitsType, cacheType};
    auto fnType = b.getFunctionType(inputs, results);
    auto fn = func::FuncOp::create(b, loc, "step", fnType);
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    tokens = entry->getArgument(0);
    positions = entry->getArgument(1);
    Value cache = entry->getArgument(2);
    blockTables = entry->getArgument(3);
    seqLens = entry->getArgument(4);
    queryStart = entry->getArgument(5);
    slotMapping = entry->getArgument(6);
    Value logitRows = entry->getArgument(7);
    treeStart = entry->getArgument(8);
    treeBits = entry->getArgument(9);
    fn.setArgAttr(8, "ingot.input_name", b.getStringAttr("tree_start"));
    fn.setArgAttr(9, "ingot.input_name", b.getStringAttr("tree_bits"));

    Value embedTable = weight("model.embed_tokens.weight", error);
    if (!embedTable)
      return failure();
    // Llama 3 GGUFs hold their RoPE frequency factors as a tensor; every rope divides by them.
    if (model.find(kRopeFactorsTensor) >= 0 && !(ropeFactors = weight(kRopeFactorsTensor, error)))
      return failure();
    Value h = mlir::ingot::EmbeddingOp::create(b, loc, activation(cfg.hiddenSize), tokens,
                                         embedTable);
    if (model.features.embeddingScale != 0.0f)
      h = mlir::ingot::ScaleOp::create(b, loc, h,
                                       b.getF32FloatAttr(model.features.embeddingScale));
    for (int32_t layer = 0; layer < cfg.numLayers; ++layer) {
      if (failed(decoderLayer(layer, h, cache, error)))
        return failure();
    }
    Value normW = weight("model.norm.weight", error);
    if (!normW)
      return failure();
    Value x = rmsNorm(h, normW);
    Value head = cfg.tieWordEmbeddings ? embedTable : weight("lm_head.weight", error);
    if (!head)
      return failure();
    Value logits = mlir::ingot::LogitsOp::create(b, loc, logitsType, x, head, logitRows);
    func::ReturnOp::create(b, loc, ValueRange{logits, cache});
    return module;
  }

private:
  LogicalResult checkConfig(std::string &error) {
    if (cfg.numLayers <= 0 || cfg.hiddenSize <= 0 || cfg.numHeads <= 0 ||
        cfg.numKvHeads <= 0 || cfg.headDim <= 0 || cfg.vocabSize <= 0 ||
        cfg.intermediateSize <= 0) {
      error = "model config has a non-positive dimension";
      return failure();
    }
    if (cfg.numHeads % cfg.numKvHeads != 0) {
      error = "num_heads (" + std::to_string(cfg.numHeads) +
              ") is not a multiple of num_kv_heads (" + std::to_string(cfg.numKvHeads) + ")";
      return failure();
    }
    if (!elementTypeOf(&ctx, cfg.kvDtype)) {
      error = "unsupported KV cache dtype";
      return failure();
    }
    return success();
  }

  DictionaryAttr configAttr() {
    SmallVector<NamedAttribute> attrs = {
        b.getNamedAttr("architecture", b.getStringAttr(cfg.architecture)),
        b.getNamedAttr("name", b.getStringAttr(cfg.name)),
        b.getNamedAttr("vocab_size", b.getI64IntegerAttr(cfg.vocabSize)),
        b.getNamedAttr("hidden_size", b.getI64IntegerAttr(cfg.hiddenSize)),
        b.getNamedAttr("intermediate_size", b.getI64IntegerAttr(cfg.intermediateSize)),
        b.getNamedAttr("num_layers", b.getI32IntegerAttr(cfg.numLayers)),
        b.getNamedAttr("num_heads", b.getI32IntegerAttr(cfg.numHeads)),
        b.getNamedAttr("num_kv_heads", b.getI32IntegerAttr(cfg.numKvHeads)),
        b.getNamedAttr("head_dim", b.getI32IntegerAttr(cfg.headDim)),
        b.getNamedAttr("max_context", b.getI64IntegerAttr(cfg.maxContext)),
        b.getNamedAttr("rms_norm_eps", b.getF32FloatAttr(cfg.rmsNormEps)),
        b.getNamedAttr("rope_theta", b.getF64FloatAttr(cfg.rope.theta)),
        b.getNamedAttr("tie_word_embeddings", b.getBoolAttr(cfg.tieWordEmbeddings)),
        b.getNamedAttr("bos_token_id", b.getI64IntegerAttr(cfg.bosTokenId)),
        b.getNamedAttr("eos_token_ids", b.getI64ArrayAttr(cfg.eosTokenIds)),
    };
    if (!model.features.assumed.empty()) {
      SmallVector<Attribute> assumed;
      for (const std::string &a : model.features.assumed)
        assumed.push_back(b.getStringAttr(a));
      attrs.push_back(b.getNamedAttr("assumed", b.getArrayAttr(assumed)));
    }
    return b.getDictionaryAttr(attrs);
  }

  RankedTensorType activation(int64_t width) {
    return RankedTensorType::get({ShapedType::kDynamic, width}, f32);
  }

  /// The `ingot.weight` for `name`; sets `error` and returns null when it is missing.
  Value weight(const std::string &name, std::string &error) {
    int32_t handle = model.find(name);
    if (handle < 0) {
      error = "checkpoint has no tensor '" + name + "'";
      return {};
    }
    const ImportedTensor &t = model.tensors[handle];
    Type element = elementTypeOf(&ctx, t.dtype);
    if (!element) {
      error = "tensor '" + name + "' has a dtype the importer cannot express yet";
      return {};
    }
    auto type = RankedTensorType::get(t.shape, element);
    return mlir::ingot::WeightOp::create(b, loc, type, name, static_cast<uint64_t>(handle));
  }

  Value rmsNorm(Value x, Value w) {
    return mlir::ingot::RmsNormOp::create(b, loc, x.getType(), x, w,
                                    b.getF32FloatAttr(cfg.rmsNormEps));
  }

  Value linear(Value x, Value w, Value bias, int64_t outFeatures) {
    return mlir::ingot::LinearOp::create(b, loc, activation(outFeatures), x, w, bias, ValueRange{},
                                   mlir::ingot::QuantSchemeAttr{});
  }

  /// RoPE of `x`; a local (sliding-window) layer of a model with a local base takes that
  /// base and no frequency scaling (Gemma 3's long-context scaling is global-only).
  Value rope(Value x, int32_t heads, bool local) {
    const GraphFeatures &f = model.features;
    const bool localBase = local && f.localRopeTheta > 0.0;
    return mlir::ingot::RopeOp::create(
        b, loc, x.getType(), x, positions, localBase ? Value() : ropeFactors,
        b.getI32IntegerAttr(heads),
        b.getI32IntegerAttr(cfg.headDim),
        b.getF64FloatAttr(localBase ? f.localRopeTheta : cfg.rope.theta),
        localBase ? mlir::ingot::RopeScalingAttr{} : ropeScaling());
  }

  mlir::ingot::RopeScalingAttr ropeScaling() {
    if (cfg.rope.scaling == schema::RopeScalingKind::None)
      return {};
    auto apf = [](double v) { return llvm::APFloat(v); };
    mlir::ingot::RopeScalingKind kind = mlir::ingot::RopeScalingKind::None;
    switch (cfg.rope.scaling) {
    case schema::RopeScalingKind::Linear:
      kind = mlir::ingot::RopeScalingKind::Linear;
      break;
    case schema::RopeScalingKind::Llama3:
      kind = mlir::ingot::RopeScalingKind::Llama3;
      break;
    case schema::RopeScalingKind::Yarn:
      kind = mlir::ingot::RopeScalingKind::Yarn;
      break;
    default:
      break;
    }
    return mlir::ingot::RopeScalingAttr::get(
        &ctx, kind, apf(cfg.rope.factor), apf(cfg.rope.lowFreqFactor),
        apf(cfg.rope.highFreqFactor), cfg.rope.originalMaxPosition, apf(32.0), apf(1.0),
        apf(1.0));
  }

  /// Causal attention over the request's KV slots that also verifies speculative token
  /// trees: visible = kv <= q && (kv < tree_start[b] || kv is an ancestor-or-self of q).
  /// Request b's tree (root first, parents before children) sits at slots tree_start[b]
  /// onward; tree_bits[b][i][w] bit j holds whether tree node 32 * w + j is node i or one of
  /// its ancestors. A request without a tree passes tree_start = its KV length, which makes
  /// this plain causal attention. Indices are clamped so every load is in bounds for prefix
  /// slots (CPU regions run straight-line and evaluate every load).
  /// A positive `window` also limits each query to its last `window` keys (a local layer).
  void treeCausalMask(mlir::ingot::AttentionOp op, int64_t window) {
    Region &region = op.getMask();
    Block *block = b.createBlock(&region);
    Type index = b.getIndexType();
    Type i32 = b.getI32Type();
    for (int i = 0; i < 4; ++i)
      block->addArgument(index, loc);
    Value req = block->getArgument(0), q = block->getArgument(2), kv = block->getArgument(3);
    using arith::CmpIPredicate;
    Value causal = arith::CmpIOp::create(b, loc, CmpIPredicate::ule, kv, q);
    Value start32 = mlir::ingot::RegionLoadOp::create(b, loc, i32, b.getI64IntegerAttr(0),
                                                      ValueRange{req});
    Value start = arith::IndexCastOp::create(b, loc, index, start32);
    Value inPrefix = arith::CmpIOp::create(b, loc, CmpIPredicate::slt, kv, start);
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value wordBits = arith::ConstantIndexOp::create(b, loc, 32);
    Value nodeQ = arith::MaxSIOp::create(b, loc, arith::SubIOp::create(b, loc, q, start), zero);
    Value nodeKv = arith::MaxSIOp::create(b, loc, arith::SubIOp::create(b, loc, kv, start), zero);
    Value word = arith::DivUIOp::create(b, loc, nodeKv, wordBits);
    Value bit = arith::IndexCastOp::create(b, loc, i32, arith::RemUIOp::create(b, loc, nodeKv, wordBits));
    Value bits = mlir::ingot::RegionLoadOp::create(b, loc, i32, b.getI64IntegerAttr(1),
                                                   ValueRange{req, nodeQ, word});
    Value one = arith::ConstantIntOp::create(b, loc, i32, 1);
    Value ancestor = arith::TruncIOp::create(
        b, loc, b.getI1Type(),
        arith::AndIOp::create(b, loc, arith::ShRUIOp::create(b, loc, bits, bit), one));
    Value allowed = arith::OrIOp::create(b, loc, inPrefix, ancestor);
    Value visible = arith::AndIOp::create(b, loc, causal, allowed);
    if (window > 0) {
      // A local layer also needs q - kv < window: the query's own key and the window - 1
      // keys before it (kv <= q holds, so the difference does not wrap).
      Value distance = arith::SubIOp::create(b, loc, q, kv);
      Value width = arith::ConstantIndexOp::create(b, loc, window);
      Value inWindow = arith::CmpIOp::create(b, loc, CmpIPredicate::ult, distance, width);
      visible = arith::AndIOp::create(b, loc, visible, inWindow);
    }
    mlir::ingot::YieldOp::create(b, loc, ValueRange{visible});
  }

  LogicalResult decoderLayer(int32_t layer, Value &h, Value &cache, std::string &error) {
    const GraphFeatures &f = model.features;
    std::string p = "model.layers." + std::to_string(layer) + ".";
    int64_t qWidth = int64_t(cfg.numHeads) * cfg.headDim;
    int64_t kvWidth = int64_t(cfg.numKvHeads) * cfg.headDim;
    const bool local = f.slidingWindow > 0 && layer < int32_t(f.localLayers.size()) &&
                       f.localLayers[layer];
    auto w = [&](const std::string &suffix) { return weight(p + suffix, error); };
    auto bias = [&](const std::string &proj) -> Value {
      return f.attentionBias ? weight(p + "self_attn." + proj + ".bias", error) : Value();
    };

    Value inNorm = w("input_layernorm.weight");
    if (!inNorm)
      return failure();
    Value x = rmsNorm(h, inNorm);
    Value wq = w("self_attn.q_proj.weight"), bq = bias("q_proj");
    Value wk = w("self_attn.k_proj.weight"), bk = bias("k_proj");
    Value wv = w("self_attn.v_proj.weight"), bv = bias("v_proj");
    Value qNorm = f.qkNorm ? w("self_attn.q_norm.weight") : Value();
    Value kNorm = f.qkNorm ? w("self_attn.k_norm.weight") : Value();
    if (!error.empty())
      return failure();
    Value q = linear(x, wq, bq, qWidth);
    Value k = linear(x, wk, bk, kvWidth);
    if (f.qkNorm) { // per head: the weight spans head_dim of the row
      q = rmsNorm(q, qNorm);
      k = rmsNorm(k, kNorm);
    }
    q = rope(q, cfg.numHeads, local);
    k = rope(k, cfg.numKvHeads, local);
    Value v = linear(x, wv, bv, kvWidth);
    cache = mlir::ingot::KvWriteOp::create(b, loc, cacheType, cache, k, v, slotMapping,
                                     b.getI32IntegerAttr(layer));
    float scale = f.attentionScale != 0.0f ? f.attentionScale
                                           : 1.0f / std::sqrt(static_cast<float>(cfg.headDim));
    auto attn = mlir::ingot::AttentionOp::create(
        b, loc, activation(qWidth), q, cache, blockTables, seqLens, queryStart,
        ValueRange{treeStart, treeBits},
        b.getI32IntegerAttr(layer), b.getI32IntegerAttr(cfg.numHeads),
        b.getI32IntegerAttr(cfg.numKvHeads), b.getI32IntegerAttr(cfg.headDim),
        b.getF32FloatAttr(scale));
    {
      OpBuilder::InsertionGuard guard(b);
      treeCausalMask(attn, local ? f.slidingWindow : 0);
    }
    Value wo = w("self_attn.o_proj.weight");
    Value postAttnNorm = w("post_attention_layernorm.weight");
    Value preMlpNorm = f.sandwichNorms ? w("pre_feedforward_layernorm.weight") : postAttnNorm;
    Value postMlpNorm = f.sandwichNorms ? w("post_feedforward_layernorm.weight") : Value();
    Value wg = w("mlp.gate_proj.weight"), wu = w("mlp.up_proj.weight");
    Value wd = w("mlp.down_proj.weight");
    if (!error.empty())
      return failure();
    Value attnOut = linear(attn, wo, {}, cfg.hiddenSize);
    if (f.sandwichNorms)
      attnOut = rmsNorm(attnOut, postAttnNorm);
    h = mlir::ingot::AddOp::create(b, loc, h, attnOut);
    Value y = rmsNorm(h, preMlpNorm);
    Value gate = linear(y, wg, {}, cfg.intermediateSize);
    Value up = linear(y, wu, {}, cfg.intermediateSize);
    Value act = f.activation == MlpActivation::GeluTanh
                    ? mlir::ingot::GeluMulOp::create(b, loc, gate, up).getResult()
                    : mlir::ingot::SiluMulOp::create(b, loc, gate, up).getResult();
    Value mlpOut = linear(act, wd, {}, cfg.hiddenSize);
    if (f.sandwichNorms)
      mlpOut = rmsNorm(mlpOut, postMlpNorm);
    h = mlir::ingot::AddOp::create(b, loc, h, mlpOut);
    return success();
  }

  MLIRContext &ctx;
  const ImportedModel &model;
  const ModelConfig &cfg;
  OpBuilder b;
  Location loc;
  Type f32;
  mlir::ingot::KvCacheType cacheType;
  Value tokens, positions, blockTables, seqLens, queryStart, slotMapping, treeStart, treeBits;
  Value ropeFactors; // null without rope_freqs
};

} // namespace

mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildLlamaModule(mlir::MLIRContext &context, const ImportedModel &model, std::string &error) {
  context.loadDialect<mlir::ingot::IngotDialect, mlir::func::FuncDialect,
                      mlir::arith::ArithDialect>();
  return Builder(context, model).build(error);
}

} // namespace ingot::importer
