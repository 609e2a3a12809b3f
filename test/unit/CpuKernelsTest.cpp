//===- CpuKernelsTest.cpp - library kernels of the CPU target -------------===//
//
// The kernels of runtime/ppcrt/CpuKernels.h that the end-to-end runs do not
// reach with every option, against a direct computation in double.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/CpuKernels.h"
#include "test/unit/ArgMaxReference.h"
#include "test/unit/AttentionReference.h"
#include "test/unit/LayerNormReference.h"

#include <gtest/gtest.h>
#include <omp.h>

extern "C" void openblas_set_num_threads(int);

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace {

/// What the kernels recorded through ppcrt::kernelFailed (defined below; in
/// an executable, the rank's runtime records it).
std::vector<std::string> &kernelFailures() {
  static std::vector<std::string> failures;
  return failures;
}

} // namespace

void ppcrt::kernelFailed(const char *message) { kernelFailures().push_back(message); }

namespace {

namespace lines = ppcrt::lines;

// The threads' shares of a loop (generated loops that share their kept
// innermost axis): contiguous, in the threads' order, covering it once, each
// bound a multiple of the alignment but the end.
TEST(CpuKernels, ThreadSharesCoverALoopInAlignedRuns) {
  for (int threads : {1, 2, 3, 7})
    for (int64_t size : {32, 100, 256, 1000, 3072})
      for (int64_t align : {1, 16}) {
        std::vector<std::pair<int64_t, int64_t>> shares(threads);
#pragma omp parallel num_threads(threads)
        shares[omp_get_thread_num()] = ppcrt::cpu::threadShare(size, align);
        SCOPED_TRACE(std::to_string(threads) + " threads, " + std::to_string(size) + " by " +
                     std::to_string(align));
        int64_t next = 0;
        for (auto [lo, hi] : shares) {
          EXPECT_EQ(lo, next);
          EXPECT_LE(lo, hi);
          EXPECT_EQ(lo % align, 0);
          EXPECT_TRUE(hi == size || hi % align == 0);
          next = hi;
        }
        EXPECT_EQ(next, size);
      }
}

// Every line's arg_max against a scan in double: largest and smallest, first
// and last of equal elements (the values repeat), along a middle axis.
TEST(CpuKernels, ArgMaxMatchesAScan) {
  const int64_t outer = 4, n = 9, inner = 3;
  std::vector<float> in = ppc::test::argMaxInput(outer * n * inner);
  std::vector<int64_t> out(outer * inner);
  for (bool largest : {true, false})
    for (bool last : {false, true}) {
      ppcrt::cpu::argMax(in.data(), out.data(), outer, n, inner, largest, last);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < inner; ++j)
          ASSERT_EQ(out[o * inner + j], ppc::test::argMaxOfLine(in, n, inner, o, j, largest, last))
              << "largest " << largest << " last " << last << " line " << o << "," << j;
    }
}

// NaN is the extreme either way, the first (last) of several NaNs.
TEST(CpuKernels, ArgMaxTakesNaNFirst) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> in = {1, nan, 5, nan, -2};
  int64_t out;
  ppcrt::cpu::argMax(in.data(), &out, 1, 5, 1, true, false);
  EXPECT_EQ(out, 1);
  ppcrt::cpu::argMax(in.data(), &out, 1, 5, 1, false, true);
  EXPECT_EQ(out, 3);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

using ppc::test::AttentionCase;
using ppc::test::AttentionInputs;

