//===- EmulatedKernelsTest.cpp - Kernels.cuh against oracles in double ----===//
//
// The CUDA target's library kernels (runtime/ppcrt/cuda/Kernels.cuh), run on
// the CUDA emulator, against direct loops in double: reductions over every
// mask of a rank-3 shape (rows and columns kernels, floats and integers,
// NaN), softmax and log-softmax over rows and columns (f32 and bf16), layer
// norm with broadcast scale and no bias, nll_loss with class weights and an
// ignored index, gather and scatter_add with negative and out-of-range
// indices (kernelErrorFlag), tiled transposes of sizes that are not
// multiples of the tile, strided copies and stores, trilu, einsum,
// attention and its gradients (f32, f64, bf16), and bf16 rounding. The end-to-end tests
// (test/e2e/exe_parity.py) show the kernels together; these name the one that is wrong.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/cuda/Kernels.cuh"
#include "test/unit/ArgMaxReference.h"
#include "test/unit/AttentionReference.h"
#include "test/unit/LayerNormReference.h"
#include "test/unit/cuda/DeviceMemory.h"

#include <gtest/gtest.h>

#include <array>
#include <cfloat>
#include <cmath>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using ppcrt::Dims;
using ppcrt::cuda::bf16;
using ppcrt::cuda::LossReduction;
using ppcrt::cuda::ReduceKind;

using ppc::test::deviceCopy;

/// The host copy once the compute stream's work has run.
template <typename T> std::vector<T> hostCopy(const T *device, size_t count) {
  return ppc::test::result(device, count, ppcrt::cuda::stream());
}

std::vector<float> randomFloats(size_t count, unsigned seed, float low = -2, float high = 2) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> value(low, high);
  std::vector<float> values(count);
  for (float &v : values)
    v = value(generator);
  return values;
}

/// The id the kernels flagged (0: none), cleared for the next test.
int takeKernelError() {
  int flag = -1, zero = 0;
  EXPECT_EQ(cudaMemcpyFromSymbol(&flag, ppcrt::cuda::kernelErrorFlag, sizeof(int)), cudaSuccess);
  EXPECT_EQ(cudaMemcpyToSymbol(ppcrt::cuda::kernelErrorFlag, &zero, sizeof(int)), cudaSuccess);
  return flag;
}

/// |got - want| within `relative` of |want| (or of 1 near zero).
::testing::AssertionResult near(double got, double want, double relative) {
  if (std::isnan(want) ? std::isnan(got)
                       : std::fabs(got - want) <= relative * std::max(1.0, std::fabs(want)))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << got << " where " << want << " was expected";
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

using Shape3 = std::array<int64_t, 3>;
constexpr Shape3 kSmall = {3, 5, 70};

/// Reduces `shape` over the dimensions set in `mask` (bit 0: the
/// outermost) in double.
template <typename T>
std::vector<double> referenceReduce(ReduceKind kind, const std::vector<T> &in, uint32_t mask,
                                    const Shape3 &shape = kSmall) {
  int64_t kept[3];
  for (int d = 0; d < 3; ++d)
    kept[d] = (mask >> d & 1) ? 1 : shape[d];
  int64_t outputs = kept[0] * kept[1] * kept[2];
  int64_t count = shape[0] * shape[1] * shape[2] / outputs;
  bool isMax = kind == ReduceKind::Max, isMin = kind == ReduceKind::Min;
  std::vector<double> out(outputs, isMax ? -INFINITY : isMin ? INFINITY : 0.0);
  for (int64_t a = 0; a < shape[0]; ++a)
    for (int64_t b = 0; b < shape[1]; ++b)
      for (int64_t c = 0; c < shape[2]; ++c) {
        int64_t o = ((kept[0] > 1 ? a : 0) * kept[1] + (kept[1] > 1 ? b : 0)) * kept[2] +
                    (kept[2] > 1 ? c : 0);
        double x = double(in[(a * shape[1] + b) * shape[2] + c]);
        if (isMax)
          out[o] = std::isnan(out[o]) || out[o] > x ? out[o] : x;
        else if (isMin)
          out[o] = std::isnan(out[o]) || out[o] < x ? out[o] : x;
        else
          out[o] += x;
      }
  if (kind == ReduceKind::Mean)
    for (double &v : out)
      v /= double(count);
  return out;
}

template <ReduceKind Kind, typename T>
std::vector<T> runReduce(const std::vector<T> &in, uint32_t mask, size_t outputs,
                         const Shape3 &dims = kSmall) {
  const int64_t shape[ppcrt::kMaxRank] = {dims[0], dims[1], dims[2]};
  T *din = deviceCopy(in), *dout = deviceCopy(std::vector<T>(outputs));
  ppcrt::cuda::reduce<Kind>(din, dout, 3, shape, mask);
  return hostCopy(dout, outputs);
}

template <ReduceKind Kind>
void checkFloatReduce(const std::vector<float> &in, const Shape3 &shape = kSmall) {
  for (uint32_t mask = 1; mask < 8; ++mask) {
    std::vector<double> want = referenceReduce(Kind, in, mask, shape);
    std::vector<float> got = runReduce<Kind>(in, mask, want.size(), shape);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_TRUE(near(got[i], want[i], 1e-6))
          << "kind " << int(Kind) << " mask " << mask << " output " << i;
  }
}

// Masks with the innermost dimension reduced take the rows kernel (blocks
// per output), the others the columns kernel (threads per output).
TEST(CudaKernels, FloatReductionsOverEveryMask) {
  std::vector<float> in = randomFloats(3 * 5 * 70, 1);
  checkFloatReduce<ReduceKind::Sum>(in);
  checkFloatReduce<ReduceKind::Mean>(in);
  checkFloatReduce<ReduceKind::Max>(in);
  checkFloatReduce<ReduceKind::Min>(in);
}

// Few outputs of many elements each (a bias's gradient, a norm: the GPU's
// first profile found these at 90% of a step) are cut into chunks whose
// partials a second kernel combines: rows into up to 47 chunks here
// (mask 7), columns into up to 750 (mask 3: 6 outputs of 12000).
TEST(CudaKernels, LongReductionsAreCutIntoChunks) {
  const Shape3 shape = {6, 2000, 6};
  std::vector<float> in = randomFloats(6 * 2000 * 6, 3);
  checkFloatReduce<ReduceKind::Sum>(in, shape);
  checkFloatReduce<ReduceKind::Mean>(in, shape);
  checkFloatReduce<ReduceKind::Max>(in, shape);
  in[(4 * 2000 + 1999) * 6 + 5] = NAN;
  checkFloatReduce<ReduceKind::Min>(in, shape);
  checkFloatReduce<ReduceKind::Max>(in, shape);
}

TEST(CudaKernels, MaxAndMinPropagateNaN) {
  std::vector<float> in = randomFloats(3 * 5 * 70, 2);
  in[(1 * 5 + 2) * 70 + 33] = NAN;
  checkFloatReduce<ReduceKind::Max>(in);
  checkFloatReduce<ReduceKind::Min>(in);
}

// Signed max and min compare as signed; integer means divide as signed.
TEST(CudaKernels, IntegerReductionsAreExact) {
  std::vector<int64_t> in(3 * 5 * 70);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = int64_t(i * 7919 % 1001) - 500;
  for (uint32_t mask = 1; mask < 8; ++mask) {
    std::vector<double> sum = referenceReduce(ReduceKind::Sum, in, mask);
    std::vector<double> max = referenceReduce(ReduceKind::Max, in, mask);
    std::vector<double> min = referenceReduce(ReduceKind::Min, in, mask);
    std::vector<int64_t> gotSum = runReduce<ReduceKind::Sum>(in, mask, sum.size());
    std::vector<int64_t> gotMax = runReduce<ReduceKind::Max>(in, mask, sum.size());
    std::vector<int64_t> gotMin = runReduce<ReduceKind::Min>(in, mask, sum.size());
    std::vector<int64_t> gotMean = runReduce<ReduceKind::Mean>(in, mask, sum.size());
    int64_t count = int64_t(in.size() / sum.size());
    for (size_t i = 0; i < sum.size(); ++i) {
      ASSERT_EQ(gotSum[i], int64_t(sum[i])) << "mask " << mask;
      ASSERT_EQ(gotMax[i], int64_t(max[i])) << "mask " << mask;
      ASSERT_EQ(gotMin[i], int64_t(min[i])) << "mask " << mask;
      ASSERT_EQ(gotMean[i], int64_t(sum[i]) / count) << "mask " << mask;
    }
  }
}

//===----------------------------------------------------------------------===//
// Softmax, layer norm, loss
//===----------------------------------------------------------------------===//

/// softmax (or log_softmax) over the middle dimension of [outer, size, inner].
std::vector<double> referenceSoftmax(const std::vector<double> &x, bool isLog, int64_t outer,
                                     int64_t size, int64_t inner) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t k) { return (o * size + k) * inner + j; };
      double max = -INFINITY, sum = 0;
      for (int64_t k = 0; k < size; ++k)
        max = std::max(max, x[at(k)]);
      for (int64_t k = 0; k < size; ++k)
        sum += std::exp(x[at(k)] - max);
      for (int64_t k = 0; k < size; ++k)
        y[at(k)] = isLog ? x[at(k)] - max - std::log(sum) : std::exp(x[at(k)] - max) / sum;
    }
  return y;
}

