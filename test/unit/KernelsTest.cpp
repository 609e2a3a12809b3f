//===- KernelsTest.cpp - the reference executor's kernels -----------------===//
//
// Each test parses a small function, runs it with the executor and compares
// with values written by hand or computed by a direct loop in the test.
//
//===----------------------------------------------------------------------===//

#include "executor/Interpreter.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FormatVariadic.h"

#include "test/unit/TestTensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>

using namespace ppc;
using ppc::test::expectValues;
using ppc::test::makeTensor;

namespace {

Tensor makeInts(DType dtype, llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> values) {
  Tensor tensor(dtype, shape);
  EXPECT_EQ(tensor.numElements(), static_cast<int64_t>(values.size()));
  for (auto [i, v] : llvm::enumerate(values))
    tensor.setInt(i, v);
  return tensor;
}

/// 0, 1, 2, ... as f32 (or `dtype`).
Tensor iota(llvm::ArrayRef<int64_t> shape, DType dtype = DType::F32) {
  Tensor tensor(dtype, shape);
  for (int64_t i = 0; i < tensor.numElements(); ++i)
    tensor.setDouble(i, i);
  return tensor;
}

void expectInts(const Tensor &actual, llvm::ArrayRef<int64_t> shape,
                llvm::ArrayRef<int64_t> expected) {
  ASSERT_EQ(actual.shape(), shape);
  ASSERT_EQ(actual.ints().size(), expected.size());
  for (auto [i, e] : llvm::enumerate(expected))
    EXPECT_EQ(actual.ints()[i], e) << "element " << i;
}

double f32(double value) { return static_cast<float>(value); }

class KernelsTest : public ::testing::Test {
protected:
  KernelsTest() { context.loadDialect<PpcDialect, mlir::func::FuncDialect>(); }

  /// Parses `source`, a module holding one function, and runs the function;
  /// diagnostics are collected in `errors`.
  mlir::FailureOr<llvm::SmallVector<Tensor>>
  run(llvm::StringRef source, llvm::ArrayRef<Tensor> arguments, ExecOptions options = {}) {
    module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    if (!module) {
      ADD_FAILURE() << "cannot parse:\n" << source.str() << "\n" << errors;
      return mlir::failure();
    }
    return runFunction(*module->getOps<mlir::func::FuncOp>().begin(), arguments, options);
  }

  /// Runs a function that must succeed and returns its results.
  llvm::SmallVector<Tensor> runOk(llvm::StringRef source, llvm::ArrayRef<Tensor> arguments,
                                  ExecOptions options = {}) {
    auto results = run(source, arguments, options);
    if (failed(results)) {
      ADD_FAILURE() << "run failed: " << errors;
      return {};
    }
    return *results;
  }

  /// The one result of a function that must succeed.
  Tensor runOne(llvm::StringRef source, llvm::ArrayRef<Tensor> arguments,
                ExecOptions options = {}) {
    llvm::SmallVector<Tensor> results = runOk(source, arguments, options);
    if (results.size() != 1) {
      ADD_FAILURE() << "expected one result, got " << results.size();
      return Tensor();
    }
    return results.front();
  }

  mlir::MLIRContext context;
  std::string errors;
  mlir::ScopedDiagnosticHandler handler{&context, [this](mlir::Diagnostic &d) {
                                          errors += d.str() + "\n";
                                          return mlir::success();
                                        }};
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

//===----------------------------------------------------------------------===//
// Constants, casts and f64 mode
//===----------------------------------------------------------------------===//

TEST_F(KernelsTest, ConstantKeepsItsDTypeOrPromotesFloatsInF64Mode) {
  const char *source = R"mlir(
    func.func @main() -> (tensor<2xf32>, tensor<3xi64>) {
      %0 = ppc.constant dense<[0.1, -2.5]> : tensor<2xf32>
      %1 = ppc.constant dense<[1, -2, 3]> : tensor<3xi64>
      return %0, %1 : tensor<2xf32>, tensor<3xi64>
    })mlir";
  for (bool f64 : {false, true}) {
    llvm::SmallVector<Tensor> results = runOk(source, {}, ExecOptions{f64});
    ASSERT_EQ(results.size(), 2u);
    EXPECT_EQ(results[0].dtype(), f64 ? DType::F64 : DType::F32);
    expectValues(results[0], {2}, {f32(0.1), -2.5});
    EXPECT_EQ(results[1].dtype(), DType::I64);
    expectInts(results[1], {3}, {1, -2, 3});
  }
}

TEST_F(KernelsTest, CastTruncatesFloatsTowardZeroAndTestsNonzeroForBool) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<5xf32>, %i: tensor<3xi64>)
        -> (tensor<5xi64>, tensor<3xi1>, tensor<3xf32>) {
      %0 = ppc.cast %x : tensor<5xf32> -> tensor<5xi64>
      %1 = ppc.cast %i : tensor<3xi64> -> tensor<3xi1>
      %2 = ppc.cast %i : tensor<3xi64> -> tensor<3xf32>
      return %0, %1, %2 : tensor<5xi64>, tensor<3xi1>, tensor<3xf32>
    })mlir";
  llvm::SmallVector<Tensor> results =
      runOk(source, {makeTensor(DType::F32, {5}, {-2.75, 2.75, -0.5, 3.5, 0}),
                     makeInts(DType::I64, {3}, {0, 5, -1})});
  ASSERT_EQ(results.size(), 3u);
  expectInts(results[0], {5}, {-2, 2, 0, 3, 0});
  EXPECT_EQ(results[1].dtype(), DType::I1);
  expectInts(results[1], {3}, {0, 1, 1});
  expectValues(results[2], {3}, {0, 5, -1});
}

TEST_F(KernelsTest, F64ModeKeepsDoublePrecisionWhereF32Rounds) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<f32>, %y: tensor<f32>) -> tensor<f32> {
      %0 = ppc.div %x, %y : (tensor<f32>, tensor<f32>) -> tensor<f32>
      return %0 : tensor<f32>
    })mlir";
  Tensor f32Result =
      runOne(source, {makeTensor(DType::F32, {}, {1}), makeTensor(DType::F32, {}, {3})});
  EXPECT_EQ(f32Result.dtype(), DType::F32);
  expectValues(f32Result, {}, {f32(1.0 / 3.0)});

  Tensor f64Result =
      runOne(source, {makeTensor(DType::F64, {}, {1}), makeTensor(DType::F64, {}, {3})},
             ExecOptions{/*f64=*/true});
  EXPECT_EQ(f64Result.dtype(), DType::F64);
  expectValues(f64Result, {}, {1.0 / 3.0});
  EXPECT_NE(f32(1.0 / 3.0), 1.0 / 3.0);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST_F(KernelsTest, FloatUnaryOpsRoundTheDoubleResultOnce) {
  struct Case {
    const char *name;
    double (*fn)(double);
  };
  const Case cases[] = {
      {"sqrt", [](double x) { return std::sqrt(x); }},
      {"reciprocal", [](double x) { return 1 / x; }},
      {"exp", [](double x) { return std::exp(x); }},
      {"log", [](double x) { return std::log(x); }},
      {"erf", [](double x) { return std::erf(x); }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"sin", [](double x) { return std::sin(x); }},
      {"cos", [](double x) { return std::cos(x); }},
      {"floor", [](double x) { return std::floor(x); }},
      {"ceil", [](double x) { return std::ceil(x); }},
      {"neg", [](double x) { return -x; }},
      {"abs", [](double x) { return std::fabs(x); }},
      {"relu", [](double x) { return x < 0 ? 0.0 : x; }},
      {"sign", [](double x) { return x > 0   ? 1.0
                                     : x < 0 ? -1.0
                                             : 0.0; }},
  };
  const double inputs[] = {0.25, 1.5, 3.0, 0.7};
  const double mixed[] = {-1.25, 0.0, 2.5, -0.3};
  for (const Case &c : cases) {
    bool positive = llvm::StringRef(c.name) == "sqrt" || llvm::StringRef(c.name) == "log";
    llvm::ArrayRef<double> x = positive ? inputs : mixed;
    std::string source = llvm::formatv(R"mlir(
      func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
        %0 = ppc.{0} %x : tensor<4xf32>
        return %0 : tensor<4xf32>
      })mlir",
                                       c.name);
    Tensor input = makeTensor(DType::F32, {4}, x);
    std::vector<double> expected;
    for (int64_t i = 0; i < 4; ++i)
      expected.push_back(f32(c.fn(input.getDouble(i))));
    SCOPED_TRACE(c.name);
    expectValues(runOne(source, {input}), {4}, expected);
  }
}

