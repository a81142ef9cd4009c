// `ingot inspect`: prints an artifact's manifest in human form and optionally verifies checksums.
#include "runtime/cli/inspect_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <string_view>

#include "core/artifact/artifact_reader.h"
#include "core/artifact/dtype_info.h"
#include "core/artifact/manifest_checks.h"
#include "core/artifact/launch_grid.h"
#include "core/region/region_disassembler.h"
#include "core/region/region_program.h"
#include "xxhash.h"

namespace ingot {
namespace {

using flatbuffers::String;
using flatbuffers::Vector;

/// Manifest strings are untrusted: escape control bytes and cap the length so every
/// printed line stays one readable line.
std::string printable(const String* s, size_t maxLen = 80) {
  if (!s) return "";
  std::string out;
  for (char c : s->string_view()) {
    if (out.size() >= maxLen) {
      out += "...";
      break;
    }
    unsigned char u = static_cast<unsigned char>(c);
    if (u == '\n') out += "\\n";
    else if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
    else out += c;
  }
  return out;
}

/// "RmsNorm" -> "rms_norm"; values this build does not know print as `what(N)`.
std::string snakeName(const char* camel, const char* what, int value) {
  if (!camel || !*camel) return fmt::format("{}({})", what, value);
  std::string out;
  for (const char* p = camel; *p; ++p) {
    if (std::isupper(static_cast<unsigned char>(*p)) && p != camel) out += '_';
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
  }
  return out;
}

std::string dtypeText(schema::DType d) {
  return dtypeBits(d) ? dtypeName(d) : fmt::format("dtype({})", static_cast<int>(d));
}

std::string bytesText(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 3) v /= 1024, ++u;
  return fmt::format("{:.1f} {}", v, units[u]);
}

template <typename T>
std::string listText(const Vector<T>* v, const char* prefix = "", size_t maxItems = 16) {
  std::string out = "[";
  if (v) {
    for (size_t i = 0; i < v->size(); ++i) {
      if (i == maxItems) {
        out += fmt::format(", ... {} more", v->size() - i);
        break;
      }
      if (i) out += ", ";
      out += fmt::format("{}{}", prefix, static_cast<int64_t>(v->Get(i)));
    }
  }
  return out + "]";
}

std::string shapeText(const Vector<int64_t>* shape) {
  std::string out = "[";
  if (shape)
    for (size_t i = 0; i < shape->size(); ++i)
      out += (i ? "," : "") + (shape->Get(i) < 0 ? std::string("?") : std::to_string(shape->Get(i)));
  return out + "]";
}

template <typename T>
size_t count(const T* v) {
  return v ? v->size() : 0;
}

/// Prints rows [0, n) with `printRow`, eliding the middle of long tables.
template <typename F>
void printRows(std::ostream& out, size_t n, const InspectOptions& options, const char* noun,
               F printRow) {
  size_t limit = std::max<size_t>(options.maxRows, 16);
  if (options.all || n <= limit) {
    for (size_t i = 0; i < n; ++i) printRow(i);
    return;
  }
  size_t tail = 8, head = limit - tail;
  for (size_t i = 0; i < head; ++i) printRow(i);
  out << fmt::format("    ... {} more {} ...\n", n - head - tail, noun);
  for (size_t i = n - tail; i < n; ++i) printRow(i);
}

void printConfig(const schema::ModelConfigDef& c, std::ostream& out) {
  out << fmt::format("model: {} ({})\n", printable(c.name()), printable(c.architecture()));
  out << fmt::format(
      "  vocab {}, hidden {}, intermediate {}, layers {}, heads {} (kv {}), head_dim {}\n",
      c.vocab_size(), c.hidden_size(), c.intermediate_size(), c.num_layers(), c.num_heads(),
      c.num_kv_heads(), c.head_dim());
  out << fmt::format("  max context {}, rms_norm_eps {:g}, tied embeddings {}\n",
                     c.max_context(), c.rms_norm_eps(), c.tie_word_embeddings() ? "yes" : "no");
  if (const schema::RopeDef* r = c.rope()) {
    out << fmt::format("  rope: theta {:g}, scaling {}", r->theta(),
                       snakeName(schema::EnumNameRopeScalingKind(r->scaling()), "scaling",
                                 static_cast<int>(r->scaling())));
    if (r->scaling() != schema::RopeScalingKind::None)
      out << fmt::format(" (factor {:g}, low {:g}, high {:g}, original max {})", r->factor(),
                         r->low_freq_factor(), r->high_freq_factor(),
                         r->original_max_position());
    out << fmt::format(", rotary dim {}\n",
                       r->rotary_dim() ? std::to_string(r->rotary_dim()) : "head_dim");
  }
  out << fmt::format("  compute {}, kv cache {} in blocks of {} tokens\n",
                     dtypeText(c.compute_dtype()), dtypeText(c.kv_dtype()), c.kv_block_size());
  out << fmt::format("  bos {}, eos {}\n", c.bos_token_id(), listText(c.eos_token_ids()));
}

void printTokenizer(const schema::TokenizerDef& t, std::ostream& out) {
  size_t vocab = count(t.tokens());
  auto special = [&](int64_t id) {
    if (id < 0) return std::string("-");
    if (static_cast<uint64_t>(id) < vocab)
      return fmt::format("{} \"{}\"", id, printable(t.tokens()->Get(id), 40));
    return fmt::format("{} (out of vocab)", id);
  };
  const char* kinds[] = {"none", "byte-level BPE", "SentencePiece BPE"};
  size_t kind = static_cast<size_t>(t.kind());
  out << fmt::format("tokenizer: {}, pre-tokenizer {}, vocab {}, merges {}, scores {}\n",
                     kind < 3 ? kinds[kind] : fmt::format("kind({})", kind).c_str(),
                     t.pre_tokenizer() ? printable(t.pre_tokenizer()) : "-", vocab,
                     count(t.merges()), count(t.scores()));
  size_t control = 0;
  if (t.token_attrs())
    for (schema::TokenAttr a : *t.token_attrs()) control += a == schema::TokenAttr::Control;
  out << fmt::format("  specials: bos {}, eos {}, pad {}, unk {}; add bos {}, add eos {}\n",
                     special(t.bos_token_id()), special(t.eos_token_id()),
                     special(t.pad_token_id()), special(t.unk_token_id()),
                     t.add_bos() ? "yes" : "no", t.add_eos() ? "yes" : "no");
  size_t templateSize = t.chat_template() ? t.chat_template()->size() : 0;
  out << fmt::format("  control tokens {}, chat template {}\n", control,
                     templateSize ? fmt::format("present ({} chars)", templateSize)
                                  : std::string("absent"));
}

std::string quantText(const schema::QuantSchemeDef* q) {
  if (!q || q->kind() == schema::QuantKind::None) return "-";
  std::string out = snakeName(schema::EnumNameQuantKind(q->kind()), "quant",
                              static_cast<int>(q->kind()));
  if (q->block_size()) out += fmt::format("/{}", q->block_size());
  if (q->scale_tensor() >= 0) out += fmt::format(" s=#{}", q->scale_tensor());
  if (q->zero_tensor() >= 0)
    out += fmt::format(" {}=#{}", q->zero_kind() == schema::ZeroKind::Min ? "min" : "z",
                       q->zero_tensor());
  if (q->global_scale_tensor() >= 0) out += fmt::format(" g=#{}", q->global_scale_tensor());
  return out;
}

void printTensors(const Artifact& a, const InspectOptions& options, std::ostream& out) {
  size_t n = a.numTensors();
  uint64_t total = 0;
  std::map<std::string, std::pair<size_t, uint64_t>> byDtype;
  size_t nameWidth = 4, shapeWidth = 5, quantWidth = 5;
  for (size_t i = 0; i < n; ++i) {
    const schema::TensorDef& t = a.tensor(i);
    total += t.size();
    auto& entry = byDtype[dtypeText(t.dtype())];
    entry.first++;
    entry.second += t.size();
    nameWidth = std::max(nameWidth, std::min<size_t>(printable(t.name(), 60).size(), 60));
    shapeWidth = std::max(shapeWidth, std::min<size_t>(shapeText(t.shape()).size(), 24));
    quantWidth = std::max(quantWidth, quantText(t.quant()).size());
  }
  out << fmt::format("tensors: {}, {}{}\n", n, bytesText(total),
                     a.hasBlob() ? "" : " (dummy weights: sizes only, no data)");
  std::string summary;
  for (const auto& [dtype, entry] : byDtype)
    summary += fmt::format("{}{} x{} ({})", summary.empty() ? "  by dtype: " : ", ", dtype,
                           entry.first, bytesText(entry.second));
  if (!summary.empty()) out << summary << "\n";
  if (n == 0) return;
  out << fmt::format("  {:>5}  {:<{}}  {:<9}  {:<{}}  {:<{}}  {:>12}  {:>10}  {}\n", "#", "name",
                     nameWidth, "dtype", "shape", shapeWidth, "quant", quantWidth, "offset",
                     "size", "xxh64");
  printRows(out, n, options, "tensors", [&](size_t i) {
    const schema::TensorDef& t = a.tensor(i);
    std::string rank = t.tp_rank() >= 0 ? fmt::format("  rank {}", t.tp_rank()) : "";
    out << fmt::format("  {:>5}  {:<{}}  {:<9}  {:<{}}  {:<{}}  {:>12}  {:>10}  {}{}\n", i,
                       printable(t.name(), 60), nameWidth, dtypeText(t.dtype()),
                       shapeText(t.shape()), shapeWidth, quantText(t.quant()), quantWidth,
                       a.hasBlob() ? std::to_string(t.offset()) : "-", t.size(),
                       a.hasBlob() ? fmt::format("{:016x}", t.xxh64()).substr(0, 8) : "-", rank);
  });
}

void printKernels(const schema::Manifest& m, std::ostream& out) {
  out << fmt::format("kernels: {}\n", count(m.kernels()));
  if (!m.kernels()) return;
  for (const schema::KernelDef* k : *m.kernels()) {
    std::string targets;
    if (k->binaries())
      for (const schema::KernelBinaryDef* b : *k->binaries())
        targets += fmt::format("{}{} ({}, {})", targets.empty() ? "" : ", ",
                               printable(b->target(), 16),
                               b->format() == schema::BinaryFormat::Ptx      ? "ptx"
                               : b->format() == schema::BinaryFormat::Source ? "source"
                                                                             : "cubin",
                               bytesText(count(b->data())));
    const std::string params =
        count(k->param_bytes()) ? ", params " + listText(k->param_bytes()) + " B" : "";
    std::string grid;
    if (k->grid())
      for (const schema::GridAxisDef* axis : *k->grid())
        grid += (grid.empty() ? ", grid [" : ", ") + describeGridAxis(*axis);
    if (!grid.empty()) grid += "]";
    out << fmt::format("  {}: block {}{}, shared {} B{}, targets: {}\n", printable(k->name()),
                       listText(k->block_dim()), grid, k->shared_mem_bytes(), params,
                       targets.empty() ? "none" : targets);
  }
}

/// One line that changes with any kernel binary's bytes: the count and an xxh64 over every
/// kernel's name and each binary's target, format and bytes, in manifest order.
void printKernelDigest(const schema::Manifest& m, std::ostream& out) {
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  size_t binaries = 0;
  auto add = [&](const void* data, size_t size) { XXH64_update(state, data, size); };
  if (m.kernels())
    for (const schema::KernelDef* k : *m.kernels()) {
      if (k->name()) add(k->name()->data(), k->name()->size() + 1);
      if (!k->binaries()) continue;
      for (const schema::KernelBinaryDef* b : *k->binaries()) {
        if (b->target()) add(b->target()->data(), b->target()->size() + 1);
        const auto format = static_cast<uint8_t>(b->format());
        add(&format, 1);
        const uint64_t size = count(b->data());
        add(&size, sizeof(size));
        if (b->data()) add(b->data()->data(), b->data()->size());
        ++binaries;
      }
    }
  out << fmt::format("kernel binaries: {}, xxh64 {:016x}\n", binaries, XXH64_digest(state));
  XXH64_freeState(state);
}

std::string paramText(schema::OpKind op, const schema::ParamDef* p) {
  // gated_linear's activation by name (0 silu, 1 gelu; another value as it is).
  if (op == schema::OpKind::GatedLinear && p->name() && p->name()->str() == "activation" &&
      (p->i() == 0 || p->i() == 1))
    return p->i() == 0 ? "activation=silu" : "activation=gelu";
  if (p->f() != 0.0) return fmt::format("{}={:g}", printable(p->name(), 32), p->f());
  return fmt::format("{}={}", printable(p->name(), 32), p->i());
}

/// "0-4,6-10,12" for ascending layers.
std::string layerRanges(const std::vector<int64_t>& layers) {
  std::string text;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    text += (text.empty() ? "" : ",") + std::to_string(layers[i]) +
            (j > i ? "-" + std::to_string(layers[j]) : "");
    i = j + 1;
  }
  return text;
}

