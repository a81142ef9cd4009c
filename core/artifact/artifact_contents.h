//===- ArtifactContents.h - Plain C++ description of an artifact ----------===//
//
// What the compiler hands to ArtifactWriter: plain structs mirroring the tables of
// schemas/artifact.fbs (field meanings and units are documented there). No MLIR, no LLVM.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schemas/artifact_generated.h"

namespace ingot {

/// How a quantized weight's scales apply (QuantSchemeDef). Tensor indices are those
/// returned by ArtifactWriter::addTensor; -1 where absent.
struct QuantScheme {
  schema::QuantKind kind = schema::QuantKind::None;
  uint32_t blockSize = 0;
  schema::ZeroKind zeroKind = schema::ZeroKind::None;
  int32_t scaleTensor = -1;
  int32_t zeroTensor = -1;
  int32_t globalScaleTensor = -1;
  schema::ScaleLayout scaleLayout = schema::ScaleLayout::RowMajor;
};

/// Everything about a tensor except its bytes (TensorDef).
struct TensorSpec {
  std::string name;
  schema::DType dtype = schema::DType::Invalid;
  /// Logical shape in elements.
  std::vector<int64_t> shape;
  QuantScheme quant;
  /// Tensor-parallel rank owning the tensor, -1 = replicated.
  int32_t tpRank = -1;
};

struct RopeConfig {
  double theta = 10000.0;
  schema::RopeScalingKind scaling = schema::RopeScalingKind::None;
  double factor = 1.0;
  double lowFreqFactor = 1.0;
  double highFreqFactor = 4.0;
  int64_t originalMaxPosition = 0;
  int32_t rotaryDim = 0;
};

struct ModelConfig {
  std::string architecture;
  std::string name;
  int64_t vocabSize = 0;
  int64_t hiddenSize = 0;
  int64_t intermediateSize = 0;
  int32_t numLayers = 0;
  int32_t numHeads = 0;
  int32_t numKvHeads = 0;
  int32_t headDim = 0;
  int64_t maxContext = 0;
  float rmsNormEps = 1e-5f;
  RopeConfig rope;
  bool tieWordEmbeddings = false;
  schema::DType computeDtype = schema::DType::F32;
  schema::DType kvDtype = schema::DType::F32;
  int32_t kvBlockSize = 16;
  int64_t bosTokenId = -1;
  std::vector<int64_t> eosTokenIds;
};

struct Tokenizer {
  schema::TokenizerKind kind = schema::TokenizerKind::None;
  std::string preTokenizer;
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<schema::TokenAttr> tokenAttrs;
  std::vector<std::string> merges;
  int64_t bosTokenId = -1;
  int64_t eosTokenId = -1;
  int64_t padTokenId = -1;
  int64_t unkTokenId = -1;
  bool addBos = false;
  bool addEos = false;
  /// SentencePiece: prepend a space to the text (GGUF tokenizer.ggml.add_space_prefix).
  bool addSpacePrefix = true;
  std::string chatTemplate;
};

struct KernelBinary {
  /// "sm_80", "sm_90a", ..., or "compute_80" for generic PTX.
  std::string target;
  schema::BinaryFormat format = schema::BinaryFormat::Cubin;
  std::vector<uint8_t> data;
};

struct Kernel {
  std::string name;
  std::vector<uint32_t> blockDim;
  uint32_t sharedMemBytes = 0;
  std::vector<KernelBinary> binaries;
  /// The entry point's parameter sizes in order (KernelDef.param_bytes); empty: unknown.
  std::vector<uint32_t> paramBytes;
  /// The grid rule, x, y, z (KernelDef.grid; core/artifact/launch_grid.h); empty: none written.
  std::vector<schema::GridAxisDef> grid;
};

struct Buffer {
  std::string name;
  schema::BufferKind kind = schema::BufferKind::Activation;
  schema::DType dtype = schema::DType::Invalid;
  /// -1 marks a dynamic dimension.
  std::vector<int64_t> shape;
  /// Activations: the storage slot (core/artifact/slot_plan.h); -1 for other buffers, or
  /// for every buffer of a program the writer is to plan.
  int32_t slot = -1;
};

struct Param {
  std::string name;
  int64_t i = 0;
  double f = 0.0;
};

struct ProgramStep {
  schema::OpKind op = schema::OpKind::Invalid;
  int32_t kernel = -1;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<int32_t> weights;
  std::vector<Param> params;
  int32_t attentionVariant = -1;
  /// Compile side only, never written: the kernel the compiler chose for the step
  /// (ingot-select-kernels), which the kernel stage adds and links as `kernel`.
  std::string kernelName;
};

struct Program {
  std::string name;
  schema::ProgramRole role = schema::ProgramRole::Main;
  std::vector<Buffer> buffers;
  std::vector<ProgramStep> steps;
  std::vector<int32_t> layers;
  /// Tensor-parallel rank the program runs on, -1 = every rank (an unsharded artifact).
  int32_t tpRank = -1;
};

struct AttentionVariant {
  std::string name;
  std::vector<uint8_t> maskBytecode;
  std::vector<uint8_t> scoreBytecode;
  std::string deviceFunction;
};

struct Provenance {
  std::string compilerVersion;
  std::vector<std::string> options;
  std::string source;
  uint64_t sourceXxh64 = 0;
  std::string created;
  /// Configuration values the importer took from the architecture's published defaults
  /// because the checkpoint lacks them (format 1.7).
  std::vector<std::string> assumed;
};

/// Where a tensor landed in the blob; filled in by the writer.
struct TensorPlacement {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t xxh64 = 0;
};

/// Byte range of one tensor-parallel rank's tensors inside the blob.
struct ShardRange {
  int32_t rank = 0;
  uint64_t blobOffset = 0;
  uint64_t blobSize = 0;
};

/// The whole manifest in plain form.
struct ArtifactContents {
  bool hasConfig = false;
  ModelConfig config;
  bool hasTokenizer = false;
  Tokenizer tokenizer;
  std::vector<TensorSpec> tensors;
  std::vector<Kernel> kernels;
  std::vector<Program> programs;
  std::vector<AttentionVariant> attentionVariants;
  int32_t tpWorldSize = 1;
  bool hasProvenance = false;
  Provenance provenance;
  bool dummyWeights = false;
  uint64_t dummySeed = 0;
};

}  // namespace ingot