TEST_F(KernelsTest, IntegerUnaryOpsWrapAround) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<4xi32>, %b: tensor<2xi1>)
        -> (tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<2xi1>) {
      %0 = ppc.neg %x : tensor<4xi32>
      %1 = ppc.abs %x : tensor<4xi32>
      %2 = ppc.relu %x : tensor<4xi32>
      %3 = ppc.not %b : tensor<2xi1>
      return %0, %1, %2, %3 : tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<2xi1>
    })mlir";
  int64_t min32 = std::numeric_limits<int32_t>::min();
  llvm::SmallVector<Tensor> results = runOk(
      source, {makeInts(DType::I32, {4}, {-3, 0, 7, min32}), makeInts(DType::I1, {2}, {0, 1})});
  ASSERT_EQ(results.size(), 4u);
  expectInts(results[0], {4}, {3, 0, -7, min32});
  expectInts(results[1], {4}, {3, 0, 7, min32});
  expectInts(results[2], {4}, {0, 0, 7, 0});
  expectInts(results[3], {2}, {1, 0});
}

TEST_F(KernelsTest, BinaryOpsBroadcast) {
  const char *source = R"mlir(
    func.func @main(%a: tensor<2x3xf32>, %b: tensor<3xf32>,
                    %c: tensor<2x1xf32>, %d: tensor<1x3xf32>, %s: tensor<f32>)
        -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>,
            tensor<2x3xf32>) {
      %0 = ppc.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %1 = ppc.sub %c, %d : (tensor<2x1xf32>, tensor<1x3xf32>) -> tensor<2x3xf32>
      %2 = ppc.mul %s, %a : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      %3 = ppc.div %a, %c : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
      %4 = ppc.pow %a, %s : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
      return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>,
                                  tensor<2x3xf32>, tensor<2x3xf32>
    })mlir";
  Tensor a = makeTensor(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = makeTensor(DType::F32, {3}, {10, 20, 30});
  Tensor c = makeTensor(DType::F32, {2, 1}, {3, 7});
  Tensor d = makeTensor(DType::F32, {1, 3}, {0.5, 1, 2});
  Tensor s = makeTensor(DType::F32, {}, {2});
  llvm::SmallVector<Tensor> results = runOk(source, {a, b, c, d, s});
  ASSERT_EQ(results.size(), 5u);
  std::vector<double> add, sub, mul, div, pow;
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      double x = a.getDouble(i * 3 + j);
      add.push_back(x + b.getDouble(j));
      sub.push_back(c.getDouble(i) - d.getDouble(j));
      mul.push_back(2 * x);
      div.push_back(f32(x / c.getDouble(i)));
      pow.push_back(x * x);
    }
  }
  expectValues(results[0], {2, 3}, add);
  expectValues(results[1], {2, 3}, sub);
  expectValues(results[2], {2, 3}, mul);
  expectValues(results[3], {2, 3}, div);
  expectValues(results[4], {2, 3}, pow);
}

TEST_F(KernelsTest, MaxMinPropagateNaNAndComparisonsGiveBool) {
  const char *source = R"mlir(
    func.func @main(%a: tensor<2x3xf32>, %b: tensor<3xf32>)
        -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xi1>,
            tensor<2x3xi1>) {
      %0 = ppc.max %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %1 = ppc.min %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %2 = ppc.equal %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
      %3 = ppc.less %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
      %4 = ppc.greater %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
      return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi1>,
                                  tensor<2x3xi1>, tensor<2x3xi1>
    })mlir";
  double nan = std::numeric_limits<double>::quiet_NaN();
  llvm::SmallVector<Tensor> results =
      runOk(source, {makeTensor(DType::F32, {2, 3}, {1, 5, nan, 2, 2, 0}),
                     makeTensor(DType::F32, {3}, {2, 2, 1})});
  ASSERT_EQ(results.size(), 5u);
  expectValues(results[0], {2, 3}, {2, 5, nan, 2, 2, 1});
  expectValues(results[1], {2, 3}, {1, 2, nan, 2, 2, 0});
  expectInts(results[2], {2, 3}, {0, 0, 0, 1, 1, 0});
  expectInts(results[3], {2, 3}, {1, 0, 0, 0, 0, 1});
  expectInts(results[4], {2, 3}, {0, 1, 0, 0, 0, 0});
}

TEST_F(KernelsTest, LogicalOps) {
  const char *source = R"mlir(
    func.func @main(%a: tensor<4xi1>, %b: tensor<4xi1>)
        -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
      %0 = ppc.and %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
      %1 = ppc.or %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
      %2 = ppc.xor %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
      %3 = ppc.equal %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
      return %0, %1, %2, %3 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
    })mlir";
  llvm::SmallVector<Tensor> results = runOk(
      source, {makeInts(DType::I1, {4}, {0, 0, 1, 1}), makeInts(DType::I1, {4}, {0, 1, 0, 1})});
  ASSERT_EQ(results.size(), 4u);
  expectInts(results[0], {4}, {0, 0, 0, 1});
  expectInts(results[1], {4}, {0, 1, 1, 1});
  expectInts(results[2], {4}, {0, 1, 1, 0});
  expectInts(results[3], {4}, {1, 0, 0, 1});
}

TEST_F(KernelsTest, IntegerDivisionTruncatesAndSurvivesDivisionByZero) {
  const char *source = R"mlir(
    func.func @main(%a: tensor<6xi64>, %b: tensor<6xi64>,
                    %c: tensor<2xi32>, %d: tensor<2xi32>)
        -> (tensor<6xi64>, tensor<2xi32>) {
      %0 = ppc.div %a, %b : (tensor<6xi64>, tensor<6xi64>) -> tensor<6xi64>
      %1 = ppc.div %c, %d : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
      return %0, %1 : tensor<6xi64>, tensor<2xi32>
    })mlir";
  int64_t min64 = std::numeric_limits<int64_t>::min();
  int64_t min32 = std::numeric_limits<int32_t>::min();
  llvm::SmallVector<Tensor> results =
      runOk(source, {makeInts(DType::I64, {6}, {7, -7, 7, -7, 5, min64}),
                     makeInts(DType::I64, {6}, {2, 2, -2, -2, 0, -1}),
                     makeInts(DType::I32, {2}, {min32, 9}), makeInts(DType::I32, {2}, {-1, 0})});
  ASSERT_EQ(results.size(), 2u);
  expectInts(results[0], {6}, {3, -3, -3, 3, 0, min64});
  expectInts(results[1], {2}, {min32, 0});
}

