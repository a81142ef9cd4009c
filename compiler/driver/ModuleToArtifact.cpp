//===- ModuleToArtifact.cpp - lower a compiled module to an artifact ------===//
#include "compiler/driver/ModuleToArtifact.h"

#include <array>
#include <map>
#include <optional>

#include "codegen/cpu/RegionBytecodeEmitter.h"
#include "compiler/driver/LoweringEnums.h"
#include "compiler/driver/QuantizedTensors.h"
#include "compiler/driver/RandomWeights.h"
#include "compiler/driver/ShardedTensors.h"
#include "compiler/transforms/KernelSelection.h"
#include "compiler/transforms/StepFunctions.h"
#include "core/artifact/dtype_info.h"
#include "dialects/ingot/IngotDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

namespace ingot::compiler {
namespace {

using mlir::failure;
using mlir::success;

/// Largest magnitude of random weights; keeps activations of deep random models finite.
constexpr float kRandomWeightAmplitude = 0.05f;

/// The manifest's RoPE summary of a rope op's scaling.
void summarizeRopeScaling(mlir::ingot::RopeScalingAttr scaling, RopeConfig &rope) {
  switch (scaling.getKind()) {
  case mlir::ingot::RopeScalingKind::None:
    return;
  case mlir::ingot::RopeScalingKind::Linear:
    rope.scaling = schema::RopeScalingKind::Linear;
    break;
  case mlir::ingot::RopeScalingKind::Llama3:
    rope.scaling = schema::RopeScalingKind::Llama3;
    break;
  case mlir::ingot::RopeScalingKind::Yarn:
    rope.scaling = schema::RopeScalingKind::Yarn;
    break;
  }
  rope.factor = scaling.getFactor().convertToDouble();
  rope.lowFreqFactor = scaling.getLowFreqFactor().convertToDouble();
  rope.highFreqFactor = scaling.getHighFreqFactor().convertToDouble();
  rope.originalMaxPosition = scaling.getOriginalMaxPosition();
}

/// Walks the serving-step function and fills the writer.
class ArtifactLowering {
public:
  ArtifactLowering(mlir::ModuleOp module, const LoweringOptions &options,
                   ArtifactWriter &writer, LoweringReport *report)
      : module(module), options(options), writer(writer), report(report) {}