template <bool IsLog> void checkSoftmax(int64_t outer, int64_t size, int64_t inner) {
  std::vector<float> x = randomFloats(outer * size * inner, 3, -8, 8);
  std::vector<double> want =
      referenceSoftmax(std::vector<double>(x.begin(), x.end()), IsLog, outer, size, inner);
  float *dx = deviceCopy(x), *dy = deviceCopy(std::vector<float>(x.size()));
  ppcrt::cuda::softmax<IsLog>(dx, dy, outer, size, inner, size * inner);
  std::vector<float> got = hostCopy(dy, x.size());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_TRUE(near(got[i], want[i], 1e-5))
        << "log " << IsLog << " [" << outer << ", " << size << ", " << inner << "] element " << i;
}

// Rows longer than a block (1000 > 256 threads, not a multiple) and columns.
TEST(CudaKernels, SoftmaxOverRowsAndColumns) {
  checkSoftmax<false>(3, 1000, 1);
  checkSoftmax<true>(3, 1000, 1);
  checkSoftmax<false>(2, 13, 7);
  checkSoftmax<true>(2, 13, 7);
  checkSoftmax<false>(4, 1, 1);
}

// bf16 rows are computed in float and rounded once: within half a bf16 ulp
// (2^-9 relative) plus float's error of the oracle on the rounded inputs.
TEST(CudaKernels, Bf16SoftmaxRoundsOnce) {
  std::vector<float> wide = randomFloats(2 * 300, 4, -6, 6);
  std::vector<bf16> x(wide.size());
  std::vector<double> exact(wide.size());
  for (size_t i = 0; i < wide.size(); ++i) {
    x[i] = __float2bfloat16(wide[i]);
    exact[i] = double(__bfloat162float(x[i]));
  }
  std::vector<double> want = referenceSoftmax(exact, false, 2, 300, 1);
  bf16 *dx = deviceCopy(x), *dy = deviceCopy(std::vector<bf16>(x.size()));
  ppcrt::cuda::softmax<false>(dx, dy, 2, 300, 1, 300);
  std::vector<bf16> got = hostCopy(dy, x.size());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_NEAR(double(__bfloat162float(got[i])), want[i], std::fabs(want[i]) * 0x1p-8 + 1e-7)
        << "element " << i;
}

// log_softmax reading a window of wider bf16 rows in place and widening it
// (the padded vocabulary's logits, ppc-align-gemms): columns 3..303 of rows
// of 320, into dense f32 rows, as the f32 kernel computes the rounded values.
TEST(CudaKernels, LogSoftmaxReadsAWindowOfWiderBf16Rows) {
  const int64_t rows = 3, size = 300, stride = 320, offset = 3;
  std::vector<float> wide = randomFloats(rows * stride, 14, -6, 6);
  std::vector<bf16> x(wide.size());
  std::vector<double> window;
  for (size_t i = 0; i < wide.size(); ++i)
    x[i] = __float2bfloat16(wide[i]);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < size; ++c)
      window.push_back(__bfloat162float(x[r * stride + offset + c]));
  std::vector<double> want = referenceSoftmax(window, true, rows, size, 1);
  bf16 *dx = deviceCopy(x);
  float *dy = deviceCopy(std::vector<float>(rows * size, NAN));
  ppcrt::cuda::softmax<true>(dx + offset, dy, rows, size, 1, stride);
  std::vector<float> got = hostCopy(dy, rows * size);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE(near(got[i], want[i], 1e-5)) << "element " << i;
}

// log_sum_exp of a window of wider bf16 rows, widened (as the log_softmax
// above reads them), and of a middle axis; then nll_loss reading the same
// window less that shift (ppc-split-log-softmax), against the log_softmax's
// picked elements.
TEST(CudaKernels, LogSumExpAndAShiftedNllLossReadAWindowOfWiderBf16Rows) {
  const int64_t rows = 3, size = 300, stride = 320, offset = 3;
  std::vector<float> wide = randomFloats(rows * stride, 15, -6, 6);
  std::vector<bf16> x(wide.size());
  std::vector<double> window;
  for (size_t i = 0; i < wide.size(); ++i)
    x[i] = __float2bfloat16(wide[i]);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < size; ++c)
      window.push_back(__bfloat162float(x[r * stride + offset + c]));
  std::vector<double> logSoftmax = referenceSoftmax(window, true, rows, size, 1);
  bf16 *dx = deviceCopy(x);
  float *dlse = deviceCopy(std::vector<float>(rows, NAN));
  ppcrt::cuda::logSumExp(dx + offset, dlse, rows, size, 1, stride);
  std::vector<float> lse = hostCopy(dlse, rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < size; ++c)
      ASSERT_TRUE(near(window[r * size + c] - lse[r], logSoftmax[r * size + c], 1e-5))
          << r << "," << c;

  std::vector<int64_t> target = {299, -100, 0};
  int64_t *dtarget = deviceCopy(target);
  float *dout = deviceCopy(std::vector<float>(rows, NAN));
  ppcrt::cuda::nllLoss(dx + offset, stride, static_cast<const float *>(dlse), dtarget,
                       static_cast<const float *>(nullptr), dout, rows, size, 1,
                       LossReduction::None, true, -100, 18);
  std::vector<float> tokens = hostCopy(dout, rows);
  EXPECT_EQ(tokens[0], -float(window[299] - lse[0]));
  EXPECT_EQ(tokens[1], 0.0f);
  EXPECT_EQ(tokens[2], -float(window[2 * size] - lse[2]));
  EXPECT_TRUE(near(tokens[0], -logSoftmax[299], 1e-5));
  EXPECT_EQ(takeKernelError(), 0);

  const int64_t outer = 2, middle = 5, inner = 3;
  std::vector<float> y = randomFloats(outer * middle * inner, 16, -3, 3);
  float *dy = deviceCopy(y), *dcolumns = deviceCopy(std::vector<float>(outer * inner, NAN));
  ppcrt::cuda::logSumExp(dy, dcolumns, outer, middle, inner, middle * inner);
  std::vector<float> columns = hostCopy(dcolumns, outer * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < middle; ++k)
        sum += std::exp(double(y[(o * middle + k) * inner + j]));
      EXPECT_TRUE(near(columns[o * inner + j], std::log(sum), 1e-6)) << o << "," << j;
    }
}

// log_sum_exp of rows in one pass (MaxSum): rows longer than a block, each
// thread's running maximum rising at every element (and falling), values
// whose exp overflows without the shift, -inf among finite values, and the
// edges: every element -inf (-inf), one +inf (+inf), one NaN (NaN), one
// finite element among -inf (itself). Against the sum in double.
TEST(CudaKernels, LogSumExpRowsInOnePass) {
  const int64_t rows = 8, size = 1000;
  const float inf = INFINITY;
  std::vector<float> x(rows * size);
  std::vector<float> noise = randomFloats(rows * size, 17, -80, 80);
  for (int64_t c = 0; c < size; ++c) {
    x[0 * size + c] = 0.05f * float(c);
    x[1 * size + c] = -0.05f * float(c);
    x[2 * size + c] = 3e4f + noise[2 * size + c];
    x[3 * size + c] = -inf;
    x[4 * size + c] = c % 3 ? noise[4 * size + c] : -inf;
    x[5 * size + c] = c == 700 ? inf : noise[5 * size + c];
    x[6 * size + c] = c == 300 ? NAN : noise[6 * size + c];
    x[7 * size + c] = c == 999 ? 2.5f : -inf;
  }
  float *dx = deviceCopy(x), *dlse = deviceCopy(std::vector<float>(rows, 0));
  ppcrt::cuda::logSumExp(dx, dlse, rows, size, 1, size);
  std::vector<float> lse = hostCopy(dlse, rows);
  for (int64_t r : {0, 1, 2, 4}) {
    const float *row = x.data() + r * size;
    double max = *std::max_element(row, row + size), sum = 0;
    for (int64_t c = 0; c < size; ++c)
      sum += std::exp(double(row[c]) - max);
    EXPECT_TRUE(near(lse[r], max + std::log(sum), 1e-6)) << r << ": " << lse[r];
  }
  EXPECT_EQ(lse[3], -inf);
  EXPECT_EQ(lse[5], inf);
  EXPECT_TRUE(std::isnan(lse[6]));
  EXPECT_EQ(lse[7], 2.5f);
  EXPECT_EQ(takeKernelError(), 0);
}