TEST_F(KernelsTest, IntegerPowAndAddAreExactAndWrap) {
  const char *source = R"mlir(
    func.func @main(%a: tensor<7xi64>, %b: tensor<7xi64>,
                    %c: tensor<1xi32>, %d: tensor<1xi32>)
        -> (tensor<7xi64>, tensor<1xi32>) {
      %0 = ppc.pow %a, %b : (tensor<7xi64>, tensor<7xi64>) -> tensor<7xi64>
      %1 = ppc.add %c, %d : (tensor<1xi32>, tensor<1xi32>) -> tensor<1xi32>
      return %0, %1 : tensor<7xi64>, tensor<1xi32>
    })mlir";
  llvm::SmallVector<Tensor> results =
      runOk(source, {makeInts(DType::I64, {7}, {2, 3, -2, 3, 1, -1, 0}),
                     makeInts(DType::I64, {7}, {62, 0, 3, 39, -5, -3, -1}),
                     makeInts(DType::I32, {1}, {std::numeric_limits<int32_t>::max()}),
                     makeInts(DType::I32, {1}, {1})});
  ASSERT_EQ(results.size(), 2u);
  // 3^39 = 4052555153018976267 fits in int64 but not exactly in a double.
  expectInts(results[0], {7}, {int64_t(1) << 62, 1, -8, 4052555153018976267, 1, -1, 0});
  expectInts(results[1], {1}, {std::numeric_limits<int32_t>::min()});
}

TEST_F(KernelsTest, WhereBroadcastsAllThreeOperands) {
  const char *source = R"mlir(
    func.func @main(%c: tensor<2x1xi1>, %x: tensor<2x3xf32>, %y: tensor<f32>)
        -> tensor<2x3xf32> {
      %0 = ppc.where %c, %x, %y : (tensor<2x1xi1>, tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    })mlir";
  Tensor result = runOne(source, {makeInts(DType::I1, {2, 1}, {1, 0}), iota({2, 3}),
                                  makeTensor(DType::F32, {}, {-1})});
  expectValues(result, {2, 3}, {0, 1, 2, -1, -1, -1});
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// lhs[b] @ rhs[b] for operands that broadcast over one leading batch
/// dimension (a missing or size-1 batch dimension is reused).
std::vector<double> referenceMatmul(const Tensor &lhs, const Tensor &rhs, int64_t batch, int64_t m,
                                    int64_t k, int64_t n) {
  int64_t lhsBatches = lhs.numElements() / (m * k), rhsBatches = rhs.numElements() / (k * n);
  std::vector<double> result;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t lb = lhsBatches == 1 ? 0 : b, rb = rhsBatches == 1 ? 0 : b;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += lhs.getDouble(lb * m * k + i * k + p) * rhs.getDouble(rb * k * n + p * n + j);
        result.push_back(sum);
      }
    }
  }
  return result;
}

TEST_F(KernelsTest, MatMulBroadcastsBatchDimensions) {
  const char *source = R"mlir(
    func.func @main(%a: tensor<2x2x3xf32>, %b: tensor<3x4xf32>,
                    %c: tensor<1x2x3xf32>, %d: tensor<2x3x2xf32>)
        -> (tensor<2x2x4xf32>, tensor<2x2x2xf32>) {
      %0 = ppc.matmul %a, %b : (tensor<2x2x3xf32>, tensor<3x4xf32>) -> tensor<2x2x4xf32>
      %1 = ppc.matmul %c, %d : (tensor<1x2x3xf32>, tensor<2x3x2xf32>) -> tensor<2x2x2xf32>
      return %0, %1 : tensor<2x2x4xf32>, tensor<2x2x2xf32>
    })mlir";
  Tensor a = iota({2, 2, 3}), b = iota({3, 4}), c = iota({1, 2, 3}), d = iota({2, 3, 2});
  llvm::SmallVector<Tensor> results = runOk(source, {a, b, c, d});
  ASSERT_EQ(results.size(), 2u);
  expectValues(results[0], {2, 2, 4}, referenceMatmul(a, b, 2, 2, 3, 4));
  expectValues(results[1], {2, 2, 2}, referenceMatmul(c, d, 2, 2, 3, 2));
}

TEST_F(KernelsTest, IntegerMatMul) {
  const char *source = R"mlir(
    func.func @main(%a: tensor<2x2xi64>, %b: tensor<2x2xi64>) -> tensor<2x2xi64> {
      %0 = ppc.matmul %a, %b : (tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
      return %0 : tensor<2x2xi64>
    })mlir";
  Tensor result = runOne(source, {makeInts(DType::I64, {2, 2}, {1, 2, 3, 4}),
                                  makeInts(DType::I64, {2, 2}, {5, 6, 7, 8})});
  expectInts(result, {2, 2}, {19, 22, 43, 50});
}

TEST_F(KernelsTest, EinsumSumsMissingLabelsAndWalksDiagonals) {
  const char *source = R"mlir(
    func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>, %s: tensor<3x3xf32>,
                    %v: tensor<3xf32>)
        -> (tensor<2x2xf32>, tensor<3xf32>, tensor<f32>, tensor<2x2xf32>) {
      %0 = ppc.einsum "ij,jk->ik" (%a, %b) : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
      %1 = ppc.einsum "ii->i" (%s) : (tensor<3x3xf32>) -> tensor<3xf32>
      %2 = ppc.einsum "ii->" (%s) : (tensor<3x3xf32>) -> tensor<f32>
      %3 = ppc.einsum "ij,j,jk->ki" (%a, %v, %b) : (tensor<2x3xf32>, tensor<3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
      return %0, %1, %2, %3 : tensor<2x2xf32>, tensor<3xf32>, tensor<f32>, tensor<2x2xf32>
    })mlir";
  Tensor a = iota({2, 3}), b = iota({3, 2}), s = iota({3, 3});
  Tensor v = makeTensor(DType::F32, {3}, {1, -1, 2});
  llvm::SmallVector<Tensor> results = runOk(source, {a, b, s, v});
  ASSERT_EQ(results.size(), 4u);
  std::vector<double> product(4, 0), weighted(4, 0);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t k = 0; k < 2; ++k) {
      for (int64_t j = 0; j < 3; ++j) {
        product[i * 2 + k] += a.getDouble(i * 3 + j) * b.getDouble(j * 2 + k);
        weighted[k * 2 + i] += a.getDouble(i * 3 + j) * v.getDouble(j) * b.getDouble(j * 2 + k);
      }
    }
  }
  expectValues(results[0], {2, 2}, product);
  expectValues(results[1], {3}, {0, 4, 8});
  expectValues(results[2], {}, {12});
  expectValues(results[3], {2, 2}, weighted);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

TEST_F(KernelsTest, ReductionsOverOneOrSeveralAxesWithAndWithoutKeepdims) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<2x3x4xf32>)
        -> (tensor<2x4xf32>, tensor<2x1x4xf32>, tensor<3xf32>, tensor<1x3x1xf32>,
            tensor<2x3xf32>, tensor<4xf32>, tensor<2x3x4xf32>) {
      %0 = ppc.reduce_sum %x axes = [1] keepdims = false : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
      %1 = ppc.reduce_sum %x axes = [1] keepdims = true : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
      %2 = ppc.reduce_sum %x axes = [0, 2] keepdims = false : (tensor<2x3x4xf32>) -> tensor<3xf32>
      %3 = ppc.reduce_mean %x axes = [0, 2] keepdims = true : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
      %4 = ppc.reduce_max %x axes = [2] keepdims = false : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
      %5 = ppc.reduce_min %x axes = [0, 1] keepdims = false : (tensor<2x3x4xf32>) -> tensor<4xf32>
      %6 = ppc.reduce_sum %x axes = [] keepdims = false : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
      return %0, %1, %2, %3, %4, %5, %6 : tensor<2x4xf32>, tensor<2x1x4xf32>, tensor<3xf32>,
          tensor<1x3x1xf32>, tensor<2x3xf32>, tensor<4xf32>, tensor<2x3x4xf32>
    })mlir";
  // x[a][b][c] = a * 12 + b * 4 + c, minus 10 so that some values are negative.
  Tensor x(DType::F32, {2, 3, 4});
  for (int64_t i = 0; i < 24; ++i)
    x.setDouble(i, i - 10);
  llvm::SmallVector<Tensor> results = runOk(source, {x});
  ASSERT_EQ(results.size(), 7u);
  std::vector<double> sum1(8, 0), sum02(3, 0), max2(6, -1e9), min01(4, 1e9);
  for (int64_t a = 0; a < 2; ++a) {
    for (int64_t b = 0; b < 3; ++b) {
      for (int64_t c = 0; c < 4; ++c) {
        double v = x.getDouble(a * 12 + b * 4 + c);
        sum1[a * 4 + c] += v;
        sum02[b] += v;
        max2[a * 3 + b] = std::max(max2[a * 3 + b], v);
        min01[c] = std::min(min01[c], v);
      }
    }
  }
  std::vector<double> mean02;
  for (double s : sum02)
    mean02.push_back(s / 8);
  expectValues(results[0], {2, 4}, sum1);
  expectValues(results[1], {2, 1, 4}, sum1);
  expectValues(results[2], {3}, sum02);
  expectValues(results[3], {1, 3, 1}, mean02);
  expectValues(results[4], {2, 3}, max2);
  expectValues(results[5], {4}, min01);
  expectValues(results[6], {2, 3, 4}, x.floats());
}