/// The values as T holds them (the kernel's inputs), in double.
template <typename T> std::vector<double> roundedTo(const std::vector<double> &values) {
  std::vector<double> rounded(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    rounded[i] = double(T(values[i]));
  return rounded;
}

template <typename T> std::vector<T> as(const std::vector<double> &values) {
  return std::vector<T>(values.begin(), values.end());
}

/// Every element within `relative` of the reference (of 1 near zero).
template <typename T>
::testing::AssertionResult allNear(const std::vector<T> &got, const std::vector<double> &want,
                                   double relative) {
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(double(got[i]) - want[i]) <= relative * std::max(1.0, std::fabs(want[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << double(got[i]) << " where "
                                           << want[i] << " was expected";
  return ::testing::AssertionSuccess();
}

/// attention (or attentionGrad, from the reference's o and lse) of every
/// case against the reference, in T; with `strided`, every operand read
/// and written in an interleaved layout (AttentionReference.h), whose gaps
/// must stay unwritten.
template <typename T>
void checkAttention(bool gradients, double relative,
                    const std::vector<AttentionCase> &cases = ppc::test::attentionCases(),
                    bool strided = false) {
  for (const AttentionCase &c : cases) {
    if (gradients && !ppc::test::gradientChecked(c))
      continue;
    SCOPED_TRACE(c.name() + (sizeof(T) == 4 ? " f32" : " f64") + (strided ? " strided" : ""));
    lines::AttentionShape shape = strided ? ppc::test::interleavedShape(c) : c.shape();
    const lines::AttentionShape dense = shape.resolved();
    AttentionInputs in = ppc::test::attentionInputs(c, 7);
    for (std::vector<double> *values : {&in.q, &in.k, &in.v, &in.bias, &in.dO})
      *values = roundedTo<T>(*values);
    const int64_t batch = c.batch;
    // An operand as the kernel takes it, and back.
    auto place = [&](const std::vector<double> &values, const lines::AttentionRows &rows,
                     int64_t count, int64_t size) {
      return as<T>(ppc::test::scatterRows(values, rows, batch, count, size));
    };
    auto output = [&](const lines::AttentionRows &rows, int64_t count, int64_t size) {
      return std::vector<T>(ppc::test::spanOf(rows, batch, count, size),
                            std::numeric_limits<T>::quiet_NaN());
    };
    auto expectNear = [&](const std::vector<T> &got, const lines::AttentionRows &rows,
                          int64_t count, int64_t size, const std::vector<double> &want,
                          const char *what) {
      bool untouched = false;
      std::vector<double> values = ppc::test::gatherRows(
          std::vector<double>(got.begin(), got.end()), rows, batch, count, size, untouched);
      EXPECT_TRUE(allNear(values, want, relative)) << what;
      EXPECT_TRUE(untouched) << what << " is written outside its rows";
    };
    std::vector<double> o, lse, dq, dk, dv;
    ppc::test::referenceAttention(shape, in, o, lse);
    std::vector<T> q = place(in.q, dense.q, c.queries, c.headDim),
                   k = place(in.k, dense.k, c.keys, c.headDim),
                   v = place(in.v, dense.v, c.keys, c.valueDim),
                   dO = place(in.dO, dense.dO, c.queries, c.valueDim), bias = as<T>(in.bias),
                   gotO = output(dense.o, c.queries, c.valueDim), gotLse(lse.size());
    const T *biasData = bias.empty() ? nullptr : bias.data();
    ppcrt::cpu::attention<T, T>(q.data(), k.data(), v.data(), biasData, gotO.data(), gotLse.data(),
                                shape);
    if (!gradients) {
      expectNear(gotO, dense.o, c.queries, c.valueDim, o, "o");
      EXPECT_TRUE(allNear(gotLse, lse, relative)) << "lse";
      continue;
    }
    o = roundedTo<T>(o);
    lse = roundedTo<T>(lse);
    ppc::test::referenceAttentionGrad(shape, in, o, lse, dq, dk, dv);
    // NaN where a kernel leaves an element unwritten.
    std::vector<T> oT = place(o, dense.o, c.queries, c.valueDim), lseT = as<T>(lse),
                   gotDq = output(dense.dq, c.queries, c.headDim),
                   gotDk = output(dense.dk, c.keys, c.headDim),
                   gotDv = output(dense.dv, c.keys, c.valueDim);
    ppcrt::cpu::attentionGrad<T, T>(q.data(), k.data(), v.data(), biasData, oT.data(), lseT.data(),
                                    dO.data(), gotDq.data(), gotDk.data(), gotDv.data(), shape);
    expectNear(gotDq, dense.dq, c.queries, c.headDim, dq, "dq");
    expectNear(gotDk, dense.dk, c.keys, c.headDim, dk, "dk");
    expectNear(gotDv, dense.dv, c.keys, c.valueDim, dv, "dv");
  }
}

// The reference's gradient formulas (FlashAttention's backward, which the
// kernels compute) against central differences of the loss sum(o * dO) in
// double, for every element of q, k and v: causal with fewer and more
// queries than keys, a bias per query broadcast over heads, a padding mask.
TEST(CpuKernels, AttentionReferenceMatchesFiniteDifferences) {
  for (AttentionCase c : {AttentionCase{2, 5, 7, 3, 4, true, AttentionCase::QueryBias},
                          AttentionCase{2, 7, 4, 3, 3, true, AttentionCase::None},
                          AttentionCase{4, 6, 5, 3, 2, false, AttentionCase::Padding}}) {
    SCOPED_TRACE(c.name());
    lines::AttentionShape shape = c.shape();
    AttentionInputs in = ppc::test::attentionInputs(c, 11);
    auto loss = [&] {
      std::vector<double> o, lse;
      ppc::test::referenceAttention(shape, in, o, lse);
      double sum = 0;
      for (size_t i = 0; i < o.size(); ++i)
        sum += o[i] * in.dO[i];
      return sum;
    };
    std::vector<double> o, lse, dq, dk, dv;
    ppc::test::referenceAttention(shape, in, o, lse);
    ppc::test::referenceAttentionGrad(shape, in, o, lse, dq, dk, dv);
    const double step = 1e-5;
    for (auto [values, grad, name] :
         {std::tuple{&in.q, &dq, "dq"}, std::tuple{&in.k, &dk, "dk"}, std::tuple{&in.v, &dv, "dv"}})
      for (size_t i = 0; i < values->size(); ++i) {
        double x = (*values)[i];
        (*values)[i] = x + step;
        double up = loss();
        (*values)[i] = x - step;
        double down = loss();
        (*values)[i] = x;
        ASSERT_NEAR((*grad)[i], (up - down) / (2 * step), 1e-8) << name << " element " << i;
      }
  }
}

// f32 within 1e-5 and f64 within 1e-12 of the reference (relative; of 1 near
// zero): tiles of queries and keys cut off on every side, causal, biases.
TEST(CpuKernels, AttentionMatchesReference) {
  checkAttention<float>(false, 1e-5);
  checkAttention<double>(false, 1e-12);
}

// dq, dk and dv (written over NaN) likewise.
TEST(CpuKernels, AttentionGradMatchesReference) {
  checkAttention<float>(true, 1e-5);
  checkAttention<double>(true, 1e-12);
}

// Operands that are strided views of larger tensors (the heads of a fused
// QKV projection, the output written into the heads-merged tensor): the
// same results, and nothing written between the rows.
TEST(CpuKernels, AttentionReadsAndWritesStridedRows) {
  for (bool gradients : {false, true}) {
    checkAttention<float>(gradients, 1e-5, ppc::test::attentionCases(), true);
    checkAttention<double>(gradients, 1e-12, ppc::test::attentionCases(), true);
  }
}

/// Cases of several blocks of kAttentionRows queries (the last one cut
/// off), causal or not, with biases, fewer and more queries than keys.
std::vector<AttentionCase> longAttentionCases() {
  using C = AttentionCase;
  return {C{4, 150, 150, 64, 48, true, C::None}, C{2, 130, 200, 32, 40, true, C::Padding},
          C{4, 200, 70, 24, 64, true, C::QueryBias}, C{2, 129, 97, 40, 24, false, C::Padding}};
}

// Several blocks of queries per head: forward and gradients against the
// reference.
TEST(CpuKernels, AttentionOfSeveralBlocksMatchesReference) {
  checkAttention<float>(false, 1e-5, longAttentionCases());
  checkAttention<double>(false, 1e-12, longAttentionCases());
  checkAttention<float>(true, 1e-5, longAttentionCases());
  checkAttention<double>(true, 1e-12, longAttentionCases());
}

/// attention and attentionGrad of `c` on `threads` threads: o, lse, dq, dk
/// and dv one after another.
template <typename T> std::vector<T> attentionOnThreads(const AttentionCase &c, int threads) {
  lines::AttentionShape shape = c.shape();
  AttentionInputs in = ppc::test::attentionInputs(c, 5);
  std::vector<T> q = as<T>(in.q), k = as<T>(in.k), v = as<T>(in.v), bias = as<T>(in.bias),
                 dO = as<T>(in.dO);
  const T *biasData = bias.empty() ? nullptr : bias.data();
  std::vector<T> o(dO.size()), lse(c.batch * c.queries), dq(q.size()), dk(k.size()), dv(v.size());
  omp_set_num_threads(threads);
  ppcrt::cpu::attention<T, T>(q.data(), k.data(), v.data(), biasData, o.data(), lse.data(), shape);
  ppcrt::cpu::attentionGrad<T, T>(q.data(), k.data(), v.data(), biasData, o.data(), lse.data(),
                                  dO.data(), dq.data(), dk.data(), dv.data(), shape);
  omp_set_num_threads(omp_get_num_procs());
  std::vector<T> all;
  for (const std::vector<T> *part : {&o, &lse, &dq, &dk, &dv})
    all.insert(all.end(), part->begin(), part->end());
  return all;
}

// The attention kernels on three threads: the bits of one thread (a task's
// results, and a head's sums of dk and dv, are one thread's, in order).
TEST(CpuKernels, AttentionOnThreadsIsTheOneThreadAttention) {
  openblas_set_num_threads(1); // as CpuDevice runs it
  for (const AttentionCase &c : longAttentionCases()) {
    SCOPED_TRACE(c.name());
    std::vector<float> one = attentionOnThreads<float>(c, 1),
                       three = attentionOnThreads<float>(c, 3);
    ASSERT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)), 0);
    std::vector<double> oneD = attentionOnThreads<double>(c, 1),
                        threeD = attentionOnThreads<double>(c, 3);
    ASSERT_EQ(std::memcmp(oneD.data(), threeD.data(), oneD.size() * sizeof(double)), 0);
  }
}

// CpuGemm.cpp's GEMMs cut into panels of C over the OpenMP threads: the
// same bits on every run with as many threads, and within rounding of a
// product in double; every transposition, C cut by rows and by columns,
// panels that do not divide evenly. (Not always the bits of one thread:
// OpenBLAS's AVX-512 kernels compute an edge of C, 33 columns here, by a
// method they pick from the other dimension's size, which a panel changes.)
template <typename T> void checkSplitGemm(double tolerance) {
  struct Shape {
    int64_t m, n, k;
  };
  for (Shape shape : {Shape{300, 200, 150}, Shape{70, 1000, 64}, Shape{1000, 33, 80}}) {
    auto [m, n, k] = shape;
    std::vector<T> a(m * k), b(k * n);
    for (size_t i = 0; i < a.size(); ++i)
      a[i] = T(std::sin(0.37 * double(i)));
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = T(std::cos(0.11 * double(i)));
    for (bool transA : {false, true})
      for (bool transB : {false, true}) {
        int64_t lda = transA ? m : k, ldb = transB ? k : n;
        std::vector<T> one(m * n), split(m * n), again(m * n);
        omp_set_num_threads(1);
        ppcrt::cpu::gemm(transA, transB, m, n, k, a.data(), lda, b.data(), ldb, one.data());
        omp_set_num_threads(3);
        ppcrt::cpu::gemm(transA, transB, m, n, k, a.data(), lda, b.data(), ldb, split.data());
        ppcrt::cpu::gemm(transA, transB, m, n, k, a.data(), lda, b.data(), ldb, again.data());
        omp_set_num_threads(omp_get_num_procs());
        std::string where = "m " + std::to_string(m) + " n " + std::to_string(n) + " transA " +
                            std::to_string(transA) + " transB " + std::to_string(transB);
        ASSERT_EQ(std::memcmp(split.data(), again.data(), split.size() * sizeof(T)), 0) << where;
        double worst = 0, worstOne = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double exact = 0, magnitude = 0;
            for (int64_t p = 0; p < k; ++p) {
              double term = double(transA ? a[p * lda + i] : a[i * lda + p]) *
                            double(transB ? b[j * ldb + p] : b[p * ldb + j]);
              exact += term;
              magnitude += std::fabs(term);
            }
            worst = std::max(worst, std::fabs(double(split[i * n + j]) - exact) / magnitude);
            worstOne = std::max(worstOne, std::fabs(double(one[i * n + j]) - exact) / magnitude);
          }
        EXPECT_LE(worst, tolerance) << where;
        EXPECT_LE(worstOne, tolerance) << where;
      }
  }
}

