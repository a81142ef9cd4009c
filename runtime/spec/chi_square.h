// Pearson chi-square tests and the chi-square distribution's tail, for the statistical
// tests of the speculative samplers (test support; not linked into the runtime).
#pragma once

#include <cstdint>
#include <vector>

namespace ingot {

/// Cells with a smaller expected count are merged (Cochran's rule of thumb for Pearson's
/// chi-square approximation).
constexpr double kMinExpectedCount = 5.0;

/// Regularized upper incomplete gamma Q(a, x) = Γ(a, x) / Γ(a), a > 0, x >= 0: series for
/// x < a + 1, Lentz's continued fraction otherwise (Numerical Recipes §6.2).
double regularizedGammaQ(double a, double x);

/// P(X >= statistic) for X ~ χ²(dof) = Q(dof / 2, statistic / 2).
double chiSquarePValue(double statistic, int64_t dof);

/// Wilson–Hilferty's normal approximation of the same tail (a cross-check; good for dof ≳ 10).
double chiSquarePValueWilsonHilferty(double statistic, int64_t dof);

struct ChiSquareResult {
  double statistic = 0;
  int64_t dof = 0;
  double p_value = 1;
  int64_t cells = 0;  ///< cells after merging
};

/// Homogeneity of two histograms over the same cells (a 2 x K contingency table): are `a`
/// and `b` draws from one distribution? Cells whose smaller expected count is under
/// kMinExpectedCount are merged, smallest first, into pooled cells. dof = cells - 1.
ChiSquareResult chiSquareHomogeneity(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

/// Goodness of fit of `observed` to cell probabilities `probs`, cells with expected count
/// under kMinExpectedCount merged likewise. dof = cells - 1.
ChiSquareResult chiSquareGoodnessOfFit(const std::vector<int64_t>& observed,
                                       const std::vector<double>& probs);

}  // namespace ingot