TEST_F(KernelsTest, IntegerProdAndMeanTruncate) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<2x3xi64>) -> (tensor<2xi64>, tensor<2xi64>) {
      %0 = ppc.reduce_prod %x axes = [1] keepdims = false : (tensor<2x3xi64>) -> tensor<2xi64>
      %1 = ppc.reduce_mean %x axes = [1] keepdims = false : (tensor<2x3xi64>) -> tensor<2xi64>
      return %0, %1 : tensor<2xi64>, tensor<2xi64>
    })mlir";
  llvm::SmallVector<Tensor> results =
      runOk(source, {makeInts(DType::I64, {2, 3}, {1, 2, 4, -1, -2, -4})});
  ASSERT_EQ(results.size(), 2u);
  expectInts(results[0], {2}, {8, -8});
  // 7 / 3 and -7 / 3 truncate toward zero.
  expectInts(results[1], {2}, {2, -2});
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

TEST_F(KernelsTest, SoftmaxSumsToOneAndLogSoftmaxIsItsLog) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<3x4xf64>) -> (tensor<3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>) {
      %0 = ppc.softmax %x axis = 1 : tensor<3x4xf64>
      %1 = ppc.log_softmax %x axis = 1 : tensor<3x4xf64>
      %2 = ppc.softmax %x axis = 0 : tensor<3x4xf64>
      return %0, %1, %2 : tensor<3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>
    })mlir";
  // The last row would overflow exp() without subtracting the maximum.
  Tensor x = makeTensor(DType::F64, {3, 4}, {0, 1, 2, 3, -1, 0.5, -2, 4, 1000, 1001, 999, 1000});
  llvm::SmallVector<Tensor> results = runOk(source, {x});
  ASSERT_EQ(results.size(), 3u);
  const Tensor &softmax = results[0], &logSoftmax = results[1], &columns = results[2];
  for (int64_t r = 0; r < 3; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < 4; ++c) {
      double p = softmax.getDouble(r * 4 + c);
      EXPECT_GT(p, 0);
      EXPECT_NEAR(logSoftmax.getDouble(r * 4 + c), std::log(p), 1e-12);
      sum += p;
    }
    EXPECT_NEAR(sum, 1, 1e-12);
  }
  // Ratios within a row are exp of differences.
  EXPECT_NEAR(softmax.getDouble(9) / softmax.getDouble(8), std::exp(1.0), 1e-12);
  for (int64_t c = 0; c < 4; ++c) {
    double sum = 0;
    for (int64_t r = 0; r < 3; ++r)
      sum += columns.getDouble(r * 4 + c);
    EXPECT_NEAR(sum, 1, 1e-12);
  }
}

// rotary with the tables of angles theta (cos and sin of [theta, theta])
// rotates each pair (x_i, x_{i+h}) as the complex number x_i + i x_{i+h}
// times e^{i theta_i}; transposed, by -theta, which undoes it.
TEST_F(KernelsTest, RotaryRotatesPairsOfHalves) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<2x3x4xf64>, %c: tensor<3x4xf64>, %s: tensor<3x4xf64>) -> (tensor<2x3x4xf64>, tensor<2x3x4xf64>) {
      %0 = ppc.rotary %x, %c, %s : (tensor<2x3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<2x3x4xf64>
      %1 = ppc.rotary %0, %c, %s transposed : (tensor<2x3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<2x3x4xf64>
      return %0, %1 : tensor<2x3x4xf64>, tensor<2x3x4xf64>
    })mlir";
  std::vector<double> xs(24), cs(12), ss(12), theta(6);
  for (int64_t i = 0; i < 24; ++i)
    xs[i] = 0.25 * i - 3;
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t i = 0; i < 2; ++i) {
      theta[t * 2 + i] = 0.3 + 0.7 * t - 1.1 * i;
      for (int64_t half : {0, 2}) {
        cs[t * 4 + half + i] = std::cos(theta[t * 2 + i]);
        ss[t * 4 + half + i] = std::sin(theta[t * 2 + i]);
      }
    }
  llvm::SmallVector<Tensor> results =
      runOk(source, {makeTensor(DType::F64, {2, 3, 4}, xs), makeTensor(DType::F64, {3, 4}, cs),
                     makeTensor(DType::F64, {3, 4}, ss)});
  ASSERT_EQ(results.size(), 2u);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t i = 0; i < 2; ++i) {
        int64_t at = (b * 3 + t) * 4 + i;
        std::complex<double> z(xs[at], xs[at + 2]);
        std::complex<double> rotated = z * std::polar(1.0, theta[t * 2 + i]);
        EXPECT_NEAR(results[0].getDouble(at), rotated.real(), 1e-12);
        EXPECT_NEAR(results[0].getDouble(at + 2), rotated.imag(), 1e-12);
        EXPECT_NEAR(results[1].getDouble(at), xs[at], 1e-12);
        EXPECT_NEAR(results[1].getDouble(at + 2), xs[at + 2], 1e-12);
      }
}

TEST_F(KernelsTest, LogSumExpIsLogSoftmaxsShift) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<4x3xf64>) -> (tensor<4x1xf64>, tensor<1x3xf64>, tensor<4x3xf64>) {
      %0 = ppc.log_sum_exp %x axis = 1 : (tensor<4x3xf64>) -> tensor<4x1xf64>
      %1 = ppc.log_sum_exp %x axis = 0 : (tensor<4x3xf64>) -> tensor<1x3xf64>
      %2 = ppc.log_softmax %x axis = 1 : tensor<4x3xf64>
      return %0, %1, %2 : tensor<4x1xf64>, tensor<1x3xf64>, tensor<4x3xf64>
    })mlir";
  // Row 1 would overflow exp() without subtracting the maximum; row 2 is
  // all -inf (its maximum, not NaN); row 3 holds a +inf.
  double inf = std::numeric_limits<double>::infinity();
  Tensor x =
      makeTensor(DType::F64, {4, 3}, {0, 1, 2, 1000, 1001, 999, -inf, -inf, -inf, 1, inf, 2});
  llvm::SmallVector<Tensor> results = runOk(source, {x});
  ASSERT_EQ(results.size(), 3u);
  const Tensor &rows = results[0], &columns = results[1], &logSoftmax = results[2];
  EXPECT_NEAR(rows.getDouble(0), std::log(1 + std::exp(1.0) + std::exp(2.0)), 1e-12);
  EXPECT_NEAR(rows.getDouble(1), 1000 + std::log(1 + std::exp(1.0) + std::exp(-1.0)), 1e-12);
  EXPECT_EQ(rows.getDouble(2), -inf);
  EXPECT_EQ(rows.getDouble(3), inf);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 3; ++c)
      EXPECT_NEAR(x.getDouble(r * 3 + c) - rows.getDouble(r), logSoftmax.getDouble(r * 3 + c),
                  1e-12);
  EXPECT_NEAR(columns.getDouble(0), std::log(std::exp(-1000.0) + 1 + std::exp(-999.0)) + 1000,
              1e-12);
  EXPECT_EQ(columns.getDouble(1), inf);
}