TEST(CpuKernels, SplitGemmIsDeterministicAndWithinRounding) {
  openblas_set_num_threads(1); // as CpuDevice runs it
  checkSplitGemm<float>(1e-5);
  checkSplitGemm<double>(1e-13);
}

// gemmAccumulate (c += op(a) op(b)) is gemm's product added to c, bit for
// bit: attention's backward sums each block's dk and dv terms with it, as
// it summed them by hand.
template <typename T> void checkGemmAccumulate() {
  const int64_t m = 200, n = 64, k = 48;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<T> uniform(-1, 1);
  std::vector<T> a(k * m), b(k * n), c(m * n), product(m * n);
  for (std::vector<T> *v : {&a, &b, &c})
    for (T &x : *v)
      x = uniform(rng);
  std::vector<T> sum = c;
  ppcrt::cpu::gemm(true, false, m, n, k, a.data(), m, b.data(), n, product.data());
  for (int64_t e = 0; e < m * n; ++e)
    sum[e] += product[e];
  ppcrt::cpu::gemmAccumulate(true, false, m, n, k, a.data(), m, b.data(), n, c.data());
  EXPECT_EQ(c, sum);
}

TEST(CpuKernels, GemmAccumulateAddsTheProduct) {
  openblas_set_num_threads(1);
  checkGemmAccumulate<float>();
  checkGemmAccumulate<double>();
}