/// Which layers attend how (variant and softmax scale) and rotate with which RoPE base:
/// one line per distinct kind, e.g. Gemma 3's sliding-window and global layers.
void printLayerKinds(const schema::Manifest& m, const schema::ProgramDef& prog, std::ostream& out) {
  if (!prog.steps()) return;
  std::map<std::string, std::vector<int64_t>> attention, rope;
  for (const schema::ProgramStepDef* step : *prog.steps()) {
    const schema::ParamDef* layer = findStepParam(*step, "layer");
    if (!layer) continue;
    if (step->op() == schema::OpKind::Attention) {
      std::string kind = step->attention_variant() >= 0
                             ? printable(m.attention_variants()->Get(step->attention_variant())->name(), 40)
                             : "plain";
      if (const schema::ParamDef* scale = findStepParam(*step, "scale"))
        kind += fmt::format(", scale {:g}", scale->f());
      attention[kind].push_back(layer->i());
    } else if (step->op() == schema::OpKind::RopeKvWrite) {
      if (const schema::ParamDef* theta = findStepParam(*step, "theta"))
        rope[fmt::format("theta {:g}", theta->f())].push_back(layer->i());
    }
  }
  for (const auto& [kind, layers] : attention)
    out << fmt::format("    attention {}: layers {}\n", kind, layerRanges(layers));
  if (rope.size() > 1)
    for (const auto& [kind, layers] : rope)
      out << fmt::format("    rope {}: layers {}\n", kind, layerRanges(layers));
}

