//===- SampleArtifact.cpp - Small, complete artifacts for tests and fuzz seeds -===//
#include "testing/sample_artifact.h"

#include "core/region/region_examples.h"

#include <memory>
#include <random>

#include "core/artifact/dtype_info.h"
#include "core/artifact/launch_grid.h"

namespace ingot {

using schema::DType;
using schema::OpKind;
using schema::QuantKind;

namespace {

/// The sample model's config: a one-layer Llama with llama3 rope scaling.
ModelConfig sampleModelConfig() {
  ModelConfig config;
  config.architecture = "llama";
  config.name = "sample-tiny";
  config.vocabSize = 32;
  config.hiddenSize = 16;
  config.intermediateSize = 32;
  config.numLayers = 1;
  config.numHeads = 4;
  config.numKvHeads = 2;
  config.headDim = 4;
  config.maxContext = 256;
  config.rope.theta = 100000.0;
  config.rope.scaling = schema::RopeScalingKind::Llama3;
  config.rope.factor = 8.0;
  config.computeDtype = DType::BF16;
  config.kvDtype = DType::BF16;
  config.bosTokenId = 1;
  config.eosTokenIds = {2, 3};
  return config;
}

/// The sample tokenizer: 32 byte-level BPE tokens, two of them control tokens.
Tokenizer sampleTokenizer() {
  Tokenizer tok;
  tok.kind = schema::TokenizerKind::ByteLevelBpe;
  tok.preTokenizer = "smollm";
  for (int i = 0; i < 32; ++i)
    tok.tokens.push_back(i == 1 ? "<|im_start|>" : i == 2 ? "<|im_end|>" : "t" + std::to_string(i));
  tok.tokenAttrs.assign(32, schema::TokenAttr::Normal);
  tok.tokenAttrs[1] = tok.tokenAttrs[2] = schema::TokenAttr::Control;
  tok.merges = {"t 1", "t1 2", "h e"};
  tok.bosTokenId = 1;
  tok.eosTokenId = 2;
  tok.addBos = true;
  tok.chatTemplate = "{% for m in messages %}{{ m.content }}{% endfor %}";
  return tok;
}

/// Adds the sample kernel (a cubin and a PTX binary); returns its index.
int32_t addSampleKernel(ArtifactWriter &writer) {
  Kernel kernel;
  kernel.name = "ingot_rms_norm_bf16";
  kernel.blockDim = {256, 1, 1};
  kernel.sharedMemBytes = 1024;
  kernel.grid = {gridAxis(schema::GridCount::Rows), gridAxis(schema::GridCount::One),
                 gridAxis(schema::GridCount::One)};
  kernel.binaries.push_back({"sm_90a", schema::BinaryFormat::Cubin, {0x7f, 'E', 'L', 'F', 1, 2}});
  kernel.binaries.push_back({"compute_80", schema::BinaryFormat::Ptx,
                             std::vector<uint8_t>({'.', 'v', 'e', 'r', 's', 'i', 'o', 'n'})});
  return writer.addKernel(kernel);
}

/// Adds the causal and softcap attention variants; returns the causal one's index.
int32_t addSampleAttentionVariants(ArtifactWriter &writer) {
  AttentionVariant causal;
  causal.name = "causal";
  causal.maskBytecode = causalMaskBytecode();
  causal.deviceFunction = "ingot_mask_causal";
  int32_t causalIndex = writer.addAttentionVariant(causal);
  AttentionVariant softcap;
  softcap.name = "softcap";
  softcap.scoreBytecode = softcapScoreBytecode(30.0f);
  writer.addAttentionVariant(softcap);
  return causalIndex;
}

/// Tensor, kernel and attention-variant indices the sample's main program refers to.
struct SampleIndices {
  int32_t embed, qProj, upProj, down, norm, kernel, causal;
};

/// Adds the "main" program and the one-layer "draft" program.
void addSamplePrograms(ArtifactWriter &writer, const SampleIndices &index) {
  Program program;
  program.name = "main";
  program.buffers = {
      {"tokens", schema::BufferKind::Input, DType::I32, {-1}},
      {"hidden", schema::BufferKind::Activation, DType::BF16, {-1, 16}},
      {"q", schema::BufferKind::Activation, DType::BF16, {-1, 16}},
      {"kv_cache", schema::BufferKind::KvCache, DType::BF16, {}},
      {"logits", schema::BufferKind::Output, DType::F32, {-1, 32}},
  };
  program.steps = {
      {OpKind::Embedding, -1, {0}, {1}, {index.embed}, {}, -1},
      {OpKind::RmsNorm, index.kernel, {1}, {1}, {index.norm}, {{"epsilon", 0, 1e-5}}, -1},
      {OpKind::Linear, -1, {1}, {2}, {index.qProj, 2}, {}, -1},
      {OpKind::Attention, -1, {2, 3}, {1}, {}, {{"layer", 0, 0.0}, {"scale", 0, 0.5}},
       index.causal},
      {OpKind::Linear, -1, {1}, {2}, {index.upProj, 4, 5}, {}, -1},
      {OpKind::Linear, -1, {2}, {1}, {index.down, 9, 10}, {}, -1},
      {OpKind::Logits, -1, {1}, {4}, {index.embed}, {}, -1},
  };
  writer.addProgram(program);
  Program draft;
  draft.name = "draft";
  draft.role = schema::ProgramRole::Draft;
  draft.layers = {0};
  writer.addProgram(draft);
}

/// The sample provenance: compiler version, options, source and creation time.
Provenance sampleProvenance() {
  Provenance provenance;
  provenance.compilerVersion = "ingot 0.1.0 (sample)";
  provenance.options = {"--target=sm_90a", "--quant=mixed"};
  provenance.source = "/models/sample-tiny";
  provenance.sourceXxh64 = 0x0123456789abcdefULL;
  provenance.created = "2026-11-29T00:00:00Z";
  return provenance;
}

} // namespace

std::vector<std::vector<uint8_t>> populateSampleArtifact(ArtifactWriter &writer,
                                                         const SampleOptions &options) {
  std::mt19937_64 rng(options.seed);
  auto bytes = std::make_shared<std::vector<std::vector<uint8_t>>>();

  auto add = [&](std::string name, DType dtype, std::vector<int64_t> shape,
                 QuantScheme quant = {}, int32_t tpRank = -1) {
    TensorSpec spec{std::move(name), dtype, std::move(shape), quant, tpRank};
    std::vector<uint8_t> data(packedByteSize(spec.dtype, spec.shape).value_or(0));
    for (uint8_t &b : data)
      b = static_cast<uint8_t>(rng());
    bytes->push_back(data);
    if (options.dummyWeights)
      return writer.addTensor(std::move(spec));
    if (!options.streamTensors)
      return writer.addTensor(std::move(spec), std::move(data));
    // Emit in uneven chunks, as a checkpoint reader would.
    size_t index = bytes->size() - 1;
    uint64_t size = data.size();
    return writer.addTensor(std::move(spec), size,
                            [bytes, index](const TensorByteSink &sink) -> Status {
                              const std::vector<uint8_t> &d = (*bytes)[index];
                              for (size_t at = 0; at < d.size(); at += 7) {
                                size_t n = std::min<size_t>(7, d.size() - at);
                                INGOT_RETURN_IF_ERROR(sink(d.data() + at, n));
                              }
                              return okStatus();
                            });
  };

  const int32_t rank1 = options.tpWorldSize > 1 ? 1 : -1;
  const int32_t rank0 = options.tpWorldSize > 1 ? 0 : -1;
  int32_t embed = add("embed_tokens.weight", DType::BF16, {32, 16});
  // Indices are known in advance: a weight names its scales before they are added.
  QuantScheme perTensor{QuantKind::PerTensor, 0, schema::ZeroKind::None, 2};
  int32_t qProj = add("layers.0.attn.q_proj.weight", DType::F8E4M3FN, {16, 16}, perTensor, rank0);
  add("layers.0.attn.q_proj.scale", DType::F32, {1});
  QuantScheme nvfp4{QuantKind::Nvfp4, 16, schema::ZeroKind::None, 4, -1, 5};
  int32_t upProj = add("layers.0.mlp.up_proj.weight", DType::F4E2M1FN, {32, 16}, nvfp4, rank1);
  add("layers.0.mlp.up_proj.scale", DType::F8E4M3FN, {32, 1});
  add("layers.0.mlp.up_proj.global_scale", DType::F32, {});
  QuantScheme mxfp4{QuantKind::Mxfp4, 32, schema::ZeroKind::None, 7};
  add("layers.0.mlp.gate_proj.weight", DType::F4E2M1FN, {32, 32}, mxfp4);
  add("layers.0.mlp.gate_proj.scale", DType::F8E8M0FNU, {32, 1});
  QuantScheme int4{QuantKind::Int4Group, 32, schema::ZeroKind::Zero, 9, 10};
  int32_t down = add("layers.0.mlp.down_proj.weight", DType::I4, {16, 64}, int4);
  add("layers.0.mlp.down_proj.scale", DType::F16, {16, 2});
  add("layers.0.mlp.down_proj.zero", DType::F16, {16, 2});
  int32_t norm = add("norm.weight", DType::F32, {16});
  add("odd_sized.u4", DType::U4, {3});
  add("big_page.weight", DType::F32, {1100});  // more than one 4 KiB page

  writer.setModelConfig(sampleModelConfig());
  writer.setTokenizer(sampleTokenizer());
  int32_t kernelIndex = addSampleKernel(writer);
  int32_t causalIndex = addSampleAttentionVariants(writer);
  addSamplePrograms(writer, {embed, qProj, upProj, down, norm, kernelIndex, causalIndex});

  writer.setTensorParallel(options.tpWorldSize);
  writer.setProvenance(sampleProvenance());
  if (options.dummyWeights)
    writer.setDummyWeights(options.seed);
  return *bytes;
}

} // namespace ingot