// reduce on several threads: the bits of one thread (each result combines
// its elements in row-major order), and the sums of a scan in double; the
// threads' share is the outermost kept dimension, inner or not.
TEST(CpuKernels, ReduceOnThreadsIsTheOneThreadReduce) {
  struct Case {
    int rank;
    int64_t shape[3];
    uint32_t mask;
  };
  for (Case c : {Case{2, {1024, 300}, 0b01}, Case{2, {300, 1024}, 0b10},
                 Case{3, {64, 50, 40}, 0b101}, Case{3, {40, 64, 50}, 0b010}}) {
    int64_t shape[ppcrt::kMaxRank] = {c.shape[0], c.shape[1], c.shape[2]};
    int64_t total = shape[0] * shape[1] * (c.rank == 3 ? shape[2] : 1);
    std::vector<float> in(total);
    for (int64_t i = 0; i < total; ++i)
      in[i] = float(std::sin(0.7 * double(i)));
    int64_t outSize = 1;
    for (int d = 0; d < c.rank; ++d)
      if (!(c.mask >> d & 1))
        outSize *= shape[d];
    std::vector<float> one(outSize), three(outSize);
    omp_set_num_threads(1);
    ppcrt::cpu::reduce<ppcrt::cpu::ReduceKind::Sum>(in.data(), one.data(), c.rank, shape, c.mask);
    omp_set_num_threads(3);
    ppcrt::cpu::reduce<ppcrt::cpu::ReduceKind::Sum>(in.data(), three.data(), c.rank, shape, c.mask);
    omp_set_num_threads(omp_get_num_procs());
    ASSERT_EQ(std::memcmp(one.data(), three.data(), outSize * sizeof(float)), 0)
        << "mask " << c.mask;
    std::vector<double> exact(outSize, 0.0);
    for (int64_t i = 0; i < total; ++i) {
      int64_t rest = i, at = 0, stride = 1;
      for (int d = c.rank - 1; d >= 0; --d) {
        int64_t coord = rest % shape[d];
        rest /= shape[d];
        if (!(c.mask >> d & 1)) {
          at += coord * stride;
          stride *= shape[d];
        }
      }
      exact[at] += in[i];
    }
    for (int64_t j = 0; j < outSize; ++j)
      ASSERT_NEAR(three[j], exact[j], 1e-5 * (1 + std::fabs(exact[j]))) << "mask " << c.mask;
  }
}