  mlir::LogicalResult run() {
    if (options.weights == WeightSource::Checkpoint && !options.checkpoint)
      return module.emitError("checkpoint weights requested without a checkpoint");
    llvm::SmallVector<mlir::func::FuncOp> steps = findStepFunctions(module);
    if (steps.empty())
      return failure();
    if (failed(lowerConfig(steps.front())))
      return failure();
    // A sharded module has one step per rank (ingot-shard-tensor-parallel): one program
    // each, tensors of one rank or replicated (docs/tensor-parallel.md).
    writer.setTensorParallel(static_cast<int32_t>(steps.size() > 1 ? steps.size() : 1));
    numWeightTensors = countStepTensors(steps);
    for (mlir::func::FuncOp step : steps) {
      auto rankAttr = step->getAttrOfType<mlir::IntegerAttr>(
          mlir::ingot::kTensorParallelRankAttrName);
      const int32_t rank = steps.size() > 1 ? static_cast<int32_t>(rankAttr.getInt()) : -1;
      if (failed(collectWeights(step, rank)))
        return failure();
      Program program;
      program.name = step.getSymName().str();
      program.tpRank = rank;
      if (failed(lowerProgram(step, program)))
        return failure();
      writer.addProgram(std::move(program));
    }
    if (options.weights == WeightSource::Dummy)
      writer.setDummyWeights(options.seed);
    if (options.checkpoint && options.checkpoint->hasTokenizer)
      writer.setTokenizer(options.checkpoint->tokenizer);
    Provenance provenance = options.provenance;
    // What the importer assumed where the checkpoint was silent (ingot.model "assumed").
    if (auto dict = module->getAttrOfType<mlir::DictionaryAttr>("ingot.model"))
      if (auto assumed = dict.getAs<mlir::ArrayAttr>("assumed"))
        for (mlir::Attribute a : assumed)
          if (auto text = llvm::dyn_cast<mlir::StringAttr>(a))
            provenance.assumed.push_back(text.str());
    writer.setProvenance(provenance);
    if (report) {
      // Distinct source weights: a sharded module names each once per rank.
      llvm::StringSet<> quantizedNames;
      module.walk([&](mlir::ingot::WeightOp op) {
        if (auto encoding = op.getEncodingAttr())
          if (encoding.getPart() == mlir::ingot::QuantPart::Weight)
            quantizedNames.insert(op.getName());
      });
      report->quantizedWeights += quantizedNames.size();
      report->exactQuantizedWeights = quantized ? quantized->numExact() : 0;
    }
    return success();
  }

private:
  mlir::LogicalResult lowerConfig(mlir::func::FuncOp step) {
    auto dict = module->getAttrOfType<mlir::DictionaryAttr>("ingot.model");
    if (!dict)
      return module.emitError(
          "missing the module attribute 'ingot.model' (a dictionary with the model "
          "configuration: architecture, vocab_size, hidden_size, num_layers, ...)");
    ModelConfig config;
    auto getInt = [&](llvm::StringRef key, auto &field) {
      if (auto a = dict.getAs<mlir::IntegerAttr>(key))
        field = a.getInt();
    };
    auto getFloat = [&](llvm::StringRef key, auto &field) {
      if (auto a = dict.getAs<mlir::FloatAttr>(key))
        field = a.getValueAsDouble();
    };
    if (auto a = dict.getAs<mlir::StringAttr>("architecture"))
      config.architecture = a.str();
    if (auto a = dict.getAs<mlir::StringAttr>("name"))
      config.name = a.str();
    getInt("vocab_size", config.vocabSize);
    getInt("hidden_size", config.hiddenSize);
    getInt("intermediate_size", config.intermediateSize);
    getInt("num_layers", config.numLayers);
    getInt("num_heads", config.numHeads);
    getInt("num_kv_heads", config.numKvHeads);
    getInt("head_dim", config.headDim);
    getInt("max_context", config.maxContext);
    getInt("bos_token_id", config.bosTokenId);
    getFloat("rms_norm_eps", config.rmsNormEps);
    getFloat("rope_theta", config.rope.theta);
    if (auto a = dict.getAs<mlir::BoolAttr>("tie_word_embeddings"))
      config.tieWordEmbeddings = a.getValue();
    if (auto a = dict.getAs<mlir::ArrayAttr>("eos_token_ids"))
      for (mlir::Attribute e : a)
        if (auto i = llvm::dyn_cast<mlir::IntegerAttr>(e))
          config.eosTokenIds.push_back(i.getInt());
    if (config.vocabSize <= 0 || config.hiddenSize <= 0 || config.numLayers <= 0)
      return module.emitError("'ingot.model' needs positive vocab_size, hidden_size "
                              "and num_layers");

    // The KV cache operand fixes the cache's dtype and block size.
    for (mlir::Type t : step.getArgumentTypes()) {
      if (auto cache = llvm::dyn_cast<mlir::ingot::KvCacheType>(t)) {
        config.kvDtype = toDType(cache.getElementType());
        config.kvBlockSize = static_cast<int32_t>(cache.getBlockSize());
      }
    }
    // The compute dtype is the embedding's result element type.
    step.walk([&](mlir::ingot::EmbeddingOp op) {
      config.computeDtype = toDType(op.getResult().getType().getElementType());
    });
    // The manifest's RoPE summary is the rope ops' own scaling (every layer has the same;
    // after fusion they are rope_kv_write ops); the runtime reads each step's parameters,
    // this is what `ingot inspect` shows.
    step.walk([&](mlir::Operation *op) {
      mlir::ingot::RopeScalingAttr scaling;
      if (auto rope = llvm::dyn_cast<mlir::ingot::RopeOp>(op))
        scaling = rope.getScalingAttr();
      else if (auto fused = llvm::dyn_cast<mlir::ingot::RopeKvWriteOp>(op))
        scaling = fused.getScalingAttr();
      // Gemma 3's local layers have no scaling: the summary is the first scaled rope's.
      if (!scaling)
        return mlir::WalkResult::advance();
      summarizeRopeScaling(scaling, config.rope);
      return mlir::WalkResult::interrupt();
    });
    writer.setModelConfig(std::move(config));
    return success();
  }