void printPrograms(const schema::Manifest& m, const InspectOptions& options, std::ostream& out) {
  out << fmt::format("programs: {}\n", count(m.programs()));
  if (!m.programs()) return;
  for (size_t p = 0; p < m.programs()->size(); ++p) {
    const schema::ProgramDef* prog = m.programs()->Get(p);
    // A sharded artifact has one program per rank and role: say which rank runs this one
    // (its name is only a convention); -1 means every rank of an unsharded artifact.
    std::string rank = prog->tp_rank() >= 0 ? fmt::format(", tp_rank {}", prog->tp_rank()) : "";
    out << fmt::format("  program {} \"{}\" (role {}{}): {} buffers, {} steps", p,
                       printable(prog->name()),
                       snakeName(schema::EnumNameProgramRole(prog->role()), "role",
                                 static_cast<int>(prog->role())),
                       rank, count(prog->buffers()), count(prog->steps()));
    if (count(prog->layers())) out << ", layers " << listText(prog->layers());
    out << "\n";
    printLayerKinds(m, *prog, out);
    auto bufferName = [&](int32_t i) {
      return fmt::format("%{} {}", i, printable(prog->buffers()->Get(i)->name(), 24));
    };
    if (prog->buffers())
      printRows(out, prog->buffers()->size(), options, "buffers", [&](size_t b) {
        const schema::BufferDef* buf = prog->buffers()->Get(b);
        out << fmt::format("    buffer {}: {} {} {}{}\n", bufferName(static_cast<int32_t>(b)),
                           snakeName(schema::EnumNameBufferKind(buf->kind()), "kind",
                                     static_cast<int>(buf->kind())),
                           dtypeText(buf->dtype()), shapeText(buf->shape()),
                           buf->slot() >= 0 ? fmt::format(" slot {}", buf->slot()) : "");
      });
    if (!prog->steps()) continue;
    printRows(out, prog->steps()->size(), options, "steps", [&](size_t s) {
      const schema::ProgramStepDef* step = prog->steps()->Get(s);
      auto buffers = [&](const Vector<int32_t>* v) {
        std::string text;
        if (v)
          for (int32_t b : *v) text += (text.empty() ? "" : ", ") + bufferName(b);
        return "[" + text + "]";
      };
      std::string line = fmt::format(
          "    step {}: {} {} -> {}", s,
          snakeName(schema::EnumNameOpKind(step->op()), "op", static_cast<int>(step->op())),
          buffers(step->inputs()), buffers(step->outputs()));
      if (step->weights() && step->weights()->size())
        line += " weights " + listText(step->weights(), "#", 8);
      if (step->kernel() >= 0)
        line += " kernel " + printable(m.kernels()->Get(step->kernel())->name(), 40);
      if (step->attention_variant() >= 0)
        line += " variant " +
                printable(m.attention_variants()->Get(step->attention_variant())->name(), 40);
      if (step->params())
        for (const schema::ParamDef* param : *step->params())
          line += " " + paramText(step->op(), param);
      out << line << "\n";
    });
  }
}