// layerNormGrad's dx, mean and rstd against central differences of the
// forward (LayerNormReference.h), with the scale whole and broadcast, in
// float and double; uncentered (rms_norm_grad) with no mean to write.
template <typename T, bool Centered> void checkLayerNormGrad(double tolerance) {
  const int64_t outer = 5, size = 96;
  const double epsilon = 1e-5;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> uniform(-2, 3);
  std::vector<T> x(outer * size), dy(outer * size), scale(size);
  for (T &v : x)
    v = T(uniform(rng));
  for (T &v : dy)
    v = T(uniform(rng));
  for (T &v : scale)
    v = T(uniform(rng));
  for (bool broadcast : {false, true}) {
    std::vector<double> wideX(x.begin(), x.end()), wideDy(dy.begin(), dy.end()),
        wideScale(scale.begin(), broadcast ? scale.begin() + 1 : scale.end());
    auto ref =
        ppc::test::layerNormGradReference(wideX, wideScale, wideDy, outer, size, epsilon, Centered);
    std::vector<T> dx(x.size(), T(NAN));
    using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
    std::vector<S> mean(outer, S(NAN)), rstd(outer, S(NAN));
    ppcrt::cpu::layerNormGrad<T, S, Centered>(x.data(), scale.data(), broadcast ? 0 : 1, dy.data(),
                                              dx.data(), nullptr, Centered ? mean.data() : nullptr,
                                              rstd.data(), outer, size, epsilon);
    // With an addend (the residual stream's gradient): dx + addend, as
    // ppc.add rounds it, bit for bit.
    std::vector<T> sum(x.size(), T(NAN));
    ppcrt::cpu::layerNormGrad<T, S, Centered>(
        x.data(), scale.data(), broadcast ? 0 : 1, dy.data(), sum.data(), x.data(),
        Centered ? mean.data() : nullptr, rstd.data(), outer, size, epsilon);
    for (int64_t i = 0; i < outer * size; ++i)
      ASSERT_EQ(sum[i], T(double(dx[i]) + double(x[i]))) << "element " << i;
    double scaleOfDx = 0;
    for (double v : ref.dx)
      scaleOfDx = std::max(scaleOfDx, std::fabs(v));
    for (int64_t i = 0; i < outer * size; ++i)
      ASSERT_NEAR(double(dx[i]), ref.dx[i], tolerance * scaleOfDx)
          << "broadcast " << broadcast << " element " << i;
    for (int64_t o = 0; o < outer; ++o) {
      if (Centered)
        EXPECT_NEAR(double(mean[o]), ref.mean[o], tolerance * (1 + std::fabs(ref.mean[o])));
      else
        EXPECT_TRUE(std::isnan(double(mean[o])));
      EXPECT_NEAR(double(rstd[o]), ref.rstd[o], tolerance * ref.rstd[o]);
    }
  }
}