  /// Adds one tensor per `ingot.weight` op, in program order. A quantized linear's
  /// weight tensor carries its scheme and the indices of its scale tensors. For the step of
  /// tensor-parallel rank `rank` (>= 0), sharded weights become tensors of that rank and
  /// replicated ones are added once, by the first rank that uses them.
  mlir::LogicalResult collectWeights(mlir::func::FuncOp step, int32_t rank) {
    // Tensor indices follow program order, so they are known before any is added.
    const int32_t base = static_cast<int32_t>(writer.numTensors());
    llvm::SmallVector<mlir::ingot::WeightOp> weights;
    mlir::WalkResult sharedWalk = step.walk([&](mlir::ingot::WeightOp op) {
      if (rank >= 0 && !op.getShardAttr()) {
        auto it = replicated.find(op.getName());
        if (it != replicated.end()) {
          if (it->second.getType() != op.getType() || it->second.getHandle() != op.getHandle()) {
            op.emitError() << "replicated weight '" << op.getName()
                           << "' differs between ranks in type or handle";
            return mlir::WalkResult::interrupt();
          }
          tensorOf[op.getResult()] = tensorOf.lookup(it->second.getResult());
          return mlir::WalkResult::advance();
        }
        replicated[op.getName()] = op;
      }
      tensorOf[op.getResult()] = base + static_cast<int32_t>(weights.size());
      weights.push_back(op);
      return mlir::WalkResult::advance();
    });
    if (sharedWalk.wasInterrupted())
      return failure();

    llvm::DenseMap<mlir::Value, QuantScheme> schemes;
    llvm::DenseSet<mlir::Value> scaleValues; // scales get positive random values
    // A quantized weight's scheme, from the linear (or gated linear) that reads it.
    auto record = [&](mlir::Operation *op, mlir::Value weight, mlir::ValueRange scaleOperands,
                      mlir::ingot::QuantSchemeAttr quant) {
      if (!tensorOf.count(weight)) {
        op->emitError("quantized linear weights must come from ingot.weight");
        return mlir::failure();
      }
      QuantScheme scheme;
      scheme.kind = toQuantKind(quant.getKind());
      scheme.blockSize = static_cast<uint32_t>(quant.getBlockSize());
      scheme.zeroKind = toZeroKind(quant.getOffsetKind());
      llvm::SmallVector<int32_t> scales;
      for (mlir::Value s : scaleOperands) {
        auto it = tensorOf.find(s);
        if (it == tensorOf.end()) {
          op->emitError("quantization scales must come from ingot.weight");
          return mlir::failure();
        }
        scaleValues.insert(s);
        scales.push_back(it->second);
      }
      if (!scales.empty())
        scheme.scaleTensor = scales[0];
      if (scales.size() > 1) {
        if (scheme.kind == schema::QuantKind::Nvfp4)
          scheme.globalScaleTensor = scales[1];
        else
          scheme.zeroTensor = scales[1];
      }
      schemes[weight] = scheme;
      return mlir::success();
    };
    mlir::WalkResult result = step.walk([&](mlir::Operation *op) {
      mlir::LogicalResult ok = mlir::success();
      if (auto linear = llvm::dyn_cast<mlir::ingot::LinearOp>(op); linear && linear.getQuantAttr())
        ok = record(op, linear.getWeight(), linear.getScales(), linear.getQuantAttr());
      if (auto gated = llvm::dyn_cast<mlir::ingot::GatedLinearOp>(op); gated && gated.getQuantAttr())
        if (mlir::failed(record(op, gated.getGateWeight(), gated.getGateScales(),
                                gated.getQuantAttr())) ||
            mlir::failed(record(op, gated.getUpWeight(), gated.getUpScales(),
                                gated.getQuantAttr())))
          ok = mlir::failure();
      return mlir::failed(ok) ? mlir::WalkResult::interrupt() : mlir::WalkResult::advance();
    });
    if (result.wasInterrupted())
      return failure();

    std::map<std::string, int32_t> names;
    for (mlir::ingot::WeightOp op : weights) {
      auto ranked = llvm::cast<mlir::RankedTensorType>(op.getResult().getType());
      if (!ranked.hasStaticShape())
        return op.emitError("weights need a static shape");
      TensorSpec spec;
      spec.name = op.getName().str();
      spec.dtype = toDType(ranked.getElementType());
      if (spec.dtype == schema::DType::Invalid)
        return op.emitError() << "element type " << ranked.getElementType()
                              << " has no artifact dtype";
      spec.shape.assign(ranked.getShape().begin(), ranked.getShape().end());
      spec.tpRank = op.getShardAttr() ? rank : -1;
      if (op.getShardAttr() && rank < 0)
        return op.emitError() << "weight '" << spec.name
                              << "' is a tensor-parallel shard in an unsharded module";
      if (auto it = schemes.find(op.getResult()); it != schemes.end())
        spec.quant = it->second;
      if (!names.emplace(spec.name, tensorOf[op.getResult()]).second)
        return op.emitError() << "duplicate weight name '" << spec.name << "'";
      if (options.weights == WeightSource::Dummy) {
        writer.addTensor(std::move(spec));
        continue;
      }
      if (options.weights == WeightSource::Checkpoint) {
        if (failed(op.getEncodingAttr() ? addQuantizedTensor(op, std::move(spec))
                                        : addCheckpointTensor(op, std::move(spec))))
          return failure();
        continue;
      }
      StatusOr<std::vector<uint8_t>> bytes =
          randomWeightBytes(op, spec, scaleValues.contains(op.getResult()));
      if (!bytes.ok())
        return op.emitError() << "weight '" << spec.name << "': " << bytes.status().message();
      writer.addTensor(std::move(spec), std::move(bytes).value());
    }
    return success();
  }