// Attention where every key of a row carries a mask's lowest value (a
// Hugging Face padding mask adds the dtype's min): the row's scores are all
// equal and softmax spreads it evenly, though lse = max + log(3) rounds to
// the max; a row with one such key leaves it out. f32, and bf16, whose
// probabilities are rounded relative to a multiple of ln 2 except in such a
// row.
TEST_F(KernelsTest, AttentionSpreadsARowOfLowestScoresEvenly) {
  for (const char *type : {"f32", "bf16"}) {
    SCOPED_TRACE(type);
    std::string source = llvm::formatv(R"mlir(
      func.func @main(%q: tensor<2x2x2x{0}>, %k: tensor<2x3x2x{0}>, %v: tensor<2x3x2x{0}>,
                      %b: tensor<2x1x3x{0}>) -> tensor<2x2x2x{0}> {
        %o, %l = ppc.attention %q, %k, %v bias %b scale = 0.5 : (tensor<2x2x2x{0}>, tensor<2x3x2x{0}>, tensor<2x3x2x{0}>, tensor<2x1x3x{0}>) -> (tensor<2x2x2x{0}>, tensor<2x2xf32>)
        return %o : tensor<2x2x2x{0}>
      })mlir",
                                       type)
                             .str();
    DType dtype = llvm::StringRef(type) == "f32" ? DType::F32 : DType::BF16;
    const double lowest = -0x1.fep127; // bf16's lowest, an f32 too
    Tensor q = makeTensor(dtype, {2, 2, 2}, {1, 0, 0, 1, 0.5, -1, 2, 0.25});
    Tensor k = makeTensor(dtype, {2, 3, 2}, {1, 1, -1, 0.5, 0, 2, 1, -1, 0.5, 0.5, -2, 1});
    Tensor v = makeTensor(dtype, {2, 3, 2}, {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6});
    Tensor bias = makeTensor(dtype, {2, 1, 3}, {0, 0, lowest, lowest, lowest, lowest});
    Tensor o = runOne(source, {q, k, v, bias});
    ASSERT_EQ(o.numElements(), 8);
    // Batch 0: keys 0 and 1 only.
    for (int64_t i = 0; i < 2; ++i) {
      double s[2], p[2];
      for (int64_t j = 0; j < 2; ++j)
        s[j] = 0.5 * (q.getDouble(i * 2) * k.getDouble(j * 2) +
                      q.getDouble(i * 2 + 1) * k.getDouble(j * 2 + 1));
      double m = std::max(s[0], s[1]);
      for (int64_t j = 0; j < 2; ++j)
        p[j] = std::exp(s[j] - m) / (std::exp(s[0] - m) + std::exp(s[1] - m));
      for (int64_t e = 0; e < 2; ++e)
        EXPECT_NEAR(o.getDouble(i * 2 + e), p[0] * v.getDouble(e) + p[1] * v.getDouble(2 + e),
                    dtype == DType::F32 ? 1e-6 : 2e-2)
            << "row " << i;
    }
    // Batch 1: the mean of its values, exactly (bf16: 1 rounds to itself).
    for (int64_t i = 0; i < 2; ++i) {
      EXPECT_EQ(o.getDouble(4 + i * 2), f32(-3.0)) << "row " << i;
      EXPECT_EQ(o.getDouble(4 + i * 2 + 1), f32(-4.0)) << "row " << i;
    }
  }
}

TEST_F(KernelsTest, LayerNormMatchesADirectComputation) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<2x2x3xf64>, %g: tensor<3xf64>, %b: tensor<1x3xf64>)
        -> (tensor<2x2x3xf64>, tensor<2x2x3xf64>) {
      %0 = ppc.layer_norm %x, %g, %b axis = 1 epsilon = 1.000000e-05 : (tensor<2x2x3xf64>, tensor<3xf64>, tensor<1x3xf64>) -> tensor<2x2x3xf64>
      %1 = ppc.layer_norm %x, %g axis = 2 epsilon = 1.000000e-01 : (tensor<2x2x3xf64>, tensor<3xf64>) -> tensor<2x2x3xf64>
      return %0, %1 : tensor<2x2x3xf64>, tensor<2x2x3xf64>
    })mlir";
  Tensor x = makeTensor(DType::F64, {2, 2, 3}, {1, 2, 4, -3, 0.5, 7, 2, 2, 2, 10, -10, 3});
  Tensor g = makeTensor(DType::F64, {3}, {1, 2, -0.5});
  Tensor b = makeTensor(DType::F64, {1, 3}, {0.25, 0, -1});
  llvm::SmallVector<Tensor> results = runOk(source, {x, g, b});
  ASSERT_EQ(results.size(), 2u);
  // Normalizes groups of `size` consecutive elements.
  auto reference = [&](int64_t size, double epsilon, bool withBias) {
    std::vector<double> y;
    for (int64_t start = 0; start < 12; start += size) {
      double mean = 0, variance = 0;
      for (int64_t i = 0; i < size; ++i)
        mean += x.getDouble(start + i) / size;
      for (int64_t i = 0; i < size; ++i)
        variance += std::pow(x.getDouble(start + i) - mean, 2) / size;
      for (int64_t i = 0; i < size; ++i) {
        int64_t c = i % 3;
        y.push_back((x.getDouble(start + i) - mean) / std::sqrt(variance + epsilon) *
                        g.getDouble(c) +
                    (withBias ? b.getDouble(c) : 0));
      }
    }
    return y;
  };
  std::vector<double> y0 = reference(6, 1e-5, true), y1 = reference(3, 0.1, false);
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_NEAR(results[0].getDouble(i), y0[i], 1e-12) << i;
    EXPECT_NEAR(results[1].getDouble(i), y1[i], 1e-12) << i;
  }
}

