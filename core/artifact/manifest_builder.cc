//===- ManifestBuilder.cpp - ArtifactContents -> FlatBuffer manifest ------===//
#include "core/artifact/manifest_builder.h"

#include <string_view>
#include <unordered_map>

namespace ingot {
namespace {

namespace fb = flatbuffers;
using fb::FlatBufferBuilder;
using fb::Offset;

Offset<fb::Vector<Offset<fb::String>>>
createStrings(FlatBufferBuilder &fbb, const std::vector<std::string> &strings) {
  std::vector<Offset<fb::String>> offsets;
  offsets.reserve(strings.size());
  for (const std::string &s : strings)
    offsets.push_back(fbb.CreateString(s));
  return fbb.CreateVector(offsets);
}

Offset<schema::ModelConfigDef> buildConfig(FlatBufferBuilder &fbb,
                                           const ModelConfig &c) {
  const RopeConfig &r = c.rope;
  auto rope = schema::CreateRopeDef(fbb, r.theta, r.scaling, r.factor,
                                    r.lowFreqFactor, r.highFreqFactor,
                                    r.originalMaxPosition, r.rotaryDim);
  return schema::CreateModelConfigDefDirect(
      fbb, c.architecture.c_str(), c.name.c_str(), c.vocabSize, c.hiddenSize,
      c.intermediateSize, c.numLayers, c.numHeads, c.numKvHeads, c.headDim,
      c.maxContext, c.rmsNormEps, rope, c.tieWordEmbeddings, c.computeDtype,
      c.kvDtype, c.kvBlockSize, c.bosTokenId, &c.eosTokenIds);
}

Offset<schema::TokenizerDef> buildTokenizer(FlatBufferBuilder &fbb,
                                            const Tokenizer &t) {
  auto tokens = createStrings(fbb, t.tokens);
  auto merges = createStrings(fbb, t.merges);
  auto scores = fbb.CreateVector(t.scores);
  auto attrs = fbb.CreateVector(
      reinterpret_cast<const uint8_t *>(t.tokenAttrs.data()), t.tokenAttrs.size());
  auto pre = fbb.CreateString(t.preTokenizer);
  auto chat = fbb.CreateString(t.chatTemplate);
  schema::TokenizerDefBuilder b(fbb);
  b.add_kind(t.kind);
  b.add_pre_tokenizer(pre);
  b.add_tokens(tokens);
  b.add_scores(scores);
  b.add_token_attrs(
      fb::Offset<fb::Vector<schema::TokenAttr>>(attrs.o));
  b.add_merges(merges);
  b.add_bos_token_id(t.bosTokenId);
  b.add_eos_token_id(t.eosTokenId);
  b.add_pad_token_id(t.padTokenId);
  b.add_unk_token_id(t.unkTokenId);
  b.add_add_bos(t.addBos);
  b.add_add_eos(t.addEos);
  b.add_chat_template(chat);
  b.add_add_space_prefix(t.addSpacePrefix);
  return b.Finish();
}

Offset<schema::TensorDef> buildTensor(FlatBufferBuilder &fbb, const TensorSpec &t,
                                      const TensorPlacement &p) {
  const QuantScheme &q = t.quant;
  auto quant = schema::CreateQuantSchemeDef(fbb, q.kind, q.blockSize, q.zeroKind,
                                            q.scaleTensor, q.zeroTensor,
                                            q.globalScaleTensor, q.scaleLayout);
  return schema::CreateTensorDefDirect(fbb, t.name.c_str(), t.dtype, &t.shape, quant,
                                       p.offset, p.size, p.xxh64, t.tpRank);
}

/// Kernel binary data already in the buffer, by content. Kernels compiled from one
/// translation unit (the fused kernels of an element type) carry the same bytes: they are
/// stored once and every KernelBinaryDef holding them points at that one vector. Readers
/// see a full binary per kernel, as before; the file grows by one module, not one per kernel.
using StoredBinaries = std::unordered_map<std::string_view, Offset<fb::Vector<uint8_t>>>;

Offset<schema::KernelDef> buildKernel(FlatBufferBuilder &fbb, const Kernel &k,
                                      StoredBinaries &stored) {
  std::vector<Offset<schema::KernelBinaryDef>> binaries;
  for (const KernelBinary &bin : k.binaries) {
    const std::string_view bytes(reinterpret_cast<const char *>(bin.data.data()),
                                 bin.data.size());
    auto it = stored.find(bytes);
    if (it == stored.end())
      it = stored.emplace(bytes, fbb.CreateVector(bin.data)).first;
    binaries.push_back(schema::CreateKernelBinaryDef(fbb, fbb.CreateString(bin.target),
                                                     bin.format, it->second));
  }
  return schema::CreateKernelDefDirect(fbb, k.name.c_str(), &k.blockDim,
                                       k.sharedMemBytes, &binaries,
                                       k.paramBytes.empty() ? nullptr : &k.paramBytes,
                                       k.grid.empty() ? nullptr : &k.grid);
}

Offset<schema::ProgramDef> buildProgram(FlatBufferBuilder &fbb, const Program &p) {
  std::vector<Offset<schema::BufferDef>> buffers;
  for (const Buffer &b : p.buffers)
    buffers.push_back(
        schema::CreateBufferDefDirect(fbb, b.name.c_str(), b.kind, b.dtype, &b.shape, b.slot));
  std::vector<Offset<schema::ProgramStepDef>> steps;
  for (const ProgramStep &s : p.steps) {
    std::vector<Offset<schema::ParamDef>> params;
    for (const Param &param : s.params)
      params.push_back(
          schema::CreateParamDefDirect(fbb, param.name.c_str(), param.i, param.f));
    steps.push_back(schema::CreateProgramStepDefDirect(
        fbb, s.op, s.kernel, &s.inputs, &s.outputs, &s.weights, &params,
        s.attentionVariant));
  }
  return schema::CreateProgramDefDirect(fbb, p.name.c_str(), p.role, &buffers,
                                        &steps, &p.layers, p.tpRank);
}

Offset<schema::AttentionVariantDef> buildVariant(FlatBufferBuilder &fbb,
                                                 const AttentionVariant &v) {
  return schema::CreateAttentionVariantDefDirect(fbb, v.name.c_str(), &v.maskBytecode,
                                                 &v.scoreBytecode,
                                                 v.deviceFunction.c_str());
}

} // namespace

std::vector<uint8_t> buildManifest(const ArtifactContents &contents,
                                   const std::vector<TensorPlacement> &placements,
                                   const std::vector<ShardRange> &shards) {
  FlatBufferBuilder fbb(1 << 16);
  fbb.ForceDefaults(true);

  Offset<schema::ModelConfigDef> config;
  if (contents.hasConfig)
    config = buildConfig(fbb, contents.config);
  Offset<schema::TokenizerDef> tokenizer;
  if (contents.hasTokenizer)
    tokenizer = buildTokenizer(fbb, contents.tokenizer);

  std::vector<Offset<schema::TensorDef>> tensors;
  tensors.reserve(contents.tensors.size());
  for (size_t i = 0; i < contents.tensors.size(); ++i)
    tensors.push_back(buildTensor(fbb, contents.tensors[i], placements[i]));

  std::vector<Offset<schema::KernelDef>> kernels;
  StoredBinaries storedBinaries;
  for (const Kernel &k : contents.kernels)
    kernels.push_back(buildKernel(fbb, k, storedBinaries));
  std::vector<Offset<schema::ProgramDef>> programs;
  for (const Program &p : contents.programs)
    programs.push_back(buildProgram(fbb, p));
  std::vector<Offset<schema::AttentionVariantDef>> variants;
  for (const AttentionVariant &v : contents.attentionVariants)
    variants.push_back(buildVariant(fbb, v));

  std::vector<Offset<schema::ShardDef>> shardDefs;
  for (const ShardRange &s : shards)
    shardDefs.push_back(schema::CreateShardDef(fbb, s.rank, s.blobOffset, s.blobSize));
  auto tp = schema::CreateTensorParallelDefDirect(fbb, contents.tpWorldSize, &shardDefs);

  Offset<schema::ProvenanceDef> provenance;
  if (contents.hasProvenance) {
    const Provenance &p = contents.provenance;
    auto options = createStrings(fbb, p.options);
    auto assumed = createStrings(fbb, p.assumed);
    provenance = schema::CreateProvenanceDef(
        fbb, fbb.CreateString(p.compilerVersion), options, fbb.CreateString(p.source),
        p.sourceXxh64, fbb.CreateString(p.created), assumed);
  }

  auto manifest = schema::CreateManifestDirect(
      fbb, config, tokenizer, &tensors, &kernels, &programs, &variants, tp, provenance,
      contents.dummyWeights, contents.dummySeed);
  schema::FinishManifestBuffer(fbb, manifest);
  return std::vector<uint8_t>(fbb.GetBufferPointer(),
                              fbb.GetBufferPointer() + fbb.GetSize());
}

} // namespace ingot