  /// Streams the checkpoint tensor behind `op`'s handle; its shape and dtype must be
  /// exactly what the module says.
  mlir::LogicalResult addCheckpointTensor(mlir::ingot::WeightOp op, TensorSpec spec) {
    const importer::ImportedModel &model = *options.checkpoint;
    uint64_t handle = op.getHandle();
    if (handle >= model.tensors.size())
      return op.emitError() << "weight handle " << handle << " is not in the checkpoint ("
                            << model.tensors.size() << " tensors)";
    const importer::ImportedTensor &tensor = model.tensors[handle];
    mlir::ingot::ShardAttr shard = op.getShardAttr();
    std::vector<int64_t> expected = tensor.shape;
    if (shard && shard.getDim() < static_cast<int64_t>(expected.size()) &&
        expected[shard.getDim()] == shard.getSourceSize())
      expected = slicedShape(tensor.shape, toSlice(shard));
    if (expected != spec.shape || tensor.dtype != spec.dtype)
      return op.emitError() << "weight '" << spec.name
                            << "' does not match checkpoint tensor '" << tensor.name
                            << "' in shape or dtype" << (shard ? " (as the shard's source)" : "");
    if (!shard) {
      addProducedTensor(std::move(spec), tensor.produce);
      return success();
    }
    StatusOr<TensorProducer> produce =
        sliceProducer(tensor.produce, tensor.dtype, tensor.shape, toSlice(shard));
    if (!produce.ok())
      return op.emitError() << "weight '" << spec.name << "': " << produce.status().message();
    addProducedTensor(std::move(spec), std::move(produce).value());
    return success();
  }

  static ShardSlice toSlice(mlir::ingot::ShardAttr shard) {
    return {shard.getDim(), shard.getOffset(), shard.getSize()};
  }

  /// Seeded pseudo-random bytes of `op`'s tensor. A shard is cut from the random bytes of
  /// its whole source, so every rank's slices tile the tensor an unsharded compile makes.
  StatusOr<std::vector<uint8_t>> randomWeightBytes(mlir::ingot::WeightOp op,
                                                   const TensorSpec &spec, bool positive) {
    mlir::ingot::ShardAttr shard = op.getShardAttr();
    std::vector<int64_t> source = spec.shape;
    if (shard)
      source[shard.getDim()] = shard.getSourceSize();
    uint64_t count = 1;
    for (int64_t d : source)
      count *= static_cast<uint64_t>(d);
    std::vector<uint8_t> whole;
    fillRandomWeights(spec.dtype, count, options.seed, spec.name, kRandomWeightAmplitude,
                      positive, whole);
    if (!shard)
      return whole;
    return sliceBytes(whole, spec.dtype, source, toSlice(shard));
  }