// rotary in bf16, reading heads of a [B, T, H, hd] projection in place
// (strided rows) with tables [T, hd] broadcast over the heads, writing
// dense rows: each element within one bf16 rounding of the formula in
// double on the same bf16 inputs; transposed, the partners' signs and
// sines swap.
TEST(CudaKernels, RotaryReadsStridedBf16Rows) {
  const int64_t B = 2, H = 3, T = 4, hd = 16, half = hd / 2;
  auto rounded = [](const std::vector<float> &v) {
    std::vector<bf16> out(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      out[i] = __float2bfloat16(v[i]);
    return out;
  };
  std::vector<bf16> x = rounded(randomFloats(B * T * H * hd, 17, -2, 2)),
                    cos = rounded(randomFloats(T * hd, 18, -1, 1)),
                    sin = rounded(randomFloats(T * hd, 19, -1, 1));
  ppcrt::lines::AttentionRows heads{H, T * H * hd, hd, H * hd}, table{B * H, 0, 0, hd},
      dense{1, T * hd, 0, hd};
  bf16 *dx = deviceCopy(x), *dcos = deviceCopy(cos), *dsin = deviceCopy(sin);
  for (bool transposed : {false, true}) {
    bf16 *dy = deviceCopy(std::vector<bf16>(x.size()));
    ppcrt::cuda::rotary(
        dx, dcos, dsin, dy,
        ppcrt::lines::RotaryShape{B * H, T, hd, transposed, heads, table, table, dense});
    std::vector<bf16> y = hostCopy(dy, x.size());
    auto at = [](const std::vector<bf16> &v, int64_t i) { return double(__bfloat162float(v[i])); };
    for (int64_t n = 0; n < B * H; ++n)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < hd; ++i) {
          int64_t partner = (i + half) % hd;
          double sign = (i < half) != transposed ? -1 : 1;
          double sine = at(sin, t * hd + (transposed ? partner : i));
          double expected = at(x, heads.at(n, t) + i) * at(cos, t * hd + i) +
                            sign * at(x, heads.at(n, t) + partner) * sine;
          double got = at(y, dense.at(n, t) + i);
          ASSERT_TRUE(near(got, expected, 1e-2)) << transposed << " " << n << "," << t << "," << i;
          ASSERT_LE(std::abs(got - expected), std::abs(expected) / 256 + 1e-6)
              << "more than one bf16 rounding: " << got << " vs " << expected;
        }
  }
  EXPECT_EQ(takeKernelError(), 0);
}

TEST(CudaKernels, LayerNormWithBroadcastScaleAndNoBias) {
  const int64_t outer = 4, size = 300;
  const double epsilon = 1e-5;
  std::vector<float> x = randomFloats(outer * size, 5, -3, 5), scale = randomFloats(size, 6),
                     bias = randomFloats(size, 7);
  float *dx = deviceCopy(x), *dscale = deviceCopy(scale), *dbias = deviceCopy(bias);
  float *dy = deviceCopy(std::vector<float>(x.size()));
  for (bool broadcast : {false, true}) {
    for (bool hasBias : {true, false}) {
      ppcrt::cuda::layerNorm(dx, dscale, broadcast ? 0 : 1, hasBias ? dbias : nullptr, 1, dy, outer,
                             size, epsilon);
      std::vector<float> got = hostCopy(dy, x.size());
      for (int64_t o = 0; o < outer; ++o) {
        double mean = 0, variance = 0;
        for (int64_t i = 0; i < size; ++i)
          mean += x[o * size + i];
        mean /= size;
        for (int64_t i = 0; i < size; ++i)
          variance += (x[o * size + i] - mean) * (x[o * size + i] - mean);
        double rstd = 1 / std::sqrt(variance / size + epsilon);
        for (int64_t i = 0; i < size; ++i) {
          double want = (x[o * size + i] - mean) * rstd * scale[broadcast ? 0 : i] +
                        (hasBias ? bias[i] : 0.0);
          ASSERT_TRUE(near(got[o * size + i], want, 1e-5))
              << "broadcast " << broadcast << " bias " << hasBias << " row " << o << " i " << i;
        }
      }
    }
  }
}

// RMS normalization (layerNorm uncentered): x * rstd * scale, rstd from the
// mean square, with the scale whole and broadcast.
TEST(CudaKernels, RmsNormMatchesADirectComputation) {
  const int64_t outer = 3, size = 260;
  const double epsilon = 1e-6;
  std::vector<float> x = randomFloats(outer * size, 15, -3, 5), scale = randomFloats(size, 16);
  float *dx = deviceCopy(x), *dscale = deviceCopy(scale);
  float *dy = deviceCopy(std::vector<float>(x.size(), NAN));
  for (bool broadcast : {false, true}) {
    ppcrt::cuda::layerNorm<float, false>(dx, dscale, broadcast ? 0 : 1, nullptr, 0, dy, outer, size,
                                         epsilon);
    std::vector<float> got = hostCopy(dy, x.size());
    for (int64_t o = 0; o < outer; ++o) {
      double squares = 0;
      for (int64_t i = 0; i < size; ++i)
        squares += double(x[o * size + i]) * x[o * size + i];
      double rstd = 1 / std::sqrt(squares / size + epsilon);
      for (int64_t i = 0; i < size; ++i)
        ASSERT_TRUE(
            near(got[o * size + i], x[o * size + i] * rstd * scale[broadcast ? 0 : i], 1e-5))
            << "broadcast " << broadcast << " row " << o << " i " << i;
    }
  }
}

// layerNormGrad uncentered (rms_norm_grad): dx and rstd against central
// differences of the forward RMS norm; the mean is not written.
TEST(CudaKernels, RmsNormGradMatchesDifferencesOfTheForward) {
  const int64_t outer = 4, size = 300;
  const double epsilon = 1e-6;
  std::vector<float> x = randomFloats(outer * size, 17, -3, 5), dy = randomFloats(outer * size, 18),
                     scale = randomFloats(size, 19);
  float *dX = deviceCopy(x), *dScale = deviceCopy(scale), *dDy = deviceCopy(dy);
  float *dDx = deviceCopy(std::vector<float>(x.size(), NAN));
  float *dRstd = deviceCopy(std::vector<float>(outer, NAN));
  ppcrt::cuda::layerNormGrad<float, float, false>(dX, dScale, 1, dDy, dDx, nullptr, nullptr, dRstd,
                                                  outer, size, epsilon);
  auto ref = ppc::test::layerNormGradReference(
      std::vector<double>(x.begin(), x.end()), std::vector<double>(scale.begin(), scale.end()),
      std::vector<double>(dy.begin(), dy.end()), outer, size, epsilon, /*centered=*/false);
  std::vector<float> got = hostCopy(dDx, x.size()), rstd = hostCopy(dRstd, outer);
  double largest = 0;
  for (double v : ref.dx)
    largest = std::max(largest, std::fabs(v));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], ref.dx[i], 1e-5 * largest) << "element " << i;
  for (int64_t o = 0; o < outer; ++o)
    EXPECT_NEAR(rstd[o], ref.rstd[o], 1e-5 * ref.rstd[o]) << "row " << o;
}

