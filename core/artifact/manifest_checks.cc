// Semantic checks of a verified manifest: every index in range, every tensor inside the blob.
#include "core/artifact/manifest_checks.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/artifact/dtype_info.h"
#include "core/region/region_program.h"
#include "schemas/artifact_header.h"

namespace ingot {
namespace {

using flatbuffers::Vector;

std::string tensorLabel(size_t i, const schema::TensorDef& t) {
  return "tensor " + std::to_string(i) + " '" + displayName(t.name()) + "'";
}

/// True when [offset, offset + size) lies inside [0, limit), without overflow.
bool rangeInside(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

bool indexOk(int64_t index, size_t count, bool allowNone) {
  if (allowNone && index == -1) return true;
  return index >= 0 && static_cast<uint64_t>(index) < count;
}

Status checkTensor(size_t i, const schema::TensorDef& t, size_t numTensors,
                   int32_t worldSize, uint64_t blobSize, bool hasBlob) {
  if (dtypeBits(t.dtype()) == 0)
    return dataLoss(tensorLabel(i, t) + ": unknown dtype " +
                    std::to_string(static_cast<int>(t.dtype())));
  if (t.shape())
    for (int64_t dim : *t.shape())
      if (dim < 0)
        return dataLoss(tensorLabel(i, t) + ": negative dimension " + std::to_string(dim));
  // A missing shape is a scalar (one element).
  std::optional<uint64_t> expected = t.shape() ? packedByteSize(t.dtype(), *t.shape())
                                               : packedByteSize(t.dtype(), std::vector<int64_t>{});
  if (!expected)
    return dataLoss(tensorLabel(i, t) + ": element count overflows");
  if (*expected != t.size())
    return dataLoss(tensorLabel(i, t) + ": size " + std::to_string(t.size()) +
                    " bytes does not match " + dtypeName(t.dtype()) + " shape (" +
                    std::to_string(*expected) + " bytes)");
  if (hasBlob) {
    if (t.offset() % artifact::kBlobAlignment != 0)
      return dataLoss(tensorLabel(i, t) + ": blob offset " + std::to_string(t.offset()) +
                      " is not a multiple of " + std::to_string(artifact::kBlobAlignment));
    if (!rangeInside(t.offset(), t.size(), blobSize))
      return dataLoss(tensorLabel(i, t) + ": bytes [" + std::to_string(t.offset()) + ", +" +
                      std::to_string(t.size()) + ") lie outside the " +
                      std::to_string(blobSize) + "-byte blob");
  }
  if (const schema::QuantSchemeDef* q = t.quant()) {
    for (int32_t ref : {q->scale_tensor(), q->zero_tensor(), q->global_scale_tensor()})
      if (!indexOk(ref, numTensors, true) || ref == static_cast<int64_t>(i))
        return dataLoss(tensorLabel(i, t) + ": quant tensor index " + std::to_string(ref) +
                        " is out of range");
  }
  if (t.tp_rank() < -1 || t.tp_rank() >= worldSize)
    return dataLoss(tensorLabel(i, t) + ": tp_rank " + std::to_string(t.tp_rank()) +
                    " outside world size " + std::to_string(worldSize));
  return okStatus();
}

template <typename T>
size_t sizeOf(const Vector<T>* v) {
  return v ? v->size() : 0;
}

Status checkIndices(const Vector<int32_t>* indices, size_t count, const std::string& what,
                    const char* kind) {
  if (!indices) return okStatus();
  for (int32_t index : *indices)
    if (!indexOk(index, count, false))
      return dataLoss(what + ": " + kind + " index " + std::to_string(index) +
                      " out of range (" + std::to_string(count) + ")");
  return okStatus();
}

Status checkPrograms(const schema::Manifest& m) {
  if (!m.programs()) return okStatus();
  size_t numTensors = sizeOf(m.tensors());
  size_t numKernels = sizeOf(m.kernels());
  size_t numVariants = sizeOf(m.attention_variants());
  for (size_t p = 0; p < m.programs()->size(); ++p) {
    const schema::ProgramDef* program = m.programs()->Get(p);
    size_t numBuffers = sizeOf(program->buffers());
    if (!program->steps()) continue;
    for (size_t s = 0; s < program->steps()->size(); ++s) {
      const schema::ProgramStepDef* step = program->steps()->Get(s);
      std::string what = "program " + std::to_string(p) + " step " + std::to_string(s);
      INGOT_RETURN_IF_ERROR(checkIndices(step->inputs(), numBuffers, what, "input buffer"));
      INGOT_RETURN_IF_ERROR(checkIndices(step->outputs(), numBuffers, what, "output buffer"));
      INGOT_RETURN_IF_ERROR(checkIndices(step->weights(), numTensors, what, "weight tensor"));
      if (!indexOk(step->kernel(), numKernels, true))
        return dataLoss(what + ": kernel index " + std::to_string(step->kernel()) +
                        " out of range (" + std::to_string(numKernels) + ")");
      if (!indexOk(step->attention_variant(), numVariants, true))
        return dataLoss(what + ": attention variant index " +
                        std::to_string(step->attention_variant()) + " out of range (" +
                        std::to_string(numVariants) + ")");
    }
    if (program->layers() && m.config()) {
      for (int32_t layer : *program->layers())
        if (!indexOk(layer, static_cast<size_t>(std::max(0, m.config()->num_layers())), false))
          return dataLoss("program " + std::to_string(p) + ": layer " +
                          std::to_string(layer) + " out of range");
    }
  }
  return okStatus();
}

/// Every attention variant's bytecode must decode (the decoder validates it completely),
/// and a mask slot must hold a mask program, a score slot a score program.
Status checkAttentionVariants(const schema::Manifest& m) {
  if (!m.attention_variants()) return okStatus();
  for (size_t v = 0; v < m.attention_variants()->size(); ++v) {
    const schema::AttentionVariantDef* var = m.attention_variants()->Get(v);
    struct Slot {
      const flatbuffers::Vector<uint8_t>* bytes;
      RegionKind kind;
      const char* name;
    };
    for (const Slot& slot : {Slot{var->mask_bytecode(), RegionKind::kMask, "mask"},
                             Slot{var->score_bytecode(), RegionKind::kScore, "score"}}) {
      if (!slot.bytes || slot.bytes->size() == 0) continue;
      StatusOr<RegionProgram> program =
          decodeRegionBytecode(slot.bytes->data(), slot.bytes->size());
      std::string what = "attention variant " + std::to_string(v) + " " + slot.name;
      if (!program.ok()) return dataLoss(what + " bytecode: " + program.status().message());
      if (program->kind() != slot.kind)
        return dataLoss(what + " bytecode holds a program of the other region kind");
    }
  }
  return okStatus();
}

Status checkTokenizer(const schema::TokenizerDef& t) {
  size_t vocab = sizeOf(t.tokens());
  if (t.scores() && t.scores()->size() != 0 && t.scores()->size() != vocab)
    return dataLoss("tokenizer: " + std::to_string(t.scores()->size()) + " scores for " +
                    std::to_string(vocab) + " tokens");
  if (t.token_attrs() && t.token_attrs()->size() != 0 && t.token_attrs()->size() != vocab)
    return dataLoss("tokenizer: " + std::to_string(t.token_attrs()->size()) +
                    " token attributes for " + std::to_string(vocab) + " tokens");
  return okStatus();
}

Status checkTensorParallel(const schema::TensorParallelDef& tp, uint64_t blobSize,
                           bool hasBlob) {
  if (tp.world_size() < 1)
    return dataLoss("tensor parallel: world size " + std::to_string(tp.world_size()) +
                    " is less than 1");
  if (!tp.shards()) return okStatus();
  for (const schema::ShardDef* shard : *tp.shards()) {
    if (shard->rank() < 0 || shard->rank() >= tp.world_size())
      return dataLoss("tensor parallel: shard rank " + std::to_string(shard->rank()) +
                      " outside world size " + std::to_string(tp.world_size()));
    if (hasBlob && !rangeInside(shard->blob_offset(), shard->blob_size(), blobSize))
      return dataLoss("tensor parallel: shard of rank " + std::to_string(shard->rank()) +
                      " lies outside the blob");
  }
  return okStatus();
}

/// FlatBuffers 2.0.8's verifier checks a vector's length word for 4-byte alignment but
/// not its elements for their own alignment, so an int64 vector may sit at 4 mod 8 and
/// reading it would be a misaligned load. The manifest's 8-byte vectors are all int64.
/// Empty vectors are never read (FlatBufferBuilder may leave them at 4 mod 8).
bool aligned8(const Vector<int64_t>* v) {
  return !v || v->size() == 0 ||
         reinterpret_cast<uintptr_t>(v->Data()) % alignof(int64_t) == 0;
}

Status checkVectorAlignment(const schema::Manifest& m) {
  const Status misaligned =
      dataLoss("manifest fails verification: misaligned int64 vector: file is corrupt");
  if (m.config() && !aligned8(m.config()->eos_token_ids())) return misaligned;
  if (m.tensors())
    for (const schema::TensorDef* t : *m.tensors())
      if (!aligned8(t->shape())) return misaligned;
  if (m.programs())
    for (const schema::ProgramDef* p : *m.programs())
      if (p->buffers())
        for (const schema::BufferDef* b : *p->buffers())
          if (!aligned8(b->shape())) return misaligned;
  return okStatus();
}

}  // namespace

std::string displayName(const flatbuffers::String* s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  if (!s) return out;
  for (char c : s->string_view()) {
    if (out.size() >= 120) return out + "...";
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

Status checkManifest(const schema::Manifest& m, uint64_t blobSize, bool hasBlob) {
  // First: nothing below may read an int64 vector before its alignment is known.
  INGOT_RETURN_IF_ERROR(checkVectorAlignment(m));
  int32_t worldSize = m.tensor_parallel() ? m.tensor_parallel()->world_size() : 1;
  if (m.tensor_parallel())
    INGOT_RETURN_IF_ERROR(checkTensorParallel(*m.tensor_parallel(), blobSize, hasBlob));
  if (m.tensors()) {
    size_t n = m.tensors()->size();
    if (n > static_cast<size_t>(INT32_MAX)) return dataLoss("too many tensors");
    for (size_t i = 0; i < n; ++i)
      INGOT_RETURN_IF_ERROR(
          checkTensor(i, *m.tensors()->Get(i), n, worldSize, blobSize, hasBlob));
  }
  INGOT_RETURN_IF_ERROR(checkPrograms(m));
  INGOT_RETURN_IF_ERROR(checkAttentionVariants(m));
  if (m.tokenizer()) INGOT_RETURN_IF_ERROR(checkTokenizer(*m.tokenizer()));
  return okStatus();
}

const schema::ParamDef* findStepParam(const schema::ProgramStepDef& step, const char* name) {
  if (!step.params()) return nullptr;
  for (const schema::ParamDef* p : *step.params())
    if (p->name() && p->name()->str() == name) return p;
  return nullptr;
}

}  // namespace ingot