  /// A tensor that quantizes a checkpoint tensor (an `#ingot.encoding` weight); its bytes
  /// are encoded from the source tensor while the artifact is written. A shard of one is
  /// the slice of the whole tensor's part (so the ranks' slices tile it, and an NVFP4
  /// global scale is the whole tensor's), encoded once per rank.
  mlir::LogicalResult addQuantizedTensor(mlir::ingot::WeightOp op, TensorSpec spec) {
    mlir::ingot::WeightEncodingAttr encoding = op.getEncodingAttr();
    std::optional<quant::WeightEncoding> encoder = toWeightEncoding(encoding.getScheme());
    if (!encoder)
      return op.emitError() << "the compiler cannot quantize weights to "
                            << encoding.getScheme() << " yet";
    if (!quantized)
      quantized = std::make_unique<QuantizedTensors>(*options.checkpoint, options.quantScales,
                                                     options.quantColumnImportance);
    mlir::ingot::ShardAttr shard = op.getShardAttr();
    std::vector<int64_t> whole = spec.shape;
    if (shard)
      whole[shard.getDim()] = shard.getSourceSize();
    StatusOr<TensorProducer> produce = quantized->producer(
        op.getHandle(), *encoder, encoding.getScheme().getBlockSize(),
        toEncodedPart(encoding.getPart()), spec.dtype, whole, shard ? spec.tpRank : -1);
    if (produce.ok() && shard)
      produce = sliceProducer(std::move(produce).value(), spec.dtype, whole, toSlice(shard));
    if (!produce.ok())
      return op.emitError() << "weight '" << spec.name << "': " << produce.status().message();
    addProducedTensor(std::move(spec), std::move(produce).value());
    return success();
  }

  /// Adds a streamed tensor, reporting progress after it is written when asked.
  void addProducedTensor(TensorSpec spec, TensorProducer produce) {
    uint64_t size = packedByteSize(spec.dtype, spec.shape).value_or(0);
    if (options.onTensorWritten) {
      // Producers run later, inside ArtifactWriter::write(): capture by value only.
      produce = [inner = std::move(produce), progress = options.onTensorWritten,
                 done = tensorsWritten, total = numWeightTensors](const TensorByteSink &sink) {
        Status status = inner(sink);
        progress(++*done, total);
        return status;
      };
    }
    writer.addTensor(std::move(spec), size, std::move(produce));
  }

  int32_t addBuffer(Program &program, mlir::Value value, std::string name,
                    schema::BufferKind kind) {
    Buffer buffer;
    buffer.name = std::move(name);
    buffer.kind = kind;
    if (auto cache = llvm::dyn_cast<mlir::ingot::KvCacheType>(value.getType())) {
      buffer.kind = schema::BufferKind::KvCache;
      buffer.dtype = toDType(cache.getElementType());
      // [num_blocks (dynamic), layers, K/V, block_size, kv_heads, head_dim]
      buffer.shape = {-1, cache.getNumLayers(), 2, cache.getBlockSize(),
                      cache.getNumKvHeads(), cache.getHeadDim()};
    } else if (auto ranked = llvm::dyn_cast<mlir::RankedTensorType>(value.getType())) {
      buffer.dtype = toDType(ranked.getElementType());
      for (int64_t d : ranked.getShape())
        buffer.shape.push_back(mlir::ShapedType::isDynamic(d) ? -1 : d);
    }
    int32_t index = static_cast<int32_t>(program.buffers.size());
    program.buffers.push_back(std::move(buffer));
    bufferOf[value] = index;
    return index;
  }