// layerNormGrad's dx, mean and rstd against central differences of the
// forward (LayerNormReference.h): f32 with the scale whole and broadcast,
// and bf16 (computed in float, dx rounded once) on the rounded inputs.
TEST(CudaKernels, LayerNormGradMatchesDifferencesOfTheForward) {
  const int64_t outer = 4, size = 300;
  const double epsilon = 1e-5;
  std::vector<float> x = randomFloats(outer * size, 11, -3, 5), dy = randomFloats(outer * size, 12),
                     scale = randomFloats(size, 13);
  auto check = [&](const std::vector<double> &dx, const std::vector<float> &mean,
                   const std::vector<float> &rstd, const ppc::test::LayerNormGradReference &ref,
                   double tolerance) {
    double largest = 0;
    for (double v : ref.dx)
      largest = std::max(largest, std::fabs(v));
    for (size_t i = 0; i < dx.size(); ++i)
      ASSERT_NEAR(dx[i], ref.dx[i], tolerance * largest) << "element " << i;
    for (int64_t o = 0; o < outer; ++o) {
      EXPECT_NEAR(mean[o], ref.mean[o], 1e-5 * (1 + std::fabs(ref.mean[o]))) << "row " << o;
      EXPECT_NEAR(rstd[o], ref.rstd[o], 1e-5 * ref.rstd[o]) << "row " << o;
    }
  };
  float *dMean = deviceCopy(std::vector<float>(outer)),
        *dRstd = deviceCopy(std::vector<float>(outer));
  for (bool broadcast : {false, true}) {
    SCOPED_TRACE(broadcast ? "f32, broadcast scale" : "f32");
    float *dX = deviceCopy(x), *dScale = deviceCopy(scale), *dDy = deviceCopy(dy);
    float *dDx = deviceCopy(std::vector<float>(x.size(), NAN));
    ppcrt::cuda::layerNormGrad(dX, dScale, broadcast ? 0 : 1, dDy, dDx,
                               static_cast<const float *>(nullptr), dMean, dRstd, outer, size,
                               epsilon);
    std::vector<float> got = hostCopy(dDx, x.size());
    auto ref = ppc::test::layerNormGradReference(
        std::vector<double>(x.begin(), x.end()),
        std::vector<double>(scale.begin(), broadcast ? scale.begin() + 1 : scale.end()),
        std::vector<double>(dy.begin(), dy.end()), outer, size, epsilon);
    check(std::vector<double>(got.begin(), got.end()), hostCopy(dMean, outer),
          hostCopy(dRstd, outer), ref, 1e-5);
  }
  SCOPED_TRACE("bf16");
  std::vector<bf16> lowX(x.size()), lowDy(dy.size()), lowScale(scale.size());
  std::vector<double> wideX(x.size()), wideDy(dy.size()), wideScale(scale.size());
  for (size_t i = 0; i < x.size(); ++i) {
    lowX[i] = __float2bfloat16(x[i]);
    lowDy[i] = __float2bfloat16(dy[i]);
    wideX[i] = __bfloat162float(lowX[i]);
    wideDy[i] = __bfloat162float(lowDy[i]);
  }
  for (size_t i = 0; i < scale.size(); ++i) {
    lowScale[i] = __float2bfloat16(scale[i]);
    wideScale[i] = __bfloat162float(lowScale[i]);
  }
  bf16 *dX = deviceCopy(lowX), *dScale = deviceCopy(lowScale), *dDy = deviceCopy(lowDy);
  bf16 *dDx = deviceCopy(std::vector<bf16>(x.size()));
  ppcrt::cuda::layerNormGrad(dX, dScale, 1, dDy, dDx, static_cast<const bf16 *>(nullptr), dMean,
                             dRstd, outer, size, epsilon);
  std::vector<bf16> got = hostCopy(dDx, x.size());
  std::vector<double> wideGot(got.size());
  for (size_t i = 0; i < got.size(); ++i)
    wideGot[i] = __bfloat162float(got[i]);
  // dx rounded once to bf16: half an ulp of the largest element at most.
  check(wideGot, hostCopy(dMean, outer), hostCopy(dRstd, outer),
        ppc::test::layerNormGradReference(wideX, wideScale, wideDy, outer, size, epsilon), 0x1p-8);
  // With an addend (the residual stream's gradient, here dy): dx + dy as
  // the fused add rounds it (in float, then to bf16), bit for bit.
  bf16 *dSum = deviceCopy(std::vector<bf16>(x.size()));
  ppcrt::cuda::layerNormGrad(dX, dScale, 1, dDy, dSum, static_cast<const bf16 *>(dDy), dMean, dRstd,
                             outer, size, epsilon);
  std::vector<bf16> sum = hostCopy(dSum, x.size());
  for (size_t i = 0; i < sum.size(); ++i)
    ASSERT_EQ(__bfloat162float(sum[i]),
              __bfloat162float(__float2bfloat16(__bfloat162float(got[i]) + wideDy[i])))
        << "element " << i;
}