// rms_norm divides by the root mean square (no mean taken out, no bias),
// over the last axis and over the last two.
TEST_F(KernelsTest, RmsNormMatchesADirectComputation) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<2x2x3xf64>, %g: tensor<3xf64>, %h: tensor<2x1xf64>)
        -> (tensor<2x2x3xf64>, tensor<2x2x3xf64>) {
      %0 = ppc.rms_norm %x, %g axis = 2 epsilon = 1.000000e-06 : (tensor<2x2x3xf64>, tensor<3xf64>) -> tensor<2x2x3xf64>
      %1 = ppc.rms_norm %x, %h axis = 1 epsilon = 5.000000e-01 : (tensor<2x2x3xf64>, tensor<2x1xf64>) -> tensor<2x2x3xf64>
      return %0, %1 : tensor<2x2x3xf64>, tensor<2x2x3xf64>
    })mlir";
  Tensor x = makeTensor(DType::F64, {2, 2, 3}, {1, 2, 4, -3, 0.5, 7, 2, 2, 2, 10, -10, 3});
  Tensor g = makeTensor(DType::F64, {3}, {1, 2, -0.5});
  Tensor h = makeTensor(DType::F64, {2, 1}, {3, -1});
  llvm::SmallVector<Tensor> results = runOk(source, {x, g, h});
  ASSERT_EQ(results.size(), 2u);
  // Groups of `size` consecutive elements; scale(i) for element i of a group.
  auto reference = [&](int64_t size, double epsilon, auto scale) {
    std::vector<double> y;
    for (int64_t start = 0; start < 12; start += size) {
      double meanSquare = 0;
      for (int64_t i = 0; i < size; ++i)
        meanSquare += std::pow(x.getDouble(start + i), 2) / size;
      for (int64_t i = 0; i < size; ++i)
        y.push_back(x.getDouble(start + i) / std::sqrt(meanSquare + epsilon) * scale(i));
    }
    return y;
  };
  std::vector<double> y0 = reference(3, 1e-6, [&](int64_t i) { return g.getDouble(i); });
  std::vector<double> y1 = reference(6, 0.5, [&](int64_t i) { return h.getDouble(i / 3); });
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_NEAR(results[0].getDouble(i), y0[i], 1e-12) << i;
    EXPECT_NEAR(results[1].getDouble(i), y1[i], 1e-12) << i;
  }
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST_F(KernelsTest, ReshapeTransposeAndConcat) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<2x3x4xf32>, %a: tensor<2x1xi64>, %b: tensor<2x2xi64>)
        -> (tensor<6x4xf32>, tensor<4x2x3xf32>, tensor<2x3xi64>) {
      %0 = ppc.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
      %1 = ppc.transpose %x perm = [2, 0, 1] : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
      %2 = ppc.concat %a, %b axis = 1 : (tensor<2x1xi64>, tensor<2x2xi64>) -> tensor<2x3xi64>
      return %0, %1, %2 : tensor<6x4xf32>, tensor<4x2x3xf32>, tensor<2x3xi64>
    })mlir";
  Tensor x = iota({2, 3, 4});
  llvm::SmallVector<Tensor> results = runOk(source, {x, makeInts(DType::I64, {2, 1}, {1, 2}),
                                                     makeInts(DType::I64, {2, 2}, {3, 4, 5, 6})});
  ASSERT_EQ(results.size(), 3u);
  expectValues(results[0], {6, 4}, x.floats());
  std::vector<double> transposed;
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t b = 0; b < 3; ++b)
        transposed.push_back(x.getDouble(a * 12 + b * 4 + c));
  expectValues(results[1], {4, 2, 3}, transposed);
  expectInts(results[2], {2, 3}, {1, 3, 4, 2, 5, 6});
}

TEST_F(KernelsTest, SliceWithNegativeSteps) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<10xf32>, %y: tensor<3x4xf32>)
        -> (tensor<3xf32>, tensor<3x2xf32>, tensor<0xf32>) {
      %0 = ppc.slice %x starts = [8] limits = [-1] steps = [-3] : (tensor<10xf32>) -> tensor<3xf32>
      %1 = ppc.slice %y starts = [2, 1] limits = [-1, 4] steps = [-1, 2] : (tensor<3x4xf32>) -> tensor<3x2xf32>
      %2 = ppc.slice %x starts = [4] limits = [4] steps = [1] : (tensor<10xf32>) -> tensor<0xf32>
      return %0, %1, %2 : tensor<3xf32>, tensor<3x2xf32>, tensor<0xf32>
    })mlir";
  llvm::SmallVector<Tensor> results = runOk(source, {iota({10}), iota({3, 4})});
  ASSERT_EQ(results.size(), 3u);
  expectValues(results[0], {3}, {8, 5, 2});
  expectValues(results[1], {3, 2}, {9, 11, 5, 7, 1, 3});
  expectValues(results[2], {0}, {});
}

TEST_F(KernelsTest, GatherCountsNegativeIndicesFromTheEnd) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<3x4xf32>, %i: tensor<2xi64>, %j: tensor<2x2xi32>)
        -> (tensor<2x4xf32>, tensor<3x2x2xf32>) {
      %0 = ppc.gather %x[%i] axis = 0 : (tensor<3x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
      %1 = ppc.gather %x[%j] axis = 1 : (tensor<3x4xf32>, tensor<2x2xi32>) -> tensor<3x2x2xf32>
      return %0, %1 : tensor<2x4xf32>, tensor<3x2x2xf32>
    })mlir";
  llvm::SmallVector<Tensor> results =
      runOk(source, {iota({3, 4}), makeInts(DType::I64, {2}, {-1, 0}),
                     makeInts(DType::I32, {2, 2}, {3, 0, -4, -1})});
  ASSERT_EQ(results.size(), 2u);
  expectValues(results[0], {2, 4}, {8, 9, 10, 11, 0, 1, 2, 3});
  expectValues(results[1], {3, 2, 2}, {3, 0, 0, 3, 7, 4, 4, 7, 11, 8, 8, 11});
}

TEST_F(KernelsTest, GatherIndexOutOfRangeIsAnError) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<3x4xf32>, %i: tensor<2xi64>) -> tensor<2x4xf32> {
      %0 = ppc.gather %x[%i] axis = 0 : (tensor<3x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
      return %0 : tensor<2x4xf32>
    })mlir";
  for (int64_t bad : {3, -4}) {
    errors.clear();
    auto results = run(source, {iota({3, 4}), makeInts(DType::I64, {2}, {0, bad})});
    EXPECT_TRUE(failed(results));
    EXPECT_NE(errors.find(llvm::formatv("gather index {0} out of range [-3, 3)", bad).str()),
              std::string::npos)
        << errors;
  }
}

TEST_F(KernelsTest, ExpandBroadcastsToTheResultShape) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<3x1xi64>) -> tensor<2x3x2xi64> {
      %0 = ppc.expand %x : tensor<3x1xi64> -> tensor<2x3x2xi64>
      return %0 : tensor<2x3x2xi64>
    })mlir";
  Tensor result = runOne(source, {makeInts(DType::I64, {3, 1}, {7, 8, 9})});
  expectInts(result, {2, 3, 2}, {7, 7, 8, 8, 9, 9, 7, 7, 8, 8, 9, 9});
}

// ONNX CumSum's four forms, against sums written out by hand.
TEST_F(KernelsTest, CumSumScansForwardBackwardInclusiveAndExclusive) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<2x3xi64>) -> (tensor<2x3xi64>, tensor<2x3xi64>,
                                             tensor<2x3xi64>, tensor<2x3xi64>) {
      %0 = ppc.cumsum %x axis = 1 exclusive = false reverse = false : tensor<2x3xi64>
      %1 = ppc.cumsum %x axis = 1 exclusive = true reverse = false : tensor<2x3xi64>
      %2 = ppc.cumsum %x axis = 1 exclusive = false reverse = true : tensor<2x3xi64>
      %3 = ppc.cumsum %x axis = 0 exclusive = true reverse = true : tensor<2x3xi64>
      return %0, %1, %2, %3 : tensor<2x3xi64>, tensor<2x3xi64>, tensor<2x3xi64>,
                              tensor<2x3xi64>
    })mlir";
  llvm::SmallVector<Tensor> results =
      runOk(source, {makeInts(DType::I64, {2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(results.size(), 4u);
  expectInts(results[0], {2, 3}, {1, 3, 6, 4, 9, 15});
  expectInts(results[1], {2, 3}, {0, 1, 3, 0, 4, 9});
  expectInts(results[2], {2, 3}, {6, 5, 3, 15, 11, 6});
  expectInts(results[3], {2, 3}, {4, 5, 6, 0, 0, 0});
}

// In f32 every partial sum is rounded, as a loop in float adds: 1 + 2^-24
// is 1, so adding 2^-24 twice to 1 stays 1 (a sum in double would not).
TEST_F(KernelsTest, CumSumRoundsEveryPartialSumToF32) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
      %0 = ppc.cumsum %x axis = 0 exclusive = false reverse = false : tensor<3xf32>
      return %0 : tensor<3xf32>
    })mlir";
  Tensor x(DType::F32, {3});
  x.setDouble(0, 1.0);
  x.setDouble(1, std::ldexp(1.0, -24));
  x.setDouble(2, std::ldexp(1.0, -24));
  expectValues(runOne(source, {x}), {3}, {1.0, 1.0, 1.0});
}