  /// Scalar attributes of an op become step params; dialect attributes are spelled out.
  void lowerParams(mlir::Operation *op, ProgramStep &step) {
    for (mlir::NamedAttribute attr : op->getAttrs()) {
      Param p;
      p.name = attr.getName().str();
      mlir::Attribute value = attr.getValue();
      if (auto i = llvm::dyn_cast<mlir::IntegerAttr>(value)) {
        p.i = i.getValue().getSExtValue();
      } else if (auto f = llvm::dyn_cast<mlir::FloatAttr>(value)) {
        p.f = f.getValueAsDouble();
      } else if (auto b = llvm::dyn_cast<mlir::BoolAttr>(value)) {
        p.i = b.getValue();
      } else if (auto rs = llvm::dyn_cast<mlir::ingot::RopeScalingAttr>(value)) {
        step.params.push_back({"rope_scaling", static_cast<int64_t>(rs.getKind()), 0});
        step.params.push_back({"rope_factor", 0, rs.getFactor().convertToDouble()});
        step.params.push_back(
            {"rope_low_freq_factor", 0, rs.getLowFreqFactor().convertToDouble()});
        step.params.push_back(
            {"rope_high_freq_factor", 0, rs.getHighFreqFactor().convertToDouble()});
        step.params.push_back({"rope_original_max_position", rs.getOriginalMaxPosition(), 0});
        continue;
      } else {
        continue; // quant schemes live on the weight tensor; segment sizes are structural
      }
      step.params.push_back(std::move(p));
    }
  }

  /// The attention op's variant: the one ingot-specialize-attention named, its regions
  /// lowered to bytecode; ops of the same name share it (and must have the same regions).
  mlir::FailureOr<int32_t> lowerAttentionVariant(mlir::ingot::AttentionOp op) {
    if (!op.hasMask() && !op.hasScore())
      return -1;
    auto name = op->getAttrOfType<mlir::StringAttr>(kVariantAttr);
    if (!name)
      return op.emitError("attention regions without a variant name (ingot.variant); the "
                          "ingot-specialize-attention pass names them");
    llvm::SmallVector<mlir::Type> extraTypes;
    for (mlir::Value v : op.getExtra())
      extraTypes.push_back(v.getType());
    AttentionVariant variant;
    variant.name = name.str();
    if (op.hasMask()) {
      auto bytes = ingot::emitRegionBytecode(op.getMask(), RegionKind::kMask, extraTypes);
      if (failed(bytes))
        return failure();
      variant.maskBytecode = std::move(*bytes);
    }
    if (op.hasScore()) {
      auto bytes = ingot::emitRegionBytecode(op.getScore(), RegionKind::kScore, extraTypes);
      if (failed(bytes))
        return failure();
      variant.scoreBytecode = std::move(*bytes);
    }
    if (auto it = variantOf.find(variant.name); it != variantOf.end()) {
      const AttentionVariant &named = writer.contents().attentionVariants.at(it->second);
      if (named.maskBytecode != variant.maskBytecode ||
          named.scoreBytecode != variant.scoreBytecode)
        return op.emitError() << "attention variant '" << variant.name
                              << "' names different regions in two ops";
      return it->second;
    }
    const std::string key = variant.name;
    int32_t index = writer.addAttentionVariant(std::move(variant));
    variantOf.emplace(key, index);
    return index;
  }