void printVariants(const schema::Manifest& m, std::ostream& out) {
  out << fmt::format("attention variants: {}\n", count(m.attention_variants()));
  if (!m.attention_variants()) return;
  for (size_t v = 0; v < m.attention_variants()->size(); ++v) {
    const schema::AttentionVariantDef* var = m.attention_variants()->Get(v);
    auto code = [](const Vector<uint8_t>* b, const char* none) {
      return b && b->size() ? fmt::format("{} B", b->size()) : std::string(none);
    };
    out << fmt::format("  {} {}: mask {}, score {}, device function {}\n", v,
                       printable(var->name()), code(var->mask_bytecode(), "none (all visible)"),
                       code(var->score_bytecode(), "none (identity)"),
                       count(var->device_function()) ? printable(var->device_function()) : "-");
    // The reader has decoded every variant already; print what the CPU backend runs.
    for (const Vector<uint8_t>* bytes : {var->mask_bytecode(), var->score_bytecode()}) {
      if (!bytes || bytes->size() == 0) continue;
      StatusOr<RegionProgram> program = decodeRegionBytecode(bytes->data(), bytes->size());
      if (!program.ok()) continue;
      std::istringstream lines(disassembleRegion(*program));
      for (std::string line; std::getline(lines, line);) out << "      " << line << "\n";
    }
  }
}