// layerNormGrad with sums over its rows (NormSums.h): dx, mean and rstd bit
// for bit those of the kernel without sums; each sum against a loop in
// double over what the kernel read and wrote (the normalized input from the
// statistics it returns). Rows of 96 and 300 (256 threads), of 1,500 (512),
// of 2,500 and of 4,096 (1,024 threads, the most it takes); more rows than blocks,
// so that blocks add several rows each; f32, bf16, uncentered, an addend,
// and sums asked for alone.
template <typename T, bool Centered>
void checkNormGradSums(int64_t outer, int64_t size, bool addend, unsigned wanted) {
  SCOPED_TRACE(testing::Message() << (std::is_same_v<T, bf16> ? "bf16" : "f32") << " "
                                  << (Centered ? "layer" : "rms") << " outer " << outer << " size "
                                  << size << (addend ? " addend" : "") << " wanted " << wanted);
  const double epsilon = 1e-5;
  auto low = [](const std::vector<float> &v) {
    std::vector<T> out(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      out[i] = T(v[i]);
    return out;
  };
  std::vector<T> x = low(randomFloats(outer * size, 31, -3, 5)),
                 dy = low(randomFloats(outer * size, 32)), scale = low(randomFloats(size, 33)),
                 add = low(randomFloats(outer * size, 34));
  T *dX = deviceCopy(x), *dDy = deviceCopy(dy), *dScale = deviceCopy(scale);
  const T *dAdd = addend ? deviceCopy(add) : nullptr;
  T *plainDx = deviceCopy(std::vector<T>(x.size())), *dDx = deviceCopy(std::vector<T>(x.size()));
  float *plainMean = deviceCopy(std::vector<float>(outer)),
        *plainRstd = deviceCopy(std::vector<float>(outer)),
        *dMean = deviceCopy(std::vector<float>(outer)),
        *dRstd = deviceCopy(std::vector<float>(outer));
  float *dResult = deviceCopy(std::vector<float>(size, NAN)),
        *dScaleGrad = deviceCopy(std::vector<float>(size, NAN));
  T *dInput = deviceCopy(std::vector<T>(size));
  ppcrt::cuda::layerNormGrad<T, float, Centered>(dX, dScale, 1, dDy, plainDx, dAdd,
                                                 Centered ? plainMean : nullptr, plainRstd, outer,
                                                 size, epsilon);
  ppcrt::NormGradSums<float, float, T> sums{wanted & 1 ? dResult : nullptr,
                                            wanted & 2 ? dScaleGrad : nullptr,
                                            wanted & 4 ? dInput : nullptr};
  ppcrt::cuda::layerNormGrad<T, float, Centered>(
      dX, dScale, 1, dDy, dDx, dAdd, Centered ? dMean : nullptr, dRstd, outer, size, epsilon, sums);
  std::vector<T> plain = hostCopy(plainDx, x.size()), got = hostCopy(dDx, x.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(float(got[i]), float(plain[i])) << "element " << i;
  std::vector<float> mean = hostCopy(dMean, outer), rstd = hostCopy(dRstd, outer);
  EXPECT_EQ(rstd, hostCopy(plainRstd, outer));
  if (Centered) {
    EXPECT_EQ(mean, hostCopy(plainMean, outer));
  }
  std::vector<float> result = hostCopy(dResult, size), scaleGrad = hostCopy(dScaleGrad, size);
  std::vector<T> input = hostCopy(dInput, size);
  for (int64_t c = 0; c < size; ++c) {
    double sum[3] = {0, 0, 0}, magnitude[3] = {0, 0, 0};
    for (int64_t o = 0; o < outer; ++o) {
      int64_t at = o * size + c;
      double g = float(dy[at]), xhat = (float(x[at]) - (Centered ? mean[o] : 0.0f)) * rstd[o];
      double terms[3] = {g, g * xhat, float(got[at])};
      for (int k = 0; k < 3; ++k) {
        sum[k] += terms[k];
        magnitude[k] += std::fabs(terms[k]);
      }
    }
    if (wanted & 1)
      ASSERT_NEAR(result[c], sum[0], 1e-6 * magnitude[0]) << "result's gradient, column " << c;
    else
      ASSERT_TRUE(std::isnan(result[c])) << "written though not asked for, column " << c;
    if (wanted & 2)
      ASSERT_NEAR(scaleGrad[c], sum[1], 1e-6 * magnitude[1]) << "scale's gradient, column " << c;
    else
      ASSERT_TRUE(std::isnan(scaleGrad[c])) << "written though not asked for, column " << c;
    // Rounded once to T: half its ulp of the sum, past the float sums'.
    double ulp = std::is_same_v<T, bf16> ? 0x1p-8 : 0x1p-24;
    if (wanted & 4) {
      ASSERT_NEAR(float(input[c]), sum[2], ulp * std::fabs(sum[2]) + 1e-6 * magnitude[2])
          << "written rows' sum, column " << c;
    }
  }
}

TEST(CudaKernels, NormGradSumsAddTheRowsTheKernelReadsAndWrites) {
  checkNormGradSums<float, true>(1100, 300, /*addend=*/true, 7);
  checkNormGradSums<float, false>(700, 300, /*addend=*/false, 2);
  checkNormGradSums<bf16, true>(1100, 300, /*addend=*/true, 7);
  checkNormGradSums<bf16, true>(600, 96, /*addend=*/false, 5);
  checkNormGradSums<float, true>(600, 1500, /*addend=*/true, 7);
  checkNormGradSums<float, true>(40, 2500, /*addend=*/true, 7);
  checkNormGradSums<bf16, false>(9, 4096, /*addend=*/false, 6);
}

// nll_loss of log-probabilities [batch, classes, inner] with class weights:
// the mean divides by the weights of the targets not ignored.
TEST(CudaKernels, NllLossWeightsIgnoresAndFlagsTargets) {
  const int64_t batch = 3, classes = 11, inner = 5;
  std::vector<float> input = randomFloats(batch * classes * inner, 8, -5, 0),
                     weight = randomFloats(classes, 9, 0.5, 2);
  std::vector<int64_t> target(batch * inner);
  for (size_t i = 0; i < target.size(); ++i)
    target[i] = int64_t(i * 7 % classes);
  target[4] = -100;
  double lossSum = 0, weightSum = 0;
  std::vector<double> perToken(target.size(), 0.0);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t j = 0; j < inner; ++j) {
      int64_t t = target[n * inner + j];
      if (t == -100)
        continue;
      perToken[n * inner + j] = -double(input[(n * classes + t) * inner + j]) * weight[t];
      lossSum += perToken[n * inner + j];
      weightSum += weight[t];
    }
  float *dinput = deviceCopy(input), *dweight = deviceCopy(weight);
  int64_t *dtarget = deviceCopy(target);
  float *dout = deviceCopy(std::vector<float>(target.size()));

  ppcrt::cuda::nllLoss(dinput, classes * inner, static_cast<const float *>(nullptr), dtarget,
                       dweight, dout, batch, classes, inner, LossReduction::Mean, true, -100, 17);
  EXPECT_TRUE(near(hostCopy(dout, 1)[0], lossSum / weightSum, 1e-6));
  ppcrt::cuda::nllLoss(dinput, classes * inner, static_cast<const float *>(nullptr), dtarget,
                       dweight, dout, batch, classes, inner, LossReduction::Sum, true, -100, 17);
  EXPECT_TRUE(near(hostCopy(dout, 1)[0], lossSum, 1e-6));
  ppcrt::cuda::nllLoss(dinput, classes * inner, static_cast<const float *>(nullptr), dtarget,
                       dweight, dout, batch, classes, inner, LossReduction::None, true, -100, 17);
  std::vector<float> tokens = hostCopy(dout, target.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    EXPECT_TRUE(near(tokens[i], perToken[i], 1e-6)) << "token " << i;
  EXPECT_EQ(takeKernelError(), 0);

  // Without an ignore index, -100 is a class out of range.
  ppcrt::cuda::nllLoss(dinput, classes * inner, static_cast<const float *>(nullptr), dtarget,
                       dweight, dout, batch, classes, inner, LossReduction::Sum, false, 0, 17);
  hostCopy(dout, 1);
  EXPECT_EQ(takeKernelError(), 17);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST(CudaKernels, GatherAndScatterAddWithNegativeAndBadIndices) {
  const int64_t outer = 2, n = 7, inner = 3;
  std::vector<float> data(outer * n * inner);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = float(i);
  std::vector<int64_t> indices = {0, 6, -1, 2, 2};
  const int64_t rows = int64_t(indices.size());
  float *ddata = deviceCopy(data);
  int64_t *dindices = deviceCopy(indices);
  float *dout = deviceCopy(std::vector<float>(outer * rows * inner));
  ppcrt::cuda::gather(ddata, dindices, dout, outer, n, inner, rows, 5);
  std::vector<float> got = hostCopy(dout, outer * rows * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < inner; ++j) {
        int64_t row = indices[r] < 0 ? indices[r] + n : indices[r];
        ASSERT_EQ(got[(o * rows + r) * inner + j], data[(o * n + row) * inner + j]);
      }
  EXPECT_EQ(takeKernelError(), 0);

  // scatter_add is gather's gradient: repeated rows accumulate.
  std::vector<float> updates(outer * rows * inner);
  for (size_t i = 0; i < updates.size(); ++i)
    updates[i] = float(i % 11) - 3;
  float *dupdates = deviceCopy(updates), *dsum = deviceCopy(std::vector<float>(data.size()));
  ppcrt::cuda::scatterAdd(dupdates, dindices, dsum, outer, n, inner, rows, 6);
  std::vector<float> sums = hostCopy(dsum, data.size()), want(data.size(), 0.0f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < inner; ++j) {
        int64_t row = indices[r] < 0 ? indices[r] + n : indices[r];
        want[(o * n + row) * inner + j] += updates[(o * rows + r) * inner + j];
      }
  EXPECT_EQ(sums, want);
  EXPECT_EQ(takeKernelError(), 0);

  // A row outside [-n, n) is flagged with the op's id; gather writes 0 there.
  std::vector<int64_t> bad = {1, 7, -8};
  int64_t *dbad = deviceCopy(bad);
  ppcrt::cuda::gather(ddata, dbad, dout, outer, n, inner, 3, 5);
  got = hostCopy(dout, outer * 3 * inner);
  EXPECT_EQ(takeKernelError(), 5);
  EXPECT_EQ(got[3], 0.0f);
  ppcrt::cuda::scatterAdd(dupdates, dbad, dsum, outer, n, inner, 3, 6);
  hostCopy(dsum, 1);
  EXPECT_EQ(takeKernelError(), 6);
}

// Tiles are 32 × 32: sizes off the tile, a single row, and a batch.
TEST(CudaKernels, TransposeOfSizesOffTheTile) {
  struct Case {
    int64_t batch, rows, cols;
  };
  for (Case c : {Case{3, 33, 65}, Case{1, 1, 100}, Case{2, 70, 1}, Case{1, 32, 32}}) {
    std::vector<float> in(c.batch * c.rows * c.cols);
    for (size_t i = 0; i < in.size(); ++i)
      in[i] = float(i);
    float *din = deviceCopy(in), *dout = deviceCopy(std::vector<float>(in.size()));
    ppcrt::cuda::transpose2d(din, dout, c.batch, c.rows, c.cols);
    std::vector<float> got = hostCopy(dout, in.size());
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t r = 0; r < c.rows; ++r)
        for (int64_t k = 0; k < c.cols; ++k)
          ASSERT_EQ(got[(b * c.cols + k) * c.rows + r], in[(b * c.rows + r) * c.cols + k])
              << c.batch << "x" << c.rows << "x" << c.cols << " at " << b << "," << r << "," << k;
  }
}

// out[i, j] = in[1 + 10 i + 2 j] and back.
TEST(CudaKernels, StridedCopyAndStoreAreInverses) {
  std::vector<int32_t> in(40);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = int32_t(i) * 3;
  Dims d{2, {3, 4}, {10, 2}};
  int32_t *din = deviceCopy(in), *dout = deviceCopy(std::vector<int32_t>(12));
  ppcrt::cuda::stridedCopy(din, dout, d, 1);
  std::vector<int32_t> got = hostCopy(dout, 12);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      ASSERT_EQ(got[i * 4 + j], in[1 + 10 * i + 2 * j]);

  int32_t *dback = deviceCopy(std::vector<int32_t>(40, -1));
  ppcrt::cuda::stridedStore(dout, dback, d, 1);
  std::vector<int32_t> back = hostCopy(dback, 40);
  for (int i = 0; i < 40; ++i) {
    bool written = i % 2 == 1 && (i - 1) % 10 < 8 && (i - 1) / 10 < 3;
    ASSERT_EQ(back[i], written ? in[i] : -1) << "element " << i;
  }
}

// Rotary embedding's rotated halves: rows of 8, the second half of each
// (pieces of 4, read 8 apart in place) then the first, concatenated.
TEST(CudaKernels, ConcatReadsPiecesAPitchApart) {
  const int64_t rows = 5, width = 8, half = 4;
  std::vector<int32_t> x(rows * width);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = int32_t(i) * 7 + 1;
  int32_t *dx = deviceCopy(x), *dout = deviceCopy(std::vector<int32_t>(x.size(), -1));
  const int64_t e = sizeof(int32_t);
  ppcrt::cuda::concatPart(dout, dx + half, rows, width * e, 0, half * e, width * e);
  ppcrt::cuda::concatPart(dout, dx, rows, width * e, half * e, half * e, width * e);
  std::vector<int32_t> got = hostCopy(dout, x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j)
      ASSERT_EQ(got[r * width + j], x[r * width + (j + half) % width]) << r << "," << j;
}

// Every line of [outer, n, inner] scanned in its order, against a loop in
// double (the values are integers, so the float sums are exact).
TEST(CudaKernels, CumSumScansEveryLine) {
  const int64_t outer = 3, n = 37, inner = 5;
  std::vector<float> in(outer * n * inner);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(int64_t(i * 7) % 11) - 5;
  float *din = deviceCopy(in), *dout = deviceCopy(std::vector<float>(in.size()));
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      ppcrt::cuda::cumsum(din, dout, outer, n, inner, exclusive, reverse);
      std::vector<float> got = hostCopy(dout, in.size());
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < inner; ++j) {
          double sum = 0;
          for (int64_t s = 0; s < n; ++s) {
            int64_t i = (o * n + (reverse ? n - 1 - s : s)) * inner + j;
            if (exclusive) {
              ASSERT_EQ(got[i], sum) << "exclusive " << exclusive << " reverse " << reverse;
            }
            sum += in[i];
            if (!exclusive) {
              ASSERT_EQ(got[i], sum) << "exclusive " << exclusive << " reverse " << reverse;
            }
          }
        }
    }
}

