// Tests for the chi-square helpers: known quantiles, closed forms, Wilson–Hilferty agreement,
// and cell merging.
#include "runtime/spec/chi_square.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ingot {
namespace {

TEST(ChiSquareTest, PValuesAtTabulatedQuantiles) {
  // Upper 5% / 0.1% points of chi-square tables.
  EXPECT_NEAR(chiSquarePValue(3.841459, 1), 0.05, 1e-6);
  EXPECT_NEAR(chiSquarePValue(18.307038, 10), 0.05, 1e-6);
  EXPECT_NEAR(chiSquarePValue(29.588298, 10), 0.001, 1e-8);
  EXPECT_NEAR(chiSquarePValue(124.342113, 100), 0.05, 1e-6);
  EXPECT_NEAR(chiSquarePValue(10.827566, 1), 0.001, 1e-8);
  EXPECT_DOUBLE_EQ(chiSquarePValue(0, 5), 1.0);
}

TEST(ChiSquareTest, IncompleteGammaMatchesClosedForms) {
  // Q(1, x) = e^-x; chi-square with 2 dof: p = e^(-x/2); Q(1/2, x) = erfc(sqrt(x)).
  for (double x : {0.01, 0.5, 1.0, 2.0, 7.5, 30.0, 200.0}) {
    EXPECT_NEAR(regularizedGammaQ(1.0, x), std::exp(-x), 1e-13 + 1e-12 * std::exp(-x)) << x;
    EXPECT_NEAR(chiSquarePValue(x, 2), std::exp(-x / 2), 1e-13) << x;
    EXPECT_NEAR(regularizedGammaQ(0.5, x), std::erfc(std::sqrt(x)), 1e-12) << x;
  }
  // Q(3, x) = e^-x (1 + x + x^2 / 2).
  for (double x : {0.3, 3.0, 4.0, 25.0})
    EXPECT_NEAR(regularizedGammaQ(3.0, x), std::exp(-x) * (1 + x + x * x / 2), 1e-12) << x;
}

TEST(ChiSquareTest, WilsonHilfertyAgreesForLargeDof) {
  for (int64_t dof : {20, 60, 150}) {
    for (double z : {-1.0, 0.0, 1.0, 2.5}) {
      double x = dof + z * std::sqrt(2.0 * dof);
      double exact = chiSquarePValue(x, dof);
      EXPECT_NEAR(chiSquarePValueWilsonHilferty(x, dof), exact, 0.01 * exact + 1e-4) << dof << " " << z;
    }
  }
}

TEST(ChiSquareTest, HomogeneityOfIdenticalHistogramsIsZero) {
  ChiSquareResult r = chiSquareHomogeneity({100, 200, 300, 400}, {100, 200, 300, 400});
  EXPECT_DOUBLE_EQ(r.statistic, 0);
  EXPECT_EQ(r.dof, 3);
  EXPECT_DOUBLE_EQ(r.p_value, 1);
}

TEST(ChiSquareTest, HomogeneityMatchesTheContingencyFormula) {
  // 2 x 2 table [[30, 70], [50, 50]]: expected 40/60 per row, X2 = 2 * (100/40 + 100/60).
  ChiSquareResult r = chiSquareHomogeneity({30, 70}, {50, 50});
  EXPECT_NEAR(r.statistic, 2 * (100.0 / 40 + 100.0 / 60), 1e-12);
  EXPECT_EQ(r.dof, 1);
}

TEST(ChiSquareTest, SmallCellsAreMergedUntilExpectedReachesFive) {
  // Six cells with 1..2 counts each are pooled; the two big cells stay alone.
  ChiSquareResult r = chiSquareHomogeneity({500, 400, 1, 2, 1, 0, 2, 1},
                                           {480, 410, 2, 1, 1, 2, 0, 1});
  EXPECT_EQ(r.cells, 3);
  EXPECT_EQ(r.dof, 2);
  ChiSquareResult fit = chiSquareGoodnessOfFit({50, 30, 15, 3, 2}, {0.5, 0.3, 0.15, 0.03, 0.02});
  EXPECT_EQ(fit.cells, 4);  // 3 + 2 observed against 3 + 2 expected: one pooled cell
  EXPECT_NEAR(fit.statistic, 0, 1e-12);
}

}  // namespace
}  // namespace ingot
