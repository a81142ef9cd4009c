// Launch grids as data: the rule a kernel's grid follows from the counts of a launch
// (KernelDef.grid, format 1.5), the rules of Ingot's kernel families, and their evaluation.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/base/status.h"
#include "schemas/artifact_generated.h"

namespace ingot {

/// A kernel's grid: x, y, z, each ceil(count * times * multiplier / divisor) CTAs under caps
/// (schema::GridAxisDef). The compiler writes it into the artifact beside the block shape;
/// the CUDA backend evaluates it with the counts a launch has (IREE's workgroup-count
/// function, as data rather than code).
using GridRule = std::array<schema::GridAxisDef, 3>;

/// The counts a launch knows, by schema::GridCount; -1 where the launcher has none.
class GridCounts {
 public:
  GridCounts() { values_.fill(-1); }
  GridCounts& set(schema::GridCount c, int64_t v) {
    values_[static_cast<size_t>(c)] = v;
    return *this;
  }
  int64_t get(schema::GridCount c) const { return values_[static_cast<size_t>(c)]; }

 private:
  std::array<int64_t, static_cast<size_t>(schema::GridCount::MAX) + 1> values_;
};

/// One axis: `count` (times the count `times`, unless One) times `multiplier` over
/// `divisor` CTAs (rounded up), capped at `max_ctas` and at `max_ctas_per_sm` per SM (0: no
/// cap).
inline schema::GridAxisDef gridAxis(schema::GridCount count, uint32_t divisor = 1,
                                    uint32_t max_ctas = 0, uint32_t max_ctas_per_sm = 0,
                                    uint32_t multiplier = 1,
                                    schema::GridCount times = schema::GridCount::One) {
  return schema::GridAxisDef(count, times, multiplier, divisor, max_ctas, max_ctas_per_sm);
}

/// The grid rule of an Ingot kernel, by its name (the family prefix: ingot_fused_add_f32,
/// ingot_quant_gemm_int4_zero, ingot_decode_variant0_f32_d64_g3, ...) and its threads per
/// CTA. The compiler writes it into the artifact; the runtime uses it for a kernel whose
/// artifact has none (format 1.4 and older). Empty for a name of no known family.
std::optional<GridRule> kernelGridRule(std::string_view name, uint32_t threads);

/// Why `rule` cannot be evaluated (a count this build does not know, a zero divisor or
/// multiplier), or "" when it can.
std::string gridRuleProblem(const GridRule& rule);

/// CTAs of a launch along x, y and z.
struct GridDims {
  unsigned x = 1, y = 1, z = 1;
};

/// The grid of one launch: each axis from `counts` under its caps (`sms`: the GPU's SMs).
/// An axis whose count is 0 is 0 (the launch has no work). Fails, naming the count, when
/// the rule reads a count the launcher did not set.
StatusOr<GridDims> evaluateGrid(const GridRule& rule, const GridCounts& counts, int sms);

/// "tokens / 64", "kv_heads", "elements / 256 (<= 32 per SM)": one axis for messages and
/// `ingot inspect`.
std::string describeGridAxis(const schema::GridAxisDef& axis);

}  // namespace ingot