// Largest and smallest first, equal elements in index order, NaN largest,
// along the last axis and along a middle one.
TEST_F(KernelsTest, TopKIndicesOrdersTiesByIndexAndNaNAsLargest) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<2x5xf32>) -> (tensor<2x3xi64>, tensor<2x3xi64>,
                                             tensor<1x5xi64>) {
      %0 = ppc.top_k_indices %x axis = 1 k = 3 largest = true : tensor<2x5xf32> -> tensor<2x3xi64>
      %1 = ppc.top_k_indices %x axis = 1 k = 3 largest = false : tensor<2x5xf32> -> tensor<2x3xi64>
      %2 = ppc.top_k_indices %x axis = 0 k = 1 largest = true : tensor<2x5xf32> -> tensor<1x5xi64>
      return %0, %1, %2 : tensor<2x3xi64>, tensor<2x3xi64>, tensor<1x5xi64>
    })mlir";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x(DType::F32, {2, 5});
  std::vector<double> values = {3, 1, 3, 2, 0, 4, nan, -1, 4, 5};
  for (int64_t i = 0; i < 10; ++i)
    x.setDouble(i, values[i]);
  llvm::SmallVector<Tensor> results = runOk(source, {x});
  ASSERT_EQ(results.size(), 3u);
  expectInts(results[0], {2, 3}, {0, 2, 3, 1, 4, 0});
  expectInts(results[1], {2, 3}, {4, 1, 3, 2, 0, 3});
  expectInts(results[2], {1, 5}, {1, 1, 0, 1, 1});
}

// Largest and smallest, the first or last of equal elements, NaN the
// extreme either way (numpy's argmax and argmin), integers exactly.
TEST_F(KernelsTest, ArgMaxTakesFirstOrLastOfEqualsAndNaNFirst) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<2x5xf32>, %y: tensor<3xi64>) -> (tensor<2x1xi64>, tensor<2x1xi64>,
        tensor<2x1xi64>, tensor<1x5xi64>, tensor<1xi64>) {
      %0 = ppc.arg_max %x axis = 1 largest = true last = false : tensor<2x5xf32> -> tensor<2x1xi64>
      %1 = ppc.arg_max %x axis = 1 largest = true last = true : tensor<2x5xf32> -> tensor<2x1xi64>
      %2 = ppc.arg_max %x axis = 1 largest = false last = false : tensor<2x5xf32> -> tensor<2x1xi64>
      %3 = ppc.arg_max %x axis = 0 largest = false last = true : tensor<2x5xf32> -> tensor<1x5xi64>
      %4 = ppc.arg_max %y axis = 0 largest = true last = false : tensor<3xi64> -> tensor<1xi64>
      return %0, %1, %2, %3, %4 : tensor<2x1xi64>, tensor<2x1xi64>, tensor<2x1xi64>,
          tensor<1x5xi64>, tensor<1xi64>
    })mlir";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x(DType::F32, {2, 5});
  std::vector<double> values = {3, 1, 3, 0, 0, 4, nan, -1, 4, nan};
  for (int64_t i = 0; i < 10; ++i)
    x.setDouble(i, values[i]);
  int64_t big = int64_t(1) << 53;
  llvm::SmallVector<Tensor> results =
      runOk(source, {x, makeInts(DType::I64, {3}, {big + 1, big, big + 2})});
  ASSERT_EQ(results.size(), 5u);
  expectInts(results[0], {2, 1}, {0, 1});
  expectInts(results[1], {2, 1}, {2, 4});
  expectInts(results[2], {2, 1}, {3, 1});
  expectInts(results[3], {1, 5}, {0, 1, 1, 0, 1});
  expectInts(results[4], {1}, {2});
}

// int64 beyond 2^53, where doubles no longer tell neighbours apart.
TEST_F(KernelsTest, TopKIndicesComparesLargeIntegersExactly) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<3xi64>) -> tensor<3xi64> {
      %0 = ppc.top_k_indices %x axis = 0 k = 3 largest = true : tensor<3xi64> -> tensor<3xi64>
      return %0 : tensor<3xi64>
    })mlir";
  int64_t big = int64_t(1) << 53;
  expectInts(runOne(source, {makeInts(DType::I64, {3}, {big + 1, big, big + 2})}), {3}, {2, 0, 1});
}

TEST_F(KernelsTest, TriluKeepsUpperOrLowerTriangleWithOffset) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
      %0 = ppc.trilu %x upper = true k = 1 : tensor<2x3x4xf32>
      %1 = ppc.trilu %x upper = false k = -1 : tensor<2x3x4xf32>
      return %0, %1 : tensor<2x3x4xf32>, tensor<2x3x4xf32>
    })mlir";
  Tensor x = iota({2, 3, 4});
  // Shift by one so that kept zeros differ from zeroed elements.
  for (double &v : x.floats())
    v += 1;
  llvm::SmallVector<Tensor> results = runOk(source, {x});
  ASSERT_EQ(results.size(), 2u);
  std::vector<double> upper, lower;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t c = 0; c < 4; ++c) {
        double v = x.getDouble(b * 12 + r * 4 + c);
        upper.push_back(c - r >= 1 ? v : 0);
        lower.push_back(c - r <= -1 ? v : 0);
      }
    }
  }
  expectValues(results[0], {2, 3, 4}, upper);
  expectValues(results[1], {2, 3, 4}, lower);
  // Spot-check against the written-out lower triangle of the first matrix.
  expectValues(results[1], {2, 3, 4},
               {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, 21, 22, 0, 0});
}

TEST_F(KernelsTest, InsertSliceReplacesTheStridedRegionOnly) {
  const char *source = R"mlir(
    func.func @main(%s: tensor<2x2xf32>, %d: tensor<3x4xf32>, %e: tensor<0x2xi64>, %f: tensor<2x2xi64>)
        -> (tensor<3x4xf32>, tensor<2x2xf32>, tensor<2x2xi64>) {
      %0 = ppc.insert_slice %s into %d starts = [2, 3] limits = [-1, 0] steps = [-2, -2] : (tensor<2x2xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
      %1 = ppc.slice %0 starts = [2, 3] limits = [-1, 0] steps = [-2, -2] : (tensor<3x4xf32>) -> tensor<2x2xf32>
      %2 = ppc.insert_slice %e into %f starts = [1, 0] limits = [1, 2] steps = [1, 1] : (tensor<0x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
      return %0, %1, %2 : tensor<3x4xf32>, tensor<2x2xf32>, tensor<2x2xi64>
    })mlir";
  Tensor s = makeTensor(DType::F32, {2, 2}, {-1, -2, -3, -4});
  llvm::SmallVector<Tensor> results = runOk(source, {s, iota({3, 4}), Tensor(DType::I64, {0, 2}),
                                                     makeInts(DType::I64, {2, 2}, {5, 6, 7, 8})});
  ASSERT_EQ(results.size(), 3u);
  // Rows 2 and 0, columns 3 and 1, in that order.
  expectValues(results[0], {3, 4}, {0, -4, 2, -3, 4, 5, 6, 7, 8, -2, 10, -1});
  expectValues(results[1], {2, 2}, s.floats());
  expectInts(results[2], {2, 2}, {5, 6, 7, 8});
}

TEST_F(KernelsTest, ScatterAddAccumulatesRepeatedAndNegativeIndices) {
  const char *source = R"mlir(
    func.func @main(%u: tensor<3x2xf32>, %i: tensor<3xi64>, %v: tensor<2x2x2xi64>, %j: tensor<2x2xi32>)
        -> (tensor<4x2xf32>, tensor<2x3xi64>) {
      %0 = ppc.scatter_add %u[%i] axis = 0 : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<4x2xf32>
      %1 = ppc.scatter_add %v[%j] axis = 1 : (tensor<2x2x2xi64>, tensor<2x2xi32>) -> tensor<2x3xi64>
      return %0, %1 : tensor<4x2xf32>, tensor<2x3xi64>
    })mlir";
  // Row 1 is named by 1 and by -3.
  llvm::SmallVector<Tensor> results =
      runOk(source, {iota({3, 2}), makeInts(DType::I64, {3}, {1, -3, 3}),
                     makeInts(DType::I64, {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}),
                     makeInts(DType::I32, {2, 2}, {2, 0, -1, 2})});
  ASSERT_EQ(results.size(), 2u);
  expectValues(results[0], {4, 2}, {0, 0, 2, 4, 0, 0, 4, 5});
  // Per row of the result: column 0 gets update 2, column 2 updates 1, 3, 4.
  expectInts(results[1], {2, 3}, {2, 0, 8, 6, 0, 20});
}

