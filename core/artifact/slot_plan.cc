// planSlots / checkSlots: activation lifetimes to storage slots, and the check of a plan
// read from an artifact.
#include "core/artifact/slot_plan.h"

#include <algorithm>
#include <string>

namespace ingot {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

bool inRange(int32_t b, size_t n) { return b >= 0 && static_cast<size_t>(b) < n; }

/// The last step that reads each buffer (-1: none).
std::vector<int32_t> lastReaders(size_t numBuffers, const std::vector<SlotStep>& steps) {
  std::vector<int32_t> last(numBuffers, -1);
  for (size_t s = 0; s < steps.size(); ++s)
    for (int32_t in : steps[s].inputs)
      if (inRange(in, numBuffers)) last[in] = static_cast<int32_t>(s);
  return last;
}

/// The input whose storage output `o` of step `s` may take (see planSlots), or -1.
int32_t inPlaceCandidate(const std::vector<SlotBuffer>& buffers, const SlotStep& step,
                         size_t o) {
  const InPlacePairs pairs = inPlacePairs(step.op);
  if (o >= pairs.size() || pairs[o] < 0 || static_cast<size_t>(pairs[o]) >= step.inputs.size())
    return -1;
  const int32_t in = step.inputs[pairs[o]];
  const int32_t out = step.outputs[o];
  if (!inRange(in, buffers.size()) || !buffers[in].activation ||
      buffers[in].width != buffers[out].width)
    return -1;
  if (std::count(step.inputs.begin(), step.inputs.end(), in) > 1) return -1;  // x + x
  return in;
}

}  // namespace

InPlacePairs inPlacePairs(schema::OpKind kind) {
  switch (kind) {
    case schema::OpKind::AddRmsNorm:  // the sum may overwrite the residual (input 1)
      return {1, -1, -1};
    case schema::OpKind::Scale:  // the product over its input
      return {0, -1, -1};
    case schema::OpKind::RopeKvWrite:  // the rotated queries and keys over the queries and keys
      return {0, 1, -1};
    default:
      return {-1, -1, -1};
  }
}

SlotPlan planSlots(const std::vector<SlotBuffer>& buffers, const std::vector<SlotStep>& steps) {
  SlotPlan plan;
  plan.slot.assign(buffers.size(), -1);
  const std::vector<int32_t> last = lastReaders(buffers.size(), steps);
  std::vector<int32_t> freeSlots;  // a stack: the slot freed last is reused first
  std::vector<int32_t> holder;     // slot -> the buffer in it now
  for (size_t s = 0; s < steps.size(); ++s) {
    const SlotStep& step = steps[s];
    const int32_t at = static_cast<int32_t>(s);
    for (size_t o = 0; o < step.outputs.size(); ++o) {
      const int32_t out = step.outputs[o];
      if (!inRange(out, buffers.size()) || !buffers[out].activation) continue;
      const int32_t in = inPlaceCandidate(buffers, step, o);
      if (in >= 0 && plan.slot[in] >= 0 && last[in] <= at) {
        plan.slot[out] = plan.slot[in];
      } else if (!freeSlots.empty()) {
        plan.slot[out] = freeSlots.back();
        freeSlots.pop_back();
      } else {
        plan.slot[out] = plan.num_slots++;
        holder.push_back(-1);
      }
      holder[plan.slot[out]] = out;
    }
    std::vector<int32_t> touched(step.inputs);
    touched.insert(touched.end(), step.outputs.begin(), step.outputs.end());
    for (int32_t b : touched) {
      if (!inRange(b, buffers.size()) || plan.slot[b] < 0) continue;
      const int32_t slot = plan.slot[b];
      const bool dead = last[b] <= at;
      const bool alreadyFree = std::find(freeSlots.begin(), freeSlots.end(), slot) != freeSlots.end();
      if (dead && !alreadyFree && holder[slot] == b) freeSlots.push_back(slot);
    }
  }
  return plan;
}

Status checkSlots(const std::vector<SlotBuffer>& buffers, const std::vector<SlotStep>& steps,
                  const std::vector<int32_t>& slot) {
  const size_t n = buffers.size();
  if (slot.size() != n)
    return invalidArgument("activation slots: " + str(slot.size()) + " for " + str(n) +
                           " buffers");
  std::vector<bool> written(n, false);  // an activation no step writes needs no slot
  for (const SlotStep& step : steps)
    for (int32_t out : step.outputs)
      if (inRange(out, n)) written[out] = true;
  for (size_t b = 0; b < n; ++b) {
    const std::string where = "buffer %" + str(b) + ": ";
    if (buffers[b].activation && !written[b] && slot[b] == -1) continue;
    if (buffers[b].activation && !inRange(slot[b], n))
      return invalidArgument(where + "activation slot " + str(slot[b]) + " outside [0, " +
                             str(n) + ")");
    if (!buffers[b].activation && slot[b] != -1)
      return invalidArgument(where + "only activations live in slots (slot " + str(slot[b]) +
                             ")");
  }
  std::vector<bool> used(n, false);
  int32_t numSlots = 0;
  for (size_t b = 0; b < n; ++b)
    if (buffers[b].activation && slot[b] >= 0) {
      used[slot[b]] = true;
      numSlots = std::max(numSlots, slot[b] + 1);
    }
  for (int32_t k = 0; k < numSlots; ++k)
    if (!used[k])
      return invalidArgument("activation slot " + str(k) + " holds no buffer (slots are " +
                             "numbered 0 .. " + str(numSlots - 1) + " without gaps)");
  const std::vector<int32_t> last = lastReaders(n, steps);
  std::vector<int32_t> born(n, -1);
  std::vector<int32_t> holder(n, -1);  // slot -> the buffer in it now
  for (size_t s = 0; s < steps.size(); ++s) {
    const SlotStep& step = steps[s];
    const int32_t at = static_cast<int32_t>(s);
    for (size_t o = 0; o < step.outputs.size(); ++o) {
      const int32_t out = step.outputs[o];
      if (!inRange(out, n) || !buffers[out].activation) continue;
      const int32_t h = holder[slot[out]];
      if (h >= 0 && std::max(last[h], born[h]) >= at) {
        const bool overInput = born[h] < at && last[h] == at && inPlaceCandidate(buffers, step, o) == h;
        if (!overInput)
          return invalidArgument("step " + str(at) + " (" + schema::EnumNameOpKind(step.op) +
                                 ") writes buffer %" + str(out) + " into slot " +
                                 str(slot[out]) + ", which holds buffer %" + str(h) +
                                 (last[h] > at ? " that step " + str(last[h]) + " still reads"
                                               : " that this step reads or writes"));
      }
      holder[slot[out]] = out;
      born[out] = at;
    }
  }
  return okStatus();
}

}  // namespace ingot