// Every line's arg_max against a scan in double: largest and smallest, first
// and last of equal elements (the values repeat).
TEST(CudaKernels, ArgMaxMatchesAScan) {
  const int64_t outer = 4, n = 9, inner = 3;
  std::vector<float> in = ppc::test::argMaxInput(outer * n * inner);
  float *din = deviceCopy(in);
  int64_t *dout = deviceCopy(std::vector<int64_t>(outer * inner));
  for (bool largest : {true, false})
    for (bool last : {false, true}) {
      ppcrt::cuda::argMax(din, dout, outer, n, inner, largest, last);
      std::vector<int64_t> got = hostCopy(dout, outer * inner);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < inner; ++j)
          ASSERT_EQ(got[o * inner + j], ppc::test::argMaxOfLine(in, n, inner, o, j, largest, last))
              << "largest " << largest << " last " << last << " line " << o << "," << j;
    }
}

// Every line's k first positions against a stable sort in double; the values
// repeat, so ties must go to the lower index.
TEST(CudaKernels, TopKIndicesMatchesAStableSort) {
  const int64_t outer = 4, n = 9, inner = 3, k = 4;
  std::vector<float> in(outer * n * inner);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(int64_t(i * 5) % 7);
  float *din = deviceCopy(in);
  int64_t *dout = deviceCopy(std::vector<int64_t>(outer * k * inner));
  for (bool largest : {true, false}) {
    ppcrt::cuda::topKIndices(din, dout, outer, n, inner, k, largest);
    std::vector<int64_t> got = hostCopy(dout, outer * k * inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        std::vector<int64_t> order(n);
        for (int64_t i = 0; i < n; ++i)
          order[i] = i;
        auto at = [&](int64_t i) { return double(in[(o * n + i) * inner + j]); };
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return largest ? at(a) > at(b) : at(a) < at(b);
        });
        for (int64_t r = 0; r < k; ++r)
          ASSERT_EQ(got[(o * k + r) * inner + j], order[r])
              << "largest " << largest << " line " << o << "," << j << " rank " << r;
      }
  }
}

// Integers and doubles compare exactly: neighbours that float would merge
// (2^24 + 1, 1 + 1e-12) keep their order.
TEST(CudaKernels, TopKIndicesComparesInTheElementType) {
  std::vector<int64_t> ints = {int64_t(1) << 24, (int64_t(1) << 24) + 1, (int64_t(1) << 53) + 1,
                               int64_t(1) << 53};
  int64_t *di = deviceCopy(ints), *dout = deviceCopy(std::vector<int64_t>(4));
  ppcrt::cuda::topKIndices(di, dout, 1, 4, 1, 4, true);
  EXPECT_EQ(hostCopy(dout, 4), (std::vector<int64_t>{2, 3, 1, 0}));
  std::vector<double> doubles = {1.0, 1.0 + 1e-12, 1e-50};
  double *dd = deviceCopy(doubles);
  ppcrt::cuda::topKIndices(dd, dout, 1, 3, 1, 3, true);
  EXPECT_EQ(hostCopy(dout, 3), (std::vector<int64_t>{1, 0, 2}));
}

TEST(CudaKernels, TriluKeepsTheDiagonalBand) {
  const int64_t batch = 2, rows = 5, cols = 7;
  std::vector<double> in(batch * rows * cols);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = double(i) + 1;
  double *din = deviceCopy(in), *dout = deviceCopy(std::vector<double>(in.size()));
  for (bool upper : {true, false})
    for (int64_t k : {-1, 0, 2}) {
      ppcrt::cuda::trilu(din, dout, int64_t(in.size()), rows, cols, upper, k);
      std::vector<double> got = hostCopy(dout, in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        int64_t row = int64_t(i) / cols % rows, col = int64_t(i) % cols;
        bool kept = upper ? col - row >= k : col - row <= k;
        ASSERT_EQ(got[i], kept ? in[i] : 0.0) << "upper " << upper << " k " << k << " at " << i;
      }
    }
}

