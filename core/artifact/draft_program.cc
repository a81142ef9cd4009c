// earlyExitDraftProgram: slices a main program after its first N decoder layers.
#include "core/artifact/draft_program.h"

#include <map>
#include <string>

namespace ingot {
namespace {

bool isNorm(schema::OpKind op) {
  return op == schema::OpKind::RmsNorm || op == schema::OpKind::LayerNorm ||
         op == schema::OpKind::AddRmsNorm;
}

int64_t paramOf(const ProgramStep& step, const char* name, int64_t fallback) {
  for (const Param& p : step.params)
    if (p.name == name) return p.i;
  return fallback;
}

}  // namespace

StatusOr<Program> earlyExitDraftProgram(const Program& main, int32_t layers) {
  // Which step produces each buffer, and where each layer writes its KV.
  std::map<int32_t, size_t> producer;
  std::map<int64_t, size_t> kvWriteOf;
  for (size_t i = 0; i < main.steps.size(); ++i) {
    const ProgramStep& s = main.steps[i];
    const bool writesKv = s.op == schema::OpKind::KvWrite || s.op == schema::OpKind::RopeKvWrite;
    if (writesKv) kvWriteOf[paramOf(s, "layer", -1)] = i;
    for (int32_t out : s.outputs)
      if (!writesKv || out != s.outputs.back()) producer[out] = i;  // not the pool
  }
  const int64_t total = static_cast<int64_t>(kvWriteOf.size());
  if (layers < 1 || layers >= total)
    return invalidArgument("--draft-layers must be in [1, " + std::to_string(total - 1) +
                           "] for a model of " + std::to_string(total) + " layers, got " +
                           std::to_string(layers));
  if (!kvWriteOf.count(layers))
    return invalidArgument("draft program: no kv_write of layer " + std::to_string(layers));
  // Walk back from layer N's kv_write (its K input) to the rms_norm that starts the layer.
  int32_t buffer = main.steps[kvWriteOf[layers]].inputs.size() > 1
                       ? main.steps[kvWriteOf[layers]].inputs[1]
                       : -1;
  size_t cut = main.steps.size();
  for (int guard = 0; guard < 64 && producer.count(buffer); ++guard) {
    const ProgramStep& s = main.steps[producer[buffer]];
    if (isNorm(s.op)) {
      cut = producer[buffer];
      break;
    }
    if (s.inputs.empty()) break;
    buffer = s.inputs[0];
  }
  if (cut == main.steps.size())
    return invalidArgument("draft program: layer " + std::to_string(layers) +
                           " does not start with a norm feeding its K projection");
  const ProgramStep& start = main.steps[cut];
  // The head: logits, fed by the final norm.
  size_t logits = main.steps.size();
  for (size_t i = 0; i < main.steps.size(); ++i)
    if (main.steps[i].op == schema::OpKind::Logits) logits = i;
  if (logits == main.steps.size() || main.steps[logits].inputs.empty() ||
      !producer.count(main.steps[logits].inputs[0]))
    return invalidArgument("draft program: the main program has no logits step fed by a norm");
  const int32_t normed = main.steps[logits].inputs[0];
  const ProgramStep& finalNorm = main.steps[producer[normed]];
  if (!isNorm(finalNorm.op))
    return invalidArgument("draft program: the logits step is not fed by a norm");

  // The final norm over the residual stream entering layer `layers`. Where that layer
  // starts with add_rms_norm, the stream is its sum: the draft runs that add with the
  // final norm's weight and writes the rows the logits step reads.
  ProgramStep norm;
  if (start.op == schema::OpKind::AddRmsNorm) {
    if (finalNorm.op == schema::OpKind::LayerNorm)
      return invalidArgument("draft program: layer " + std::to_string(layers) +
                             " starts with add_rms_norm but the final norm is a layer_norm");
    norm = start;
    norm.outputs.at(1) = normed;
  } else if (finalNorm.op == schema::OpKind::AddRmsNorm) {
    norm.op = schema::OpKind::RmsNorm;
    norm.inputs = {start.inputs.at(0)};
    norm.outputs = {normed};
  } else {
    norm = finalNorm;
    norm.inputs.at(0) = start.inputs.at(0);
  }
  norm.weights = finalNorm.weights;
  norm.params = finalNorm.params;

  Program draft;
  draft.name = "draft" + std::to_string(layers);
  draft.role = schema::ProgramRole::Draft;
  draft.buffers = main.buffers;
  for (Buffer& b : draft.buffers) {
    if (b.kind == schema::BufferKind::KvCache && b.shape.size() == 6) b.shape[1] = layers;
    b.slot = -1;  // the main program's slots do not fit a cut program: the writer plans its own
  }
  draft.steps.assign(main.steps.begin(), main.steps.begin() + static_cast<int64_t>(cut));
  draft.steps.push_back(norm);
  draft.steps.push_back(main.steps[logits]);
  for (int32_t l = 0; l < layers; ++l) draft.layers.push_back(l);
  return draft;
}

}  // namespace ingot
