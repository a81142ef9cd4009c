// Pearson chi-square tests and the chi-square distribution's tail, for the statistical
// tests of the speculative samplers (test support; not linked into the runtime).
#include "runtime/spec/chi_square.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

namespace ingot {
namespace {

constexpr int kMaxIterations = 1000;
constexpr double kEpsilon = 1e-15;
constexpr double kTiny = 1e-300;

/// Groups cell indices into bins whose `expected(bin)` reaches kMinExpectedCount, merging
/// the smallest cells first; cells already large enough stay alone.
template <typename ExpectedOf>
std::vector<std::vector<size_t>> mergeCells(size_t n, ExpectedOf expected_of_bin) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return expected_of_bin(std::vector<size_t>{x}) < expected_of_bin(std::vector<size_t>{y});
  });
  std::vector<std::vector<size_t>> bins;
  std::vector<size_t> open;
  for (size_t c : order) {
    open.push_back(c);
    if (expected_of_bin(open) >= kMinExpectedCount) {
      bins.push_back(std::move(open));
      open.clear();
    }
  }
  if (!open.empty()) {
    if (bins.empty()) bins.push_back(open);
    else bins.back().insert(bins.back().end(), open.begin(), open.end());
  }
  return bins;
}

}  // namespace

double regularizedGammaQ(double a, double x) {
  assert(a > 0 && x >= 0);
  if (x == 0) return 1.0;
  const double log_prefix = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1) {
    // P(a, x) = e^-x x^a / Γ(a) * Σ x^n / (a (a+1) ... (a+n)).
    double term = 1.0 / a, total = term, ap = a;
    for (int i = 0; i < kMaxIterations; ++i) {
      ap += 1;
      term *= x / ap;
      total += term;
      if (std::fabs(term) < std::fabs(total) * kEpsilon) break;
    }
    return 1.0 - total * std::exp(log_prefix);
  }
  // Q(a, x) = e^-x x^a / Γ(a) * 1 / (x + 1 - a - 1(1-a) / (x + 3 - a - ...)), modified Lentz.
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < kMaxIterations; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < kEpsilon) break;
  }
  return std::exp(log_prefix) * h;
}

double chiSquarePValue(double statistic, int64_t dof) {
  assert(dof > 0);
  return regularizedGammaQ(0.5 * static_cast<double>(dof), 0.5 * std::max(statistic, 0.0));
}

double chiSquarePValueWilsonHilferty(double statistic, int64_t dof) {
  const double k = static_cast<double>(dof);
  const double z = (std::cbrt(statistic / k) - (1 - 2 / (9 * k))) / std::sqrt(2 / (9 * k));
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

ChiSquareResult chiSquareHomogeneity(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  assert(a.size() == b.size());
  const double total_a = std::accumulate(a.begin(), a.end(), 0.0);
  const double total_b = std::accumulate(b.begin(), b.end(), 0.0);
  const double total = total_a + total_b;
  auto column = [&](const std::vector<size_t>& bin) {
    double s = 0;
    for (size_t c : bin) s += static_cast<double>(a[c] + b[c]);
    return s;
  };
  // The smaller row's expected count decides whether a bin is big enough.
  const double smaller_row = std::min(total_a, total_b);
  auto bins = mergeCells(a.size(), [&](const std::vector<size_t>& bin) {
    return column(bin) * smaller_row / total;
  });
  ChiSquareResult result;
  for (const auto& bin : bins) {
    const double col = column(bin);
    if (col == 0) continue;
    double obs_a = 0, obs_b = 0;
    for (size_t c : bin) {
      obs_a += static_cast<double>(a[c]);
      obs_b += static_cast<double>(b[c]);
    }
    const double exp_a = col * total_a / total, exp_b = col * total_b / total;
    result.statistic += (obs_a - exp_a) * (obs_a - exp_a) / exp_a;
    result.statistic += (obs_b - exp_b) * (obs_b - exp_b) / exp_b;
    ++result.cells;
  }
  result.dof = std::max<int64_t>(result.cells - 1, 1);
  result.p_value = chiSquarePValue(result.statistic, result.dof);
  return result;
}

ChiSquareResult chiSquareGoodnessOfFit(const std::vector<int64_t>& observed,
                                       const std::vector<double>& probs) {
  assert(observed.size() == probs.size());
  const double n = std::accumulate(observed.begin(), observed.end(), 0.0);
  const double mass = std::accumulate(probs.begin(), probs.end(), 0.0);
  auto expected = [&](const std::vector<size_t>& bin) {
    double s = 0;
    for (size_t c : bin) s += probs[c];
    return s / mass * n;
  };
  ChiSquareResult result;
  for (const auto& bin : mergeCells(observed.size(), expected)) {
    const double e = expected(bin);
    double o = 0;
    for (size_t c : bin) o += static_cast<double>(observed[c]);
    if (e == 0) {
      // Observations in a cell of probability zero: the fit is impossible.
      if (o > 0) result.statistic = INFINITY;
      continue;
    }
    result.statistic += (o - e) * (o - e) / e;
    ++result.cells;
  }
  result.dof = std::max<int64_t>(result.cells - 1, 1);
  result.p_value = std::isinf(result.statistic) ? 0.0 : chiSquarePValue(result.statistic, result.dof);
  return result;
}

}  // namespace ingot