// ij,jk->ik (labels i, k, then the contracted j) and i,i,i-> (all contracted).
TEST(CudaKernels, EinsumContractsEveryOperand) {
  const int64_t I = 3, J = 4, K = 5;
  std::vector<float> a = randomFloats(I * J, 10), b = randomFloats(J * K, 11);
  float *da = deviceCopy(a), *db = deviceCopy(b), *dc = deviceCopy(std::vector<float>(I * K));
  ppcrt::cuda::EinsumSpec spec{};
  spec.operands = 2;
  spec.labels = 3;
  spec.outLabels = 2;
  spec.size[0] = I, spec.size[1] = K, spec.size[2] = J;
  spec.stride[0][0] = J, spec.stride[0][1] = 0, spec.stride[0][2] = 1;
  spec.stride[1][0] = 0, spec.stride[1][1] = 1, spec.stride[1][2] = K;
  ppcrt::cuda::einsum(ppcrt::cuda::EinsumOperands<float>{{da, db, nullptr}}, dc, spec, I * K);
  std::vector<float> c = hostCopy(dc, I * K);
  for (int64_t i = 0; i < I; ++i)
    for (int64_t k = 0; k < K; ++k) {
      double want = 0;
      for (int64_t j = 0; j < J; ++j)
        want += double(a[i * J + j]) * b[j * K + k];
      ASSERT_TRUE(near(c[i * K + k], want, 1e-6)) << i << "," << k;
    }

  std::vector<float> x = randomFloats(9, 12), y = randomFloats(9, 13), z = randomFloats(9, 14);
  float *dx = deviceCopy(x), *dy = deviceCopy(y), *dz = deviceCopy(z);
  ppcrt::cuda::EinsumSpec dot{};
  dot.operands = 3;
  dot.labels = 1;
  dot.outLabels = 0;
  dot.size[0] = 9;
  dot.stride[0][0] = dot.stride[1][0] = dot.stride[2][0] = 1;
  ppcrt::cuda::einsum(ppcrt::cuda::EinsumOperands<float>{{dx, dy, dz}}, dc, dot, 1);
  double want = 0;
  for (int i = 0; i < 9; ++i)
    want += double(x[i]) * y[i] * z[i];
  EXPECT_TRUE(near(hostCopy(dc, 1)[0], want, 1e-6));
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

using ppc::test::AttentionCase;
using ppc::test::AttentionInputs;

/// The log-sum-exp's type: float for float and bf16, double for double.
template <typename T> using LseOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T> double widen(T x) {
  if constexpr (std::is_same_v<T, bf16>)
    return double(__bfloat162float(x));
  else
    return double(x);
}

/// x as an operand of the bf16 kernels' products (attention's P, and dS in
/// its backward): rounded to bf16.
double roundedOperand(double x) { return widen(bf16(x)); }

/// The values as T holds them (the kernel's inputs), in double.
template <typename T> std::vector<double> roundedTo(const std::vector<double> &values) {
  std::vector<double> rounded(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    rounded[i] = widen(T(values[i]));
  return rounded;
}

template <typename T> T *deviceCopyAs(const std::vector<double> &values) {
  if (values.empty())
    return nullptr;
  std::vector<T> converted(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    converted[i] = T(values[i]);
  return deviceCopy(converted);
}

/// Device memory of `count` NaNs (the emulator's fill of fresh memory), so
/// an element a kernel does not write fails.
template <typename T> T *deviceOutput(size_t count) {
  void *memory = nullptr;
  EXPECT_EQ(cudaMalloc(&memory, count * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemset(memory, 0xff, count * sizeof(T)), cudaSuccess);
  return static_cast<T *>(memory);
}

/// Every element of the device array within relative * |want| + absolute,
/// plus twice its slack where given (AttentionGradSlack: the rounding it
/// allows moves the exact result, which the store rounds again).
template <typename T>
::testing::AssertionResult allNear(const T *device, const std::vector<double> &want,
                                   double relative, double absolute,
                                   const std::vector<double> *slack = nullptr) {
  std::vector<T> got = hostCopy(device, want.size());
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(widen(got[i]) - want[i]) <=
          relative * std::fabs(want[i]) + absolute + (slack ? 2 * (*slack)[i] : 0.0)))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << widen(got[i]) << " where " << want[i] << " was expected";
  return ::testing::AssertionSuccess();
}

/// attention (or attentionGrad, from the reference's o and lse rounded to
/// the kernel's types) of every case against the reference on T's inputs;
/// with `strided`, every operand read and written in an interleaved layout
/// (AttentionReference.h), whose gaps must stay unwritten. attentionGrad is
/// given dq's float sums (over NaN) where `dqSums`, as generated code gives
/// them (AttentionGrad.h: bf16 causal attention then runs in one kernel),
/// else not (two kernels).
template <typename T>
void checkAttention(bool gradients, double relative, double absolute,
                    const std::vector<AttentionCase> &cases = ppc::test::attentionCases(),
                    bool strided = false, bool dqSums = true) {
  using L = LseOf<T>;
  for (const AttentionCase &c : cases) {
    if (gradients && !ppc::test::gradientChecked(c))
      continue;
    SCOPED_TRACE(c.name() +
                 (std::is_same_v<T, bf16> ? " bf16"
                  : sizeof(T) == 4        ? " f32"
                                          : " f64") +
                 (strided ? " strided" : ""));
    ppcrt::lines::AttentionShape shape = strided ? ppc::test::interleavedShape(c) : c.shape();
    const ppcrt::lines::AttentionShape dense = shape.resolved();
    AttentionInputs in = ppc::test::attentionInputs(c, 7);
    for (std::vector<double> *values : {&in.q, &in.k, &in.v, &in.bias, &in.dO})
      *values = roundedTo<T>(*values);
    const int64_t batch = c.batch;
    // An operand as the kernel takes it; an output over NaN; the check of
    // an output's rows, and of its gaps.
    auto place = [&](const std::vector<double> &values, const ppcrt::lines::AttentionRows &rows,
                     int64_t count, int64_t size) {
      return deviceCopyAs<T>(ppc::test::scatterRows(values, rows, batch, count, size));
    };
    auto output = [&](const ppcrt::lines::AttentionRows &rows, int64_t count, int64_t size) {
      return deviceOutput<T>(ppc::test::spanOf(rows, batch, count, size));
    };
    auto expectNear = [&](const T *got, const ppcrt::lines::AttentionRows &rows, int64_t count,
                          int64_t size, const std::vector<double> &want, const char *what,
                          const std::vector<double> *slack = nullptr) {
      std::vector<T> values = hostCopy(got, ppc::test::spanOf(rows, batch, count, size));
      std::vector<double> wide(values.size());
      for (size_t i = 0; i < values.size(); ++i)
        wide[i] = widen(values[i]);
      bool untouched = false;
      std::vector<double> gathered =
          ppc::test::gatherRows(wide, rows, batch, count, size, untouched);
      EXPECT_TRUE(allNear(deviceCopyAs<double>(gathered), want, relative, absolute, slack)) << what;
      EXPECT_TRUE(untouched) << what << " is written outside its rows";
    };
    std::vector<double> o, lse, dq, dk, dv, oSlack;
    constexpr bool rounds = std::is_same_v<T, bf16>;
    ppc::test::referenceAttention(shape, in, o, lse, rounds ? roundedOperand : nullptr,
                                  rounds ? &oSlack : nullptr);
    T *q = place(in.q, dense.q, c.queries, c.headDim), *k = place(in.k, dense.k, c.keys, c.headDim),
      *v = place(in.v, dense.v, c.keys, c.valueDim), *bias = deviceCopyAs<T>(in.bias),
      *dO = place(in.dO, dense.dO, c.queries, c.valueDim);
    if (!gradients) {
      T *gotO = output(dense.o, c.queries, c.valueDim);
      L *gotLse = deviceOutput<L>(lse.size());
      ppcrt::cuda::attention<T, L>(q, k, v, bias, gotO, gotLse, shape);
      expectNear(gotO, dense.o, c.queries, c.valueDim, o, "o", rounds ? &oSlack : nullptr);
      EXPECT_TRUE(allNear(gotLse, lse, relative, absolute)) << "lse";
      continue;
    }
    o = roundedTo<T>(o);
    lse = roundedTo<L>(lse);
    ppc::test::AttentionGradSlack slack;
    if constexpr (std::is_same_v<T, bf16>)
      ppc::test::referenceAttentionGrad(shape, in, o, lse, dq, dk, dv, roundedOperand, &slack);
    else
      ppc::test::referenceAttentionGrad(shape, in, o, lse, dq, dk, dv);
    T *gotDq = output(dense.dq, c.queries, c.headDim), *gotDk = output(dense.dk, c.keys, c.headDim),
      *gotDv = output(dense.dv, c.keys, c.valueDim);
    float *sums = dqSums ? deviceOutput<float>(size_t(c.batch * c.queries * c.headDim)) : nullptr;
    ppcrt::cuda::attentionGrad<T, L>(q, k, v, bias, place(o, dense.o, c.queries, c.valueDim),
                                     deviceCopyAs<L>(lse), dO, gotDq, gotDk, gotDv, shape, sums);
    expectNear(gotDq, dense.dq, c.queries, c.headDim, dq, "dq", rounds ? &slack.dq : nullptr);
    expectNear(gotDk, dense.dk, c.keys, c.headDim, dk, "dk", rounds ? &slack.dk : nullptr);
    expectNear(gotDv, dense.dv, c.keys, c.valueDim, dv, "dv", rounds ? &slack.dv : nullptr);
  }
}

// f32 within 1e-5 and f64 within 1e-12 (relative, plus as much absolute) of
// the reference (test/unit/AttentionReference.h; CpuKernelsTest checks its
// gradients against finite differences): tiles of queries and keys cut off
// on every side, causal with fewer and more queries than keys, a bias
// broadcast over heads and a padding mask with -inf.
TEST(CudaKernels, AttentionMatchesReference) {
  checkAttention<float>(false, 1e-5, 1e-5);
  checkAttention<double>(false, 1e-12, 1e-12);
}

// dq, dk and dv (written over NaN) likewise.
TEST(CudaKernels, AttentionGradMatchesReference) {
  checkAttention<float>(true, 1e-5, 1e-5);
  checkAttention<double>(true, 1e-12, 1e-12);
}

// bf16 is computed in float and rounded once at the store: within 2^-8
// relative (half a bf16 ulp is at most that) plus 1e-5 absolute of the
// reference on the rounded inputs, which rounds P (shifted by a multiple of
// ln 2) and, in the backward, dS to bf16 before their products as the
// kernels do; lse is float.
TEST(CudaKernels, Bf16AttentionRoundsOnce) {
  checkAttention<bf16>(false, 0x1p-8, 1e-5);
  checkAttention<bf16>(true, 0x1p-8, 1e-5);
}

// The larger of the head and value sizes selects the kernels' layout (a row's
// vectors of 64, 128 or 256 elements, over 1 to 16 threads): each at its
// bounds, causal, f32 and f64.
TEST(CudaKernels, AttentionTakesHeadsUpTo256) {
  std::vector<AttentionCase> cases;
  for (auto [depth, width] :
       {std::pair<int64_t, int64_t>{64, 48}, {65, 128}, {128, 100}, {256, 8}, {24, 256}})
    cases.push_back(AttentionCase{2, 9, 11, depth, width, true, AttentionCase::None});
  for (bool gradients : {false, true}) {
    checkAttention<float>(gradients, 1e-5, 1e-5, cases);
    checkAttention<double>(gradients, 1e-12, 1e-12, cases);
  }
}

// bf16 head and value sizes up to 128 run on the tensor-core kernels (the
// emulator's WMMA), padded to 64 or 128: sizes at and off the 16-element
// fragments, queries past a block's 64 rows and keys past a tile's 32, with
// and without the causal mask and biases; 256 takes the scalar kernels.
TEST(CudaKernels, Bf16AttentionOnTensorCores) {
  using C = AttentionCase;
  std::vector<AttentionCase> cases;
  for (auto [depth, width] :
       {std::pair<int64_t, int64_t>{64, 48}, {65, 128}, {128, 100}, {16, 16}, {8, 72}, {24, 256}})
    for (bool causal : {false, true})
      cases.push_back(C{2, 70, causal ? 70 : 37, depth, width, causal, C::None});
  cases.push_back(C{6, 67, 67, 64, 64, true, C::QueryBias});
  cases.push_back(C{6, 131, 95, 64, 64, false, C::Padding});
  for (bool gradients : {false, true})
    checkAttention<bf16>(gradients, 0x1p-8, 1e-5, cases);
}

// bf16 causal attention's backward in one kernel (AttentionGrad.h), whose
// blocks add dq's shares in turn, and in two where no sums are given: many
// tiles of keys and queries, cut off or not, more queries than keys and
// fewer, biases, strided operands; a second run of the one kernel gives
// the same bits (its turns and tickets are reset), and a block that would
// wait for a turn no earlier block gives stops the emulator (below).
TEST(CudaKernels, Bf16AttentionGradInOneKernel) {
  using C = AttentionCase;
  const std::vector<AttentionCase> cases = {
      C{3, 200, 200, 64, 64, true, C::None},      C{2, 256, 256, 48, 40, true, C::None},
      C{2, 150, 70, 64, 64, true, C::None},       C{2, 70, 150, 64, 32, true, C::None},
      C{6, 131, 131, 64, 64, true, C::QueryBias}, C{6, 129, 140, 32, 64, true, C::Padding},
  };
  for (bool strided : {false, true})
    for (bool sums : {true, false})
      checkAttention<bf16>(true, 0x1p-8, 1e-5, cases, strided, sums);
  for (const AttentionCase &c : cases) {
    SCOPED_TRACE(c.name());
    const ppcrt::lines::AttentionShape shape = c.shape();
    ASSERT_TRUE(ppcrt::attentiongrad::inOneKernel(true, true, c.batch, c.queries, c.keys, c.headDim,
                                                  c.valueDim));
    AttentionInputs in = ppc::test::attentionInputs(c, 11);
    std::vector<double> o, lse;
    ppc::test::referenceAttention(shape, in, o, lse, roundedOperand, nullptr);
    bf16 *q = deviceCopyAs<bf16>(in.q), *k = deviceCopyAs<bf16>(in.k),
         *v = deviceCopyAs<bf16>(in.v), *bias = deviceCopyAs<bf16>(in.bias),
         *dO = deviceCopyAs<bf16>(in.dO), *out = deviceCopyAs<bf16>(o);
    float *l = deviceCopyAs<float>(lse);
    float *sums = deviceOutput<float>(size_t(c.batch * c.queries * c.headDim));
    std::vector<std::vector<bf16>> runs;
    for (int run = 0; run < 2; ++run) {
      bf16 *dq = deviceOutput<bf16>(size_t(c.batch * c.queries * c.headDim)),
           *dk = deviceOutput<bf16>(size_t(c.batch * c.keys * c.headDim)),
           *dv = deviceOutput<bf16>(size_t(c.batch * c.keys * c.valueDim));
      ppcrt::cuda::attentionGrad<bf16, float>(q, k, v, bias, out, l, dO, dq, dk, dv, shape, sums);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      runs.push_back(hostCopy(dq, size_t(c.batch * c.queries * c.headDim)));
    }
    EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * sizeof(bf16)), 0);
  }
}