  mlir::LogicalResult lowerProgram(mlir::func::FuncOp func, Program &program) {
    if (failed(verifyStepSignature(func)))
      return failure();
    for (mlir::BlockArgument arg : func.getArguments()) {
      const unsigned i = arg.getArgNumber();
      std::string name;
      if (i < kNumStepInputs)
        name = stepInputName(i);
      else if (auto attr = func.getArgAttrOfType<mlir::StringAttr>(i, "ingot.input_name"))
        name = attr.str();
      else
        name = "extra" + std::to_string(i - kNumStepInputs);
      addBuffer(program, arg, std::move(name), schema::BufferKind::Input);
    }
    for (mlir::Operation &op : func.getBody().front()) {
      if (llvm::isa<mlir::ingot::WeightOp>(op))
        continue;
      if (auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(op)) {
        for (mlir::Value v : ret.getOperands()) {
          auto it = bufferOf.find(v);
          if (it == bufferOf.end())
            return ret.emitError("returned value is not produced by a program step");
          if (program.buffers[it->second].kind == schema::BufferKind::Activation)
            program.buffers[it->second].kind = schema::BufferKind::Output;
        }
        continue;
      }
      ProgramStep step;
      step.op = stepKind(&op);
      if (step.op == schema::OpKind::Invalid)
        return op.emitError("op has no artifact program step (not an ingot model op)");
      for (mlir::Value v : op.getOperands()) {
        if (auto t = tensorOf.find(v); t != tensorOf.end()) {
          step.weights.push_back(t->second);
          continue;
        }
        auto b = bufferOf.find(v);
        if (b == bufferOf.end())
          return op.emitError("operand is neither a weight nor a program buffer");
        step.inputs.push_back(b->second);
      }
      auto slots = op.getAttrOfType<mlir::DenseI32ArrayAttr>(kSlotsAttr);
      if (slots && slots.size() != static_cast<int64_t>(op.getNumResults()))
        return op.emitError() << kSlotsAttr << " names " << slots.size() << " slots for "
                              << op.getNumResults() << " results";
      for (mlir::OpResult r : op.getResults()) {
        // kv_write updates the pool in place: its result is the cache operand's buffer.
        mlir::Value poolIn;
        if (auto write = llvm::dyn_cast<mlir::ingot::KvWriteOp>(op))
          poolIn = write.getCache();
        else if (auto fused = llvm::dyn_cast<mlir::ingot::RopeKvWriteOp>(op);
                 fused && r == fused.getResult())
          poolIn = fused.getCache();
        if (poolIn) {
          int32_t cache = bufferOf.lookup(poolIn);
          bufferOf[r] = cache;
          step.outputs.push_back(cache);
          continue;
        }
        std::string name = op.getName().stripDialect().str() + "." +
                           std::to_string(program.steps.size());
        if (op.getNumResults() > 1)  // add_rms_norm, rope_kv_write: a name per result
          name += "." + std::to_string(r.getResultNumber());
        step.outputs.push_back(addBuffer(program, r, name, schema::BufferKind::Activation));
        if (slots)  // the ingot-plan-steps pass's plan; without one the writer plans
          program.buffers.back().slot = slots[r.getResultNumber()];
      }
      lowerParams(&op, step);
      if (op.hasAttr(kFp8RowsAttr))
        step.params.push_back({"fp8_rows", 1, 0});
      if (auto gated = llvm::dyn_cast<mlir::ingot::GatedLinearOp>(op))
        step.params.push_back({"activation", gated.getActivation() == "gelu" ? 1 : 0, 0});
      if (auto attn = llvm::dyn_cast<mlir::ingot::AttentionOp>(op)) {
        auto variant = lowerAttentionVariant(attn);
        if (failed(variant))
          return failure();
        step.attentionVariant = *variant;
        if (auto kernel = attn->getAttrOfType<mlir::StringAttr>(kCudaKernelAttr))
          step.kernelName = kernel.str();
      }
      program.steps.push_back(std::move(step));
    }
    return success();
  }

  mlir::ModuleOp module;
  const LoweringOptions &options;
  ArtifactWriter &writer;
  LoweringReport *report;
  /// Encodes quantized weights from the checkpoint (created at the first one).
  std::unique_ptr<QuantizedTensors> quantized;
  size_t numWeightTensors = 0;
  /// Replicated weights of a sharded module by name: the first rank's op, whose tensor the
  /// other ranks share.
  llvm::StringMap<mlir::ingot::WeightOp> replicated;
  llvm::DenseMap<mlir::Value, int32_t> tensorOf;
  std::shared_ptr<size_t> tensorsWritten = std::make_shared<size_t>(0);
  llvm::DenseMap<mlir::Value, int32_t> bufferOf;
  /// Variant index by name.
  std::map<std::string, int32_t> variantOf;
};

} // namespace

mlir::LogicalResult lowerModuleToArtifact(mlir::ModuleOp module,
                                          const LoweringOptions &options,
                                          ArtifactWriter &writer, LoweringReport *report) {
  return ArtifactLowering(module, options, writer, report).run();
}

} // namespace ingot::compiler
