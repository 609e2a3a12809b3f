//===- LayerNormReference.h - layer norm's gradient by differences -*- C++ -*-===//
//
// The oracle of the layerNormGrad kernels (CPU and CUDA): the gradient of
// sum(dy * layer_norm(x)) (or rms_norm(x), uncentered) by central
// differences of a forward norm in long double, row by row, so that the
// analytic formula the kernels share is checked rather than restated.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_TEST_UNIT_LAYERNORMREFERENCE_H
#define PPC_TEST_UNIT_LAYERNORMREFERENCE_H

#include <cmath>
#include <cstdint>
#include <vector>

namespace ppc::test {

struct LayerNormGradReference {
  std::vector<double> dx, mean, rstd;
};

/// Rows of [outer, size]; the scale has `size` elements, or one (broadcast).
/// Uncentered (RMSNorm), the mean is 0 and the variance the mean square.
inline LayerNormGradReference layerNormGradReference(const std::vector<double> &x,
                                                     const std::vector<double> &scale,
                                                     const std::vector<double> &dy, int64_t outer,
                                                     int64_t size, double epsilon,
                                                     bool centered = true) {
  using L = long double;
  auto scaleAt = [&](int64_t i) { return L(scale[scale.size() == 1 ? 0 : i]); };
  // sum_j dy_j * y_j for a row (the bias adds a constant: left out).
  auto objective = [&](const std::vector<L> &row, const double *g) {
    L mean = 0, variance = 0, sum = 0;
    for (L v : row)
      mean += centered ? v : 0;
    mean /= size;
    for (L v : row)
      variance += (v - mean) * (v - mean);
    L rstd = 1 / std::sqrt(variance / size + epsilon);
    for (int64_t j = 0; j < size; ++j)
      sum += L(g[j]) * (row[j] - mean) * rstd * scaleAt(j);
    return sum;
  };
  LayerNormGradReference ref;
  ref.dx.resize(outer * size);
  for (int64_t o = 0; o < outer; ++o) {
    std::vector<L> row(x.begin() + o * size, x.begin() + (o + 1) * size);
    L mean = 0, variance = 0;
    for (L v : row)
      mean += centered ? v : 0;
    mean /= size;
    for (L v : row)
      variance += (v - mean) * (v - mean);
    ref.mean.push_back(double(mean));
    ref.rstd.push_back(double(1 / std::sqrt(variance / size + epsilon)));
    for (int64_t i = 0; i < size; ++i) {
      L h = 1e-4L * std::max(L(1), std::fabs(row[i])), saved = row[i];
      row[i] = saved + h;
      L up = objective(row, dy.data() + o * size);
      row[i] = saved - h;
      L down = objective(row, dy.data() + o * size);
      row[i] = saved;
      ref.dx[o * size + i] = double((up - down) / (2 * h));
    }
  }
  return ref;
}

} // namespace ppc::test

#endif // PPC_TEST_UNIT_LAYERNORMREFERENCE_H