#ifdef PPCRT_CUDA_EMULATOR
// (The emulator only: on a GPU the block would wait for ever. These tests
// also run there, built by nvcc: bench/gpu/protocol.sh.)
TEST(CudaKernelsDeathTest, AttentionGradBlockWaitingForALaterTurnStops) {
  // A turn left set (as a kernel stopped midway would leave it): the block
  // that should add first finds another turn, which the emulator reports
  // instead of hanging as a GPU would.
  using C = AttentionCase;
  const C c{1, 130, 130, 64, 64, true, C::None};
  const ppcrt::lines::AttentionShape shape = c.shape();
  AttentionInputs in = ppc::test::attentionInputs(c, 3);
  auto run = [&] {
    const unsigned stale = 5;
    cudaMemcpyToSymbol(ppcrt::cuda::attentionTurns, &stale, sizeof(stale));
    bf16 *q = deviceCopyAs<bf16>(in.q), *k = deviceCopyAs<bf16>(in.k),
         *v = deviceCopyAs<bf16>(in.v), *dO = deviceCopyAs<bf16>(in.dO);
    float *l = deviceOutput<float>(size_t(c.queries));
    ppcrt::cuda::attentionGrad<bf16, float>(
        q, k, v, nullptr, dO, l, dO, deviceOutput<bf16>(size_t(c.queries * 64)),
        deviceOutput<bf16>(size_t(c.keys * 64)), deviceOutput<bf16>(size_t(c.keys * 64)), shape,
        deviceOutput<float>(size_t(c.queries * 64)));
    cudaDeviceSynchronize();
  };
  EXPECT_DEATH(run(),
               "attentionMmaGradKernel: a block waits for turn 0 of a tile of queries at turn 5");
}
#endif

// Operands that are strided views of larger tensors (the heads of a fused
// QKV projection, the output written into the heads-merged tensor), on the
// scalar kernels (f32) and the tensor-core ones (bf16): the same results,
// and nothing written between the rows.
TEST(CudaKernels, AttentionReadsAndWritesStridedRows) {
  using C = AttentionCase;
  std::vector<AttentionCase> wide = ppc::test::attentionCases();
  wide.push_back(C{6, 67, 67, 64, 64, true, C::QueryBias});
  for (bool gradients : {false, true}) {
    checkAttention<float>(gradients, 1e-5, 1e-5, ppc::test::attentionCases(), true);
    checkAttention<bf16>(gradients, 0x1p-8, 1e-5, wide, true);
  }
}

//===----------------------------------------------------------------------===//
// bf16
//===----------------------------------------------------------------------===//

__global__ void roundEach(float *values, int count) {
  for (int i = threadIdx.x; i < count; i += blockDim.x)
    values[i] = ppcrt::cuda::roundBf16(values[i]);
}

// Round to nearest, ties to even, as CUDA's __float2bfloat16 (bf16 keeps 7
// mantissa bits: one ulp at 1 is 2^-7). On the device, as kernels round.
TEST(CudaKernels, Bf16RoundsToNearestEven) {
  auto round = [](float x) {
    float *value = deviceCopy(std::vector<float>{x});
    PPCRT_LAUNCH(roundEach, 1, 32, 0, nullptr)(value, 1);
    float rounded = hostCopy(value, 1)[0];
    cudaFree(value);
    return rounded;
  };
  EXPECT_EQ(round(1.0f + 0x1p-8f), 1.0f);               // a tie: to the even 1
  EXPECT_EQ(round(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f); // a tie: to the even 1 + 2^-6
  EXPECT_EQ(round(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
  EXPECT_EQ(round(-1.0f - 0x1p-9f), -1.0f);
  EXPECT_EQ(round(0x1.fep127f), 0x1.fep127f); // bf16's largest finite value
  EXPECT_TRUE(std::isinf(round(FLT_MAX)));    // rounds past it: to infinity
  EXPECT_TRUE(std::isinf(round(INFINITY)));
  EXPECT_TRUE(std::isnan(round(NAN)));
  EXPECT_EQ(round(0x1p-130f), 0x1p-130f); // subnormals are kept (bf16 has float's exponent)
}

} // namespace