TEST_F(KernelsTest, ScatterAddRoundsTheSumOnce) {
  const char *source = R"mlir(
    func.func @main(%u: tensor<3xf32>, %i: tensor<3xi64>) -> tensor<1xf32> {
      %0 = ppc.scatter_add %u[%i] axis = 0 : (tensor<3xf32>, tensor<3xi64>) -> tensor<1xf32>
      return %0 : tensor<1xf32>
    })mlir";
  // Summed exactly, 1 + 2^-24 + 2^-24 is 1 + 2^-23, an f32; rounding each
  // partial sum to f32 would give 1.
  double tiny = std::ldexp(1.0, -24);
  Tensor result = runOne(
      source, {makeTensor(DType::F32, {3}, {1, tiny, tiny}), makeInts(DType::I64, {3}, {0, 0, 0})});
  expectValues(result, {1}, {1 + 2 * tiny});
}

TEST_F(KernelsTest, ScatterAddIndexOutOfRangeIsAnError) {
  const char *source = R"mlir(
    func.func @main(%u: tensor<2x4xf32>, %i: tensor<2xi64>) -> tensor<3x4xf32> {
      %0 = ppc.scatter_add %u[%i] axis = 0 : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32>
    })mlir";
  for (int64_t bad : {3, -4}) {
    errors.clear();
    auto results = run(source, {iota({2, 4}), makeInts(DType::I64, {2}, {0, bad})});
    EXPECT_TRUE(failed(results));
    EXPECT_NE(errors.find(llvm::formatv("scatter_add index {0} out of range "
                                        "[-3, 3)",
                                        bad)
                              .str()),
              std::string::npos)
        << errors;
  }
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

TEST_F(KernelsTest, NllLossWeightsAndIgnoresTargets) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<3x4xf64>, %t: tensor<3xi64>, %w: tensor<4xf64>)
        -> (tensor<f64>, tensor<f64>, tensor<3xf64>) {
      %0 = ppc.nll_loss %x, %t, %w mean ignore_index = -100 : (tensor<3x4xf64>, tensor<3xi64>, tensor<4xf64>) -> tensor<f64>
      %1 = ppc.nll_loss %x, %t, %w sum ignore_index = -100 : (tensor<3x4xf64>, tensor<3xi64>, tensor<4xf64>) -> tensor<f64>
      %2 = ppc.nll_loss %x, %t none ignore_index = -100 : (tensor<3x4xf64>, tensor<3xi64>) -> tensor<3xf64>
      return %0, %1, %2 : tensor<f64>, tensor<f64>, tensor<3xf64>
    })mlir";
  Tensor x = makeTensor(DType::F64, {3, 4}, {-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12});
  Tensor t = makeInts(DType::I64, {3}, {1, -100, 3});
  Tensor w = makeTensor(DType::F64, {4}, {1, 2, 3, 4});
  llvm::SmallVector<Tensor> results = runOk(source, {x, t, w});
  ASSERT_EQ(results.size(), 3u);
  // Row 0 picks x[0][1] = -2 with weight 2, row 2 picks x[2][3] = -12 with
  // weight 4; row 1 is ignored.
  expectValues(results[0], {}, {(2.0 * 2 + 12.0 * 4) / (2 + 4)});
  expectValues(results[1], {}, {2.0 * 2 + 12.0 * 4});
  expectValues(results[2], {3}, {2, 0, 12});
}

TEST_F(KernelsTest, NllLossOverSpatialDimensions) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<2x3x2xf32>, %t: tensor<2x2xi64>) -> tensor<f32> {
      %0 = ppc.nll_loss %x, %t mean ignore_index = -1 : (tensor<2x3x2xf32>, tensor<2x2xi64>) -> tensor<f32>
      return %0 : tensor<f32>
    })mlir";
  Tensor x = iota({2, 3, 2});
  Tensor result = runOne(source, {x, makeInts(DType::I64, {2, 2}, {2, 0, -1, 1})});
  // x[n][c][d] = n * 6 + c * 2 + d: picks x[0][2][0] = 4, x[0][0][1] = 1 and
  // x[1][1][1] = 9; [1][0] is ignored.
  expectValues(result, {}, {f32(-(4.0 + 1 + 9) / 3)});
}

TEST_F(KernelsTest, NllLossTargetOutOfRangeIsAnError) {
  const char *source = R"mlir(
    func.func @main(%x: tensor<2x4xf32>, %t: tensor<2xi64>) -> tensor<f32> {
      %0 = ppc.nll_loss %x, %t sum ignore_index = -100 : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
      return %0 : tensor<f32>
    })mlir";
  auto results = run(source, {iota({2, 4}), makeInts(DType::I64, {2}, {0, 4})});
  EXPECT_TRUE(failed(results));
  EXPECT_NE(errors.find("nll_loss target 4 out of range [0, 4)"), std::string::npos) << errors;
}

//===----------------------------------------------------------------------===//
// Folding
//===----------------------------------------------------------------------===//

TEST_F(KernelsTest, FoldWithExecutorReplacesAnOpOfConstants) {
  const char *source = R"mlir(
    func.func @main() -> tensor<2xi32> {
      %0 = ppc.constant dense<[1, 2]> : tensor<2xi32>
      %1 = ppc.constant dense<[10, 20]> : tensor<2xi32>
      %2 = ppc.add %0, %1 : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
      return %2 : tensor<2xi32>
    })mlir";
  module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  ASSERT_TRUE(module) << errors;
  auto func = *module->getOps<mlir::func::FuncOp>().begin();
  AddOp add = *func.getOps<AddOp>().begin();
  mlir::OpBuilder builder(&context);
  auto folded = foldWithExecutor(add, builder);
  ASSERT_TRUE(succeeded(folded)) << errors;
  EXPECT_TRUE(*folded);
  EXPECT_TRUE(func.getOps<AddOp>().empty());
  auto ret = llvm::cast<mlir::func::ReturnOp>(func.getBody().front().getTerminator());
  auto constant = ret.getOperand(0).getDefiningOp<ConstantOp>();
  ASSERT_TRUE(constant);
  auto value = Tensor::fromAttr(constant.getValue());
  ASSERT_TRUE(succeeded(value));
  EXPECT_EQ(value->dtype(), DType::I32);
  expectInts(*value, {2}, {11, 22});

  // An op with a non-constant operand stays.
  const char *notConstant = R"mlir(
    func.func @main(%x: tensor<2xi32>) -> tensor<2xi32> {
      %0 = ppc.constant dense<[1, 2]> : tensor<2xi32>
      %1 = ppc.add %0, %x : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
      return %1 : tensor<2xi32>
    })mlir";
  module = mlir::parseSourceString<mlir::ModuleOp>(notConstant, &context);
  ASSERT_TRUE(module) << errors;
  func = *module->getOps<mlir::func::FuncOp>().begin();
  folded = foldWithExecutor(*func.getOps<AddOp>().begin(), builder);
  ASSERT_TRUE(succeeded(folded));
  EXPECT_FALSE(*folded);
}

} // namespace
