//===- ActivationAwareScales.h - AWQ-style input-channel scales for 4-bit weights -*- C++ -*-===//
//
// Activation-aware weight quantization (Lin et al., "AWQ", 2023), the search half: a few
// input channels of a linear layer carry much larger activations than the rest, and the
// weights that multiply them matter most. Scaling those weight columns up by s (and the
// activations down by 1/s, folded into the op that produces them) lets the quantizer spend
// its resolution where the output error comes from. The scales are s = m^alpha over the
// channels' mean |x| (m), alpha from a small grid, chosen by the output error measured on
// a sample of real activations. Plain C++ (no MLIR); the compile driver records the
// statistics (compiler/driver/Calibration) and folds the scales.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/quant/WeightEncoders.h"
#include "core/base/status.h"

namespace ingot::quant {

/// Statistics of one linear layer's input channels over calibration tokens: per-channel
/// sums of |x| and x^2, and a uniform sample of whole rows (reservoir sampling, seeded, so
/// the same tokens give the same sample).
class ChannelStats {
public:
  /// `channels` inputs per row; at most `sampleRows` rows are kept.
  ChannelStats(int64_t channels, int64_t sampleRows, uint64_t seed);

  /// Adds `rows` rows of `channels` values (row-major). Fails on a width mismatch.
  Status add(const float *x, int64_t rows, int64_t cols);

  int64_t channels() const { return channels_; }
  /// Rows seen so far.
  int64_t tokens() const { return tokens_; }
  /// Mean |x| and mean x^2 per channel (zeros before any row).
  std::vector<float> meanAbs() const;
  std::vector<float> meanSquare() const;
  /// The sampled rows, [sampledRows(), channels] row-major.
  const std::vector<float> &sample() const { return sample_; }
  int64_t sampledRows() const {
    return channels_ ? static_cast<int64_t>(sample_.size()) / channels_ : 0;
  }

private:
  int64_t channels_, maxRows_, tokens_ = 0;
  uint64_t rng_;
  std::vector<double> sumAbs_, sumSquare_;
  std::vector<float> sample_;
};

/// The linears that read one activation, and that activation.
struct ScaleSearchProblem {
  /// Row-major [rows[i], k] weights sharing the input (q/k/v, or gate/up, or one layer).
  std::vector<const float *> weights;
  std::vector<int64_t> rows;
  int64_t k = 0;
  /// Per-channel magnitude the scales grow from (mean |x|; equal where channels must
  /// share a scale, e.g. the query heads of one KV head). [k], > 0 where the channel is used.
  const float *magnitude = nullptr;
  /// Sampled activations [sampleRows, k] the output error is measured on.
  const float *sample = nullptr;
  int64_t sampleRows = 0;
  WeightEncoding encoding = WeightEncoding::Nvfp4;
  int64_t group = 32;
};

struct ScaleSearchResult {
  /// Per-input-channel scales [k]: weights are quantized as W diag(s), activations are
  /// divided by s. All ones when alpha = 0 won.
  std::vector<float> scales;
  float alpha = 0.0f;
  /// Squared output error on the sample, summed over the weights: with the chosen scales,
  /// and without (alpha = 0, plain absmax quantization).
  double error = 0.0;
  double unscaledError = 0.0;
};

/// The alphas tried by default: 0 (no scaling) to 0.9 in steps of 0.1 (AWQ uses 20 steps
/// over [0, 1); on 4-bit weights the error curve is smooth enough for 10).
std::vector<float> defaultAlphaGrid();

/// The scales for one alpha: s = m^alpha, normalised so that sqrt(max(s) min(s)) = 1 (as
/// AWQ does: the product of the extremes stays near one, so neither side of the fold drifts
/// far in range); channels with m <= 0 get 1.
std::vector<float> scalesForAlpha(const float *magnitude, int64_t k, float alpha);

/// Tries every alpha in `alphas` and keeps the one with the least output error
/// sum_i ||X W_i^T - X (Q(W_i diag(s)) diag(1/s))^T||^2 on the sample, quantizing with
/// absmax scales. Fails on malformed problems and on weights the encoding cannot hold.
StatusOr<ScaleSearchResult> searchChannelScales(const ScaleSearchProblem &problem,
                                                const std::vector<float> &alphas);

/// Quantizes and dequantizes [n, k] `values` (encodeWeight then decodeWeight).
StatusOr<std::vector<float>> fakeQuantize(const float *values, int64_t n, int64_t k,
                                          WeightEncoding encoding, int64_t group,
                                          ScaleChoice choice = ScaleChoice::Absmax,
                                          const float *columnWeights = nullptr);

/// ||X A^T - X B^T||^2 for [n, k] matrices A and B and [rows, k] activations X, in double.
double outputError(const float *a, const float *b, int64_t n, int64_t k, const float *x,
                   int64_t rows);

} // namespace ingot::quant