// layerNormGrad with sums over its rows (NormSums.h): dx, mean and rstd bit
// for bit those without; each sum against a loop in double over what it
// read and wrote, more rows than its 64 chunks and fewer, centered and
// not, with an addend and sums asked for alone.
template <typename T, bool Centered>
void checkNormGradSums(int64_t outer, int64_t size, bool addend, unsigned wanted) {
  SCOPED_TRACE(testing::Message() << "outer " << outer << " size " << size << " wanted " << wanted);
  using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const double epsilon = 1e-5;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> uniform(-2, 3);
  std::vector<T> x(outer * size), dy(outer * size), scale(size), add(outer * size);
  for (std::vector<T> *v : {&x, &dy, &scale, &add})
    for (T &e : *v)
      e = T(uniform(rng));
  const T *addends = addend ? add.data() : nullptr;
  std::vector<T> plain(x.size()), dx(x.size());
  std::vector<S> plainMean(outer), plainRstd(outer), mean(outer), rstd(outer);
  ppcrt::cpu::layerNormGrad<T, S, Centered>(x.data(), scale.data(), 1, dy.data(), plain.data(),
                                            addends, plainMean.data(), plainRstd.data(), outer,
                                            size, epsilon);
  std::vector<S> resultGrad(size, S(NAN)), scaleGrad(size, S(NAN));
  std::vector<T> inputGrad(size, T(NAN));
  ppcrt::NormGradSums<S, S, T> sums{wanted & 1 ? resultGrad.data() : nullptr,
                                    wanted & 2 ? scaleGrad.data() : nullptr,
                                    wanted & 4 ? inputGrad.data() : nullptr};
  ppcrt::cpu::layerNormGrad<T, S, Centered>(x.data(), scale.data(), 1, dy.data(), dx.data(),
                                            addends, mean.data(), rstd.data(), outer, size, epsilon,
                                            sums);
  ASSERT_EQ(dx, plain);
  EXPECT_EQ(rstd, plainRstd);
  if (Centered) {
    EXPECT_EQ(mean, plainMean);
  }
  for (int64_t c = 0; c < size; ++c) {
    double sum[3] = {0, 0, 0}, magnitude[3] = {0, 0, 0};
    for (int64_t o = 0; o < outer; ++o) {
      int64_t at = o * size + c;
      double g = double(dy[at]),
             xhat = (double(x[at]) - (Centered ? double(mean[o]) : 0.0)) * double(rstd[o]);
      double terms[3] = {g, g * xhat, double(dx[at])};
      for (int k = 0; k < 3; ++k) {
        sum[k] += terms[k];
        magnitude[k] += std::fabs(terms[k]);
      }
    }
    // Rounded once to its type, past the rounding of the statistics.
    double ulp = std::is_same_v<T, double> ? 1e-15 : 1e-7;
    const double got[3] = {double(resultGrad[c]), double(scaleGrad[c]), double(inputGrad[c])};
    for (int k = 0; k < 3; ++k) {
      if (wanted >> k & 1) {
        ASSERT_NEAR(got[k], sum[k], ulp * magnitude[k]) << "sum " << k << ", column " << c;
      } else {
        ASSERT_TRUE(std::isnan(got[k])) << "sum " << k << " written, column " << c;
      }
    }
  }
}

TEST(CpuKernels, NormGradSumsAddTheRowsTheKernelReadsAndWrites) {
  checkNormGradSums<float, true>(300, 96, /*addend=*/true, 7);
  checkNormGradSums<float, true>(5, 40, /*addend=*/false, 2);
  checkNormGradSums<double, true>(130, 17, /*addend=*/true, 5);
  checkNormGradSums<float, false>(70, 33, /*addend=*/false, 6);
}