void printTail(const schema::Manifest& m, std::ostream& out) {
  if (const schema::TensorParallelDef* tp = m.tensor_parallel()) {
    out << fmt::format("tensor parallel: world size {}", tp->world_size());
    if (tp->shards())
      for (const schema::ShardDef* s : *tp->shards())
        out << fmt::format("; rank {} blob [{}, +{})", s->rank(), s->blob_offset(),
                           bytesText(s->blob_size()));
    out << "\n";
  }
  if (const schema::ProvenanceDef* p = m.provenance()) {
    out << "provenance:\n";
    out << fmt::format("  compiler: {}\n", printable(p->compiler_version()));
    std::string options;
    if (p->options())
      for (const String* o : *p->options()) options += (options.empty() ? "" : " ") + printable(o);
    out << fmt::format("  options: {}\n", options.empty() ? "-" : options);
    out << fmt::format("  source: {} (xxh64 {:016x})\n", printable(p->source(), 200),
                       p->source_xxh64());
    out << fmt::format("  created: {}\n", printable(p->created()));
    if (p->assumed() && p->assumed()->size() > 0) {
      out << "  assumed (the checkpoint lacks them):\n";
      for (const String* a : *p->assumed()) out << fmt::format("    {}\n", printable(a, 200));
    }
  }
}

}  // namespace

void printArtifact(const Artifact& a, const InspectOptions& options, std::ostream& out) {
  const artifact::Header& h = a.header();
  const schema::Manifest& m = a.manifest();
  out << fmt::format("artifact: {} ({})\n", a.source(), bytesText(a.fileSize()));
  out << fmt::format("format: {}.{}, manifest {} at offset {}, ", h.format_major,
                     h.format_minor, bytesText(h.manifest_size), h.manifest_offset);
  if (a.hasBlob())
    out << fmt::format("blob {} at offset {}\n", bytesText(h.blob_size), h.blob_offset);
  else
    out << fmt::format("no blob (dummy weights, seed {})\n", m.dummy_seed());
  if (m.config()) printConfig(*m.config(), out);
  else out << "model: (no config)\n";
  if (m.tokenizer()) printTokenizer(*m.tokenizer(), out);
  else out << "tokenizer: (none)\n";
  printTensors(a, options, out);
  printKernels(m, out);
  printPrograms(m, options, out);
  printVariants(m, out);
  printTail(m, out);
}

int runInspect(const std::string& path, bool verify, std::ostream& out, std::ostream& err) {
  InspectOptions options;
  options.verify = verify;
  return runInspect(path, options, out, err);
}

int runInspect(const std::string& path, const InspectOptions& options, std::ostream& out,
               std::ostream& err) {
  StatusOr<Artifact> artifact = Artifact::open(path);
  if (!artifact.ok()) {
    err << "ingot inspect: error: " << artifact.status().message() << "\n";
    return 1;
  }
  printArtifact(*artifact, options, out);
  if (!options.verify) return 0;
  printKernelDigest(artifact->manifest(), out);
  if (!artifact->hasBlob()) {
    out << "checksums: dummy weights, no blob to verify\n";
    return 0;
  }
  Status status = artifact->verifyChecksums();
  if (!status.ok()) {
    out << "checksums: FAILED\n";
    err << "ingot inspect: error: " << status.message() << "\n";
    return 1;
  }
  out << fmt::format("checksums: {} tensors OK\n", artifact->numTensors());
  return 0;
}

}  // namespace ingot