TEST(CpuKernels, LayerNormGradMatchesDifferencesOfTheForward) {
  checkLayerNormGrad<float, true>(1e-5);
  checkLayerNormGrad<double, true>(1e-7);
}

TEST(CpuKernels, RmsNormGradMatchesDifferencesOfTheForward) {
  checkLayerNormGrad<float, false>(1e-5);
  checkLayerNormGrad<double, false>(1e-7);
}

// Rotary embedding's rotated halves: rows of 8, the second half of each
// (pieces of 4, read 8 apart in place) then the first, concatenated.
TEST(CpuKernels, ConcatReadsPiecesAPitchApart) {
  const int64_t rows = 5, width = 8, half = 4;
  std::vector<int32_t> x(rows * width), out(x.size(), -1);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = int32_t(i) * 7 + 1;
  const int64_t e = sizeof(int32_t);
  ppcrt::cpu::concatPart(out.data(), x.data() + half, rows, width * e, 0, half * e, width * e);
  ppcrt::cpu::concatPart(out.data(), x.data(), rows, width * e, half * e, half * e, width * e);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j)
      ASSERT_EQ(out[r * width + j], x[r * width + (j + half) % width]) << r << "," << j;
}

// log_softmax reading a window of wider rows in place (the padded
// vocabulary's logits): columns 5..205 of rows of 256, against the dense
// rows' result.
TEST(CpuKernels, SoftmaxReadsAWindowOfWiderRows) {
  const int64_t rows = 4, size = 200, stride = 256, offset = 5;
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> uniform(-6, 6);
  std::vector<float> wide(rows * stride), dense;
  for (float &v : wide)
    v = uniform(rng);
  for (int64_t r = 0; r < rows; ++r)
    dense.insert(dense.end(), wide.begin() + r * stride + offset,
                 wide.begin() + r * stride + offset + size);
  std::vector<float> fromWindow(rows * size, NAN), fromDense(rows * size, NAN);
  ppcrt::cpu::softmax<true>(wide.data() + offset, fromWindow.data(), rows, size, 1, stride);
  ppcrt::cpu::softmax<true>(dense.data(), fromDense.data(), rows, size, 1, size);
  EXPECT_EQ(fromWindow, fromDense);
  EXPECT_FALSE(std::isnan(fromDense.front()));
}

// log_sum_exp of a window of wider rows (as the softmax reads it) is the
// shift of the rows' log_softmax; along a middle axis (inner 3) against a
// direct computation; a row of -inf gives -inf.
TEST(CpuKernels, LogSumExpIsTheLogSoftmaxsShift) {
  const int64_t rows = 4, size = 200, stride = 256, offset = 5;
  std::mt19937_64 rng(10);
  std::uniform_real_distribution<float> uniform(-6, 6);
  std::vector<float> wide(rows * stride);
  for (float &v : wide)
    v = uniform(rng);
  const float inf = std::numeric_limits<float>::infinity();
  std::fill_n(wide.begin() + 3 * stride + offset, size, -inf);
  std::vector<float> lse(rows, NAN), logSoftmax(rows * size, NAN);
  ppcrt::cpu::logSumExp(wide.data() + offset, lse.data(), rows, size, 1, stride);
  ppcrt::cpu::softmax<true>(wide.data() + offset, logSoftmax.data(), 3, size, 1, stride);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < size; ++c)
      ASSERT_NEAR(wide[r * stride + offset + c] - lse[r], logSoftmax[r * size + c], 1e-5)
          << r << "," << c;
  EXPECT_EQ(lse[3], -inf);

  const int64_t outer = 2, middle = 5, inner = 3;
  std::vector<double> x(outer * middle * inner), columns(outer * inner, NAN);
  for (double &v : x)
    v = uniform(rng);
  ppcrt::cpu::logSumExp(x.data(), columns.data(), outer, middle, inner, middle * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < middle; ++k)
        sum += std::exp(x[(o * middle + k) * inner + j]);
      EXPECT_NEAR(columns[o * inner + j], std::log(sum), 1e-12) << o << "," << j;
    }
}

// rotary reading x as [B, H, T, hd] heads of a [B, T, H, hd] projection
// (strided rows), the tables [T, hd] broadcast over the heads, writing its
// result back in the [B, T, H, hd] layout: against the formula in double;
// transposed, the adjoint (<A x, g> = <x, A^T g>).
TEST(CpuKernels, RotaryReadsAndWritesStridedRows) {
  const int64_t B = 2, H = 3, T = 5, hd = 8, half = hd / 2;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> uniform(-2, 2);
  std::vector<double> x(B * T * H * hd), g(x.size()), cos(T * hd), sin(T * hd);
  for (auto *v : {&x, &g, &cos, &sin})
    for (double &e : *v)
      e = uniform(rng);
  // Head n = b * H + h, row t: at b * T*H*hd + h * hd + t * H*hd.
  ppcrt::lines::AttentionRows heads{H, T * H * hd, hd, H * hd}, table{B * H, 0, 0, hd};
  std::vector<double> y(x.size(), NAN), dx(x.size(), NAN);
  ppcrt::cpu::rotary(x.data(), cos.data(), sin.data(), y.data(),
                     ppcrt::lines::RotaryShape{B * H, T, hd, false, heads, table, table, heads});
  ppcrt::cpu::rotary(g.data(), cos.data(), sin.data(), dx.data(),
                     ppcrt::lines::RotaryShape{B * H, T, hd, true, heads, table, table, heads});
  double forward = 0, backward = 0;
  for (int64_t n = 0; n < B * H; ++n)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < hd; ++i) {
        int64_t at = heads.at(n, t) + i, partner = heads.at(n, t) + (i + half) % hd;
        double sign = i < half ? -1 : 1;
        double expected = x[at] * cos[t * hd + i] + sign * x[partner] * sin[t * hd + i];
        ASSERT_NEAR(y[at], expected, 1e-12) << n << "," << t << "," << i;
        forward += y[at] * g[at];
        backward += x[at] * dx[at];
      }
  EXPECT_NEAR(forward, backward, 1e-9);
}

// nll_loss reading a window of wider rows and a per-row shift (the
// log-softmax as x - log_sum_exp, ppc-split-log-softmax): the same loss,
// bit for bit, as reading the dense rows of x - shift rounded to float; an
// ignored target and a target out of range as without a shift.
TEST(CpuKernels, NllLossReadsAShiftedWindowOfWiderRows) {
  const int64_t rows = 6, classes = 50, stride = 64, offset = 2;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> uniform(-6, 6);
  std::vector<float> wide(rows * stride), shift(rows), shifted(rows * classes);
  for (float &v : wide)
    v = uniform(rng);
  for (float &v : shift)
    v = uniform(rng) + 10;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < classes; ++c)
      shifted[r * classes + c] = wide[r * stride + offset + c] - shift[r];
  std::vector<int64_t> target = {3, 49, -100, 0, 17, 17};
  using ppcrt::cpu::LossReduction;
  for (LossReduction reduction : {LossReduction::Mean, LossReduction::Sum, LossReduction::None}) {
    std::vector<float> fromWindow(rows, NAN), fromDense(rows, NAN);
    ppcrt::cpu::nllLoss(wide.data() + offset, stride, shift.data(), target.data(),
                        static_cast<const float *>(nullptr), fromWindow.data(), rows, classes, 1,
                        reduction, true, -100, "nll");
    ppcrt::cpu::nllLoss(shifted.data(), classes, static_cast<const float *>(nullptr), target.data(),
                        static_cast<const float *>(nullptr), fromDense.data(), rows, classes, 1,
                        reduction, true, -100, "nll");
    int64_t written = reduction == LossReduction::None ? rows : 1;
    for (int64_t i = 0; i < written; ++i)
      EXPECT_EQ(fromWindow[i], fromDense[i]) << i;
  }
  float sum = NAN;
  ppcrt::cpu::nllLoss(wide.data() + offset, stride, shift.data(), target.data(),
                      static_cast<const float *>(nullptr), &sum, rows, classes, 1,
                      LossReduction::Sum, true, -100, "nll");
  double want = 0;
  for (int64_t r : {0, 1, 3, 4, 5})
    want -= double(wide[r * stride + offset + target[r]] - shift[r]);
  EXPECT_NEAR(sum, want, 1e-5);

  // Without an ignore index, -100 is a class out of range: recorded.
  kernelFailures().clear();
  ppcrt::cpu::nllLoss(wide.data() + offset, stride, shift.data(), target.data(),
                      static_cast<const float *>(nullptr), &sum, rows, classes, 1,
                      LossReduction::Sum, false, 0, "nll of row 2");
  EXPECT_EQ(kernelFailures(), std::vector<std::string>{"nll of row 2"});
}

} // namespace
