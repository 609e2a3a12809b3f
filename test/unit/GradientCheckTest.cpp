//===- GradientCheckTest.cpp - gradient rules against finite differences --===//
//
// For each instance (an op with operands of given shapes and attributes) the
// test builds, in f64,
//   @loss(args) = reduce_sum(op(args) * W)     with a random constant W, and
//   @grad(args) = the op's gradient rule applied with result adjoint W,
// runs both on the reference executor and compares every float operand's
// adjoint with central differences of @loss. Every op with a rule must be
// checked, and every ppc op must have a rule or be marked non-differentiable.
//
//===----------------------------------------------------------------------===//

#include "executor/Interpreter.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "passes/autodiff/Gradients.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseSet.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>
#include <random>

using namespace mlir;
using namespace ppc;

namespace {

constexpr double kStep = 1e-6;
constexpr double kTolerance = 1e-6;

/// An argument of the checked function. Float arguments are differentiated
/// unless `differentiate` is false (weights of nll_loss); integer and
/// boolean ones (indices, targets, conditions) never are.
struct Arg {
  Tensor value;
  bool differentiate = true;
};

/// Builds the op under test from the function's arguments (and constants it
/// creates itself) and returns its result.
using BuildFn = std::function<Value(OpBuilder &b, Location loc, ValueRange args)>;

std::string shapeName(llvm::ArrayRef<int64_t> shape) {
  std::string name = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    name += (i ? "," : "") + std::to_string(d);
  return name + "]";
}

template <typename OpT> BuildFn unary() {
  return [](OpBuilder &b, Location loc, ValueRange a) -> Value { return b.create<OpT>(loc, a[0]); };
}

template <typename OpT> BuildFn binary() {
  return [](OpBuilder &b, Location loc, ValueRange a) -> Value {
    return b.create<OpT>(loc, a[0], a[1]);
  };
}

class GradientCheckTest : public ::testing::Test {
protected:
  GradientCheckTest() { context.loadDialect<PpcDialect, func::FuncDialect>(); }

  //===--------------------------------------------------------------------===//
  // Arguments
  //===--------------------------------------------------------------------===//

  /// A random dimension size in [lo, hi].
  int64_t dim(int64_t lo = 2, int64_t hi = 4) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }
  double draw(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }
  Tensor randomTensor(DType dtype, llvm::ArrayRef<int64_t> shape, double lo, double hi) {
    Tensor t(dtype, shape);
    for (double &v : t.floats())
      v = draw(lo, hi);
    t.roundToDType();
    return t;
  }
  Arg uniform(llvm::ArrayRef<int64_t> shape, double lo = -2, double hi = 2) {
    return {randomTensor(DType::F64, shape, lo, hi)};
  }
  Arg positive(llvm::ArrayRef<int64_t> shape) { return uniform(shape, 0.5, 2); }
  /// Values with |x| >= 0.3, away from the kinks of abs, relu and the poles
  /// of 1/x.
  Arg awayFromZero(llvm::ArrayRef<int64_t> shape) {
    Arg arg = uniform(shape, 0.3, 2);
    for (double &v : arg.value.floats())
      v = draw(0, 1) < 0.5 ? -v : v;
    return arg;
  }
  Arg values(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<double> data) {
    Tensor t(DType::F64, shape);
    EXPECT_EQ(t.numElements(), static_cast<int64_t>(data.size()));
    llvm::copy(data, t.floats().begin());
    return {t};
  }
  Arg fixed(Arg arg) { return {arg.value, false}; }
  Arg ints(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> data, DType dtype = DType::I64) {
    Tensor t(dtype, shape);
    EXPECT_EQ(t.numElements(), static_cast<int64_t>(data.size()));
    for (auto [i, v] : llvm::enumerate(data))
      t.setInt(i, v);
    return {t, false};
  }
  Arg bools(llvm::ArrayRef<int64_t> shape) {
    Tensor t(DType::I1, shape);
    for (int64_t &v : t.ints())
      v = draw(0, 1) < 0.5;
    return {t, false};
  }

  //===--------------------------------------------------------------------===//
  // The check
  //===--------------------------------------------------------------------===//

  /// Builds @loss and @grad for one instance, runs them and compares the
  /// adjoints with central differences.
  void check(const std::string &name, std::vector<Arg> args, BuildFn build) {
    SCOPED_TRACE(name);
    errors.clear();
    OpBuilder b(&context);
    Location loc = NameLoc::get(b.getStringAttr(name));
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    llvm::SmallVector<Type> argTypes;
    for (const Arg &arg : args)
      argTypes.push_back(
          RankedTensorType::get(arg.value.shape(), mlirType(arg.value.dtype(), &context)));

    // @loss(args) = reduce_sum(op(args) * W).
    b.setInsertionPointToEnd(module->getBody());
    auto lossFn = b.create<func::FuncOp>(loc, "loss", b.getFunctionType(argTypes, {}));
    Block *lossBody = lossFn.addEntryBlock();
    b.setInsertionPointToEnd(lossBody);
    Value result = build(b, loc, lossBody->getArguments());
    auto resultType = llvm::cast<RankedTensorType>(result.getType());
    DenseElementsAttr weights =
        randomTensor(*dtypeOf(resultType.getElementType()), resultType.getShape(), -1, 1)
            .toAttr(&context);
    Value weighted = b.create<MulOp>(loc, result, b.create<ConstantOp>(loc, weights));
    Value loss = b.create<ReduceSumOp>(loc, weighted,
                                       llvm::to_vector(llvm::seq<int64_t>(0, resultType.getRank())),
                                       /*keepdims=*/false);
    b.create<func::ReturnOp>(loc, loss);
    lossFn.setType(b.getFunctionType(argTypes, loss.getType()));

    // @grad(args) = the rule's adjoints of the differentiated arguments.
    b.setInsertionPointToEnd(module->getBody());
    auto gradFn = b.create<func::FuncOp>(loc, "grad", b.getFunctionType(argTypes, {}));
    Block *gradBody = gradFn.addEntryBlock();
    b.setInsertionPointToEnd(gradBody);
    Operation *op = build(b, loc, gradBody->getArguments()).getDefiningOp();
    Value resultGrads[] = {b.create<ConstantOp>(loc, weights).getResult()};
    llvm::SmallVector<bool> wanted;
    llvm::SmallVector<int64_t> operandArgs;
    for (Value operand : op->getOperands()) {
      auto arg = llvm::dyn_cast<BlockArgument>(operand);
      bool want =
          arg && args[arg.getArgNumber()].differentiate && args[arg.getArgNumber()].value.isFloat();
      wanted.push_back(want);
      operandArgs.push_back(want ? arg.getArgNumber() : -1);
    }
    const GradientRule *rule = GradientRegistry::get().lookup(op);
    ASSERT_NE(rule, nullptr) << "no gradient rule for " << op->getName().getStringRef().str();
    llvm::SmallVector<Value> grads;
    ASSERT_TRUE(succeeded((*rule)(GradientRequest{b, op, resultGrads, wanted}, grads))) << errors;
    ASSERT_EQ(grads.size(), op->getNumOperands());
    llvm::SmallVector<Value> returned;
    llvm::SmallVector<int64_t> returnedArgs;
    for (auto [i, grad] : llvm::enumerate(grads)) {
      if (!wanted[i])
        continue;
      ASSERT_TRUE(grad) << "no adjoint for operand " << i;
      ASSERT_EQ(grad.getType(), op->getOperand(i).getType()) << "operand " << i;
      returned.push_back(grad);
      returnedArgs.push_back(operandArgs[i]);
    }
    b.create<func::ReturnOp>(loc, returned);
    gradFn.setType(b.getFunctionType(argTypes, ValueRange(returned).getTypes()));
    ASSERT_TRUE(succeeded(verify(*module))) << errors;

    // The executor in f64 mode: every float, f32 casts included, runs in f64.
    ExecOptions options{/*f64=*/true};
    llvm::SmallVector<Tensor> inputs;
    for (const Arg &arg : args)
      inputs.push_back(arg.value);
    auto adjoints = runFunction(gradFn, inputs, options);
    ASSERT_TRUE(succeeded(adjoints)) << errors;
    // An argument used by several operands gets the sum of their adjoints.
    std::map<int64_t, Tensor> analytic;
    for (auto [argIndex, adjoint] : llvm::zip(returnedArgs, *adjoints)) {
      auto [it, inserted] = analytic.try_emplace(argIndex, adjoint);
      if (!inserted)
        for (auto [sum, v] : llvm::zip(it->second.floats(), adjoint.floats()))
          sum += v;
    }
    for (auto [i, arg] : llvm::enumerate(args)) {
      if (arg.differentiate && arg.value.isFloat()) {
        EXPECT_TRUE(analytic.count(i)) << "argument " << i << " is not an operand";
      }
    }

    for (auto &entry : analytic) {
      int64_t argIndex = entry.first;
      const Tensor &adjoint = entry.second;
      // The worst element of this argument, reported once.
      double argWorst = 0, worstAdjoint = 0, worstFd = 0;
      int64_t worstElement = -1;
      for (int64_t e = 0; e < adjoint.numElements(); ++e) {
        auto lossAt = [&](double delta) {
          llvm::SmallVector<Tensor> shifted(inputs);
          shifted[argIndex].floats()[e] += delta;
          auto value = runFunction(lossFn, shifted, options);
          EXPECT_TRUE(succeeded(value)) << errors;
          return succeeded(value) ? (*value)[0].floats()[0] : NAN;
        };
        double fd = (lossAt(kStep) - lossAt(-kStep)) / (2 * kStep);
        double error = std::fabs(adjoint.floats()[e] - fd) / std::max(1.0, std::fabs(fd));
        if (std::isnan(error) || error > argWorst || worstElement < 0) {
          argWorst = std::isnan(error) ? INFINITY : error;
          worstElement = e;
          worstAdjoint = adjoint.floats()[e];
          worstFd = fd;
        }
      }
      EXPECT_LT(argWorst, kTolerance)
          << "argument " << argIndex << ", worst at element " << worstElement << ": adjoint "
          << worstAdjoint << ", finite difference " << worstFd;
      worst = std::max(worst, argWorst);
    }
    checked.insert(op->getName().getStringRef().str());
    ++instances;
  }

  void checkElementwise();
  void checkContractions();
  void checkReductions();
  void checkNormalizations();
  void checkDataMovement();
  void checkLosses();

  MLIRContext context;
  std::string errors;
  ScopedDiagnosticHandler handler{&context, [this](Diagnostic &d) {
                                    errors += d.str() + "\n";
                                    return success();
                                  }};
  std::mt19937_64 rng{20240521};
  std::set<std::string> checked;
  int instances = 0;
  double worst = 0;
};

//===----------------------------------------------------------------------===//
// Instances, by op family
//===----------------------------------------------------------------------===//

void GradientCheckTest::checkElementwise() {
  // Inputs stay in each op's differentiable domain, away from kinks.
  enum Domain { Any, Positive, NonZero };
  struct Unary {
    std::string name;
    BuildFn build;
    Domain domain;
  };
  std::vector<Unary> unaries = {
      {"neg", unary<NegOp>(), Any},         {"abs", unary<AbsOp>(), NonZero},
      {"sqrt", unary<SqrtOp>(), Positive},  {"reciprocal", unary<ReciprocalOp>(), NonZero},
      {"exp", unary<ExpOp>(), Any},         {"log", unary<LogOp>(), Positive},
      {"erf", unary<ErfOp>(), Any},         {"tanh", unary<TanhOp>(), Any},
      {"sigmoid", unary<SigmoidOp>(), Any}, {"relu", unary<ReluOp>(), NonZero},
      {"sin", unary<SinOp>(), Any},         {"cos", unary<CosOp>(), Any}};
  for (const Unary &u : unaries) {
    for (const Shape &shape : {Shape{dim(), dim()}, Shape{2, 3, 4}, Shape{}}) {
      Arg x = u.domain == Positive  ? positive(shape)
              : u.domain == NonZero ? awayFromZero(shape)
                                    : uniform(shape, -3, 3);
      check(u.name + " " + shapeName(shape), {x}, u.build);
    }
  }
  for (const Shape &shape : {Shape{3, 4}, Shape{}})
    check("cast f64 -> f32 " + shapeName(shape), {uniform(shape)},
          [shape](OpBuilder &b, Location loc, ValueRange a) -> Value {
            return b.create<CastOp>(loc, RankedTensorType::get(shape, b.getF32Type()), a[0]);
          });

  // Broadcast patterns: equal shapes, [3,1,4] with [2,4], a scalar, and
  // [1,3] with [4,1] (both operands broadcast).
  int64_t m = dim(), n = dim();
  std::vector<std::pair<Shape, Shape>> patterns = {
      {{m, n}, {m, n}}, {{3, 1, 4}, {2, 4}}, {{2, 3}, {}}, {{1, 3}, {4, 1}}};
  for (auto [lhs, rhs] : patterns) {
    std::string suffix = " " + shapeName(lhs) + " " + shapeName(rhs);
    check("add" + suffix, {uniform(lhs), uniform(rhs)}, binary<AddOp>());
    check("sub" + suffix, {uniform(lhs), uniform(rhs)}, binary<SubOp>());
    check("mul" + suffix, {uniform(lhs), uniform(rhs)}, binary<MulOp>());
    check("div" + suffix, {uniform(lhs), awayFromZero(rhs)}, binary<DivOp>());
    check("pow" + suffix, {positive(lhs), uniform(rhs)}, binary<PowOp>());
    check("max" + suffix, {uniform(lhs), uniform(rhs)}, binary<MaxOp>());
    check("min" + suffix, {uniform(lhs), uniform(rhs)}, binary<MinOp>());
  }
  // A constant exponent: only the base's adjoint is wanted.
  check("pow constant exponent", {uniform({2, 3})},
        [](OpBuilder &b, Location loc, ValueRange a) -> Value {
          Value two = scalarConstant(b, loc, b.getF64Type(), 2.0);
          return b.create<PowOp>(loc, a[0], two);
        });
  // Ties split the adjoint evenly, which is what central differences see.
  check("max ties", {values({4}, {1, 2, 3, 4}), values({4}, {1, 0, 3, 5})}, binary<MaxOp>());
  check("min ties", {values({2, 2}, {1, 2, 3, 4}), values({2}, {1, 4})}, binary<MinOp>());

  check("where [3,4] [4] [3,1]", {bools({3, 4}), uniform({4}), uniform({3, 1})},
        [](OpBuilder &b, Location loc, ValueRange a) -> Value {
          return b.create<WhereOp>(loc, a[0], a[1], a[2]);
        });
  check("where [2,1,4] [2,3,4] []", {bools({2, 1, 4}), uniform({2, 3, 4}), uniform({})},
        [](OpBuilder &b, Location loc, ValueRange a) -> Value {
          return b.create<WhereOp>(loc, a[0], a[1], a[2]);
        });

  // Tables of any values (not a rotation's cos and sin): the rule must not
  // rely on cos^2 + sin^2 = 1 or on equal halves.
  auto rotary = [](bool transposed) {
    return [transposed](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<RotaryOp>(loc, a[0], a[1], a[2], transposed);
    };
  };
  check("rotary [2,3,4] tables [3,4]", {uniform({2, 3, 4}), uniform({3, 4}), uniform({3, 4})},
        rotary(false));
  check("rotary transposed [2,3,6] tables [2,1,6] [6]",
        {uniform({2, 3, 6}), uniform({2, 1, 6}), uniform({6})}, rotary(true));
  check("rotary [3,2] tables [3,2]", {uniform({3, 2}), uniform({3, 2}), uniform({3, 2})},
        rotary(false));
}

void GradientCheckTest::checkContractions() {
  int64_t m = dim(), k = dim(), n = dim();
  check("matmul", {uniform({m, k}), uniform({k, n})}, binary<MatMulOp>());
  check("matmul batch broadcast [2,1,3,4] @ [3,4,5]", {uniform({2, 1, 3, 4}), uniform({3, 4, 5})},
        binary<MatMulOp>());
  check("matmul 2d @ batch", {uniform({3, 4}), uniform({2, 4, 2})}, binary<MatMulOp>());
  check("matmul batch @ 2d", {uniform({2, 3, 4}), uniform({4, 2})}, binary<MatMulOp>());

  auto einsum = [](std::string equation) {
    return [equation](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<EinsumOp>(loc, equation, a);
    };
  };
  check("einsum matmul", {uniform({m, k}), uniform({k, n})}, einsum("ij,jk->ik"));
  check("einsum batch", {uniform({2, 3, 4}), uniform({2, 4, 3})}, einsum("bij,bjk->bik"));
  check("einsum attention scores", {uniform({2, 2, 3, 4}), uniform({2, 2, 3, 4})},
        einsum("bhqd,bhkd->bhqk"));
  check("einsum three operands", {uniform({2, 3}), uniform({3, 4}), uniform({4, 2})},
        einsum("ij,jk,kl->il"));
  check("einsum transpose", {uniform({3, 4})}, einsum("ij->ji"));
  check("einsum outer", {uniform({2, 3}), uniform({2, 4})}, einsum("bi,bj->bij"));
  check("einsum full contraction", {uniform({3, 4}), uniform({3, 4})}, einsum("ij,ij->"));
  // Labels summed out of one operand alone need a broadcast back.
  check("einsum lonely label", {uniform({3, 4}), uniform({2})}, einsum("ij,k->ik"));
  check("einsum row sum", {uniform({3, 4})}, einsum("ij->"));
  // Repeated labels within an operand take its diagonal.
  check("einsum diagonal", {uniform({3, 3})}, einsum("ii->i"));
  check("einsum trace times vector", {uniform({3, 3, 2}), uniform({2})}, einsum("iij,j->"));

  // Attention against finite differences of the whole (scores, softmax,
  // values) in f64: the rule's ppc.attention_grad, FlashAttention's backward.
  auto attention = [](double scale, bool causal) {
    return [scale, causal](OpBuilder &b, Location loc, ValueRange a) -> Value {
      auto q = llvm::cast<RankedTensorType>(a[0].getType());
      auto v = llvm::cast<RankedTensorType>(a[2].getType());
      llvm::SmallVector<int64_t> out(q.getShape()), lse(q.getShape().drop_back());
      out.back() = v.getShape().back();
      return b
          .create<AttentionOp>(loc,
                               TypeRange{RankedTensorType::get(out, q.getElementType()),
                                         RankedTensorType::get(lse, q.getElementType())},
                               a[0], a[1], a[2], a.size() > 3 ? a[3] : Value(),
                               b.getF64FloatAttr(scale), causal ? b.getUnitAttr() : UnitAttr())
          .getOutput();
    };
  };
  check("attention [2,3,4,3] [2,3,5,3] [2,3,5,2]",
        {uniform({2, 3, 4, 3}), uniform({2, 3, 5, 3}), uniform({2, 3, 5, 2})},
        attention(0.6, false));
  check("attention causal [2,4,3]", {uniform({2, 4, 3}), uniform({2, 4, 3}), uniform({2, 4, 2})},
        attention(0.5, true));
  check("attention with a fixed bias [2,1,3,4]",
        {uniform({2, 2, 3, 2}), uniform({2, 2, 4, 2}), uniform({2, 2, 4, 3}),
         fixed(uniform({2, 1, 3, 4}))},
        attention(0.7, false));
}

void GradientCheckTest::checkReductions() {
  auto reduce = [](auto tag, Shape axes, bool keepdims) {
    using OpT = decltype(tag);
    return [axes, keepdims](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<OpT>(loc, a[0], axes, keepdims);
    };
  };
  struct Variant {
    Shape axes;
    bool keepdims;
  };
  std::vector<Variant> variants = {{{1}, false},   {{1}, true},        {{0, 2}, false},
                                   {{0, 2}, true}, {{0, 1, 2}, false}, {{}, false}};
  for (auto [axes, keepdims] : variants) {
    std::string suffix = " axes " + std::to_string(axes.size()) + (keepdims ? " keepdims" : "");
    Shape shape = {dim(), dim(), dim()};
    check("reduce_sum" + suffix, {uniform(shape)}, reduce(ReduceSumOp(), axes, keepdims));
    check("reduce_mean" + suffix, {uniform(shape)}, reduce(ReduceMeanOp(), axes, keepdims));
    check("reduce_max" + suffix, {uniform(shape)}, reduce(ReduceMaxOp(), axes, keepdims));
    check("reduce_min" + suffix, {uniform(shape)}, reduce(ReduceMinOp(), axes, keepdims));
    check("reduce_prod" + suffix, {awayFromZero(shape)}, reduce(ReduceProdOp(), axes, keepdims));
  }
  // Two equal extrema share the adjoint, as central differences do.
  check("reduce_max tie", {values({2, 3}, {1, 3, 3, 0, 5, 2})}, reduce(ReduceMaxOp(), {1}, false));
  check("reduce_min tie", {values({2, 3}, {1, 3, 1, 0, 5, 2})},
        reduce(ReduceMinOp(), {0, 1}, true));
}

void GradientCheckTest::checkNormalizations() {
  auto softmax = [](auto tag, int64_t axis) {
    using OpT = decltype(tag);
    return [axis](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<OpT>(loc, a[0], axis);
    };
  };
  check("softmax middle axis", {uniform({2, 3, 4})}, softmax(SoftmaxOp(), 1));
  check("softmax last axis", {uniform({3, 5})}, softmax(SoftmaxOp(), 1));
  check("log_softmax middle axis", {uniform({2, 4, 3})}, softmax(LogSoftmaxOp(), 1));
  check("log_softmax first axis", {uniform({3, 2})}, softmax(LogSoftmaxOp(), 0));
  check("log_sum_exp last axis", {uniform({2, 3, 5})}, softmax(LogSumExpOp(), 2));
  check("log_sum_exp first axis", {uniform({3, 2})}, softmax(LogSumExpOp(), 0));

  auto layerNorm = [](int64_t axis, bool withBias) {
    return [axis, withBias](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<LayerNormOp>(loc, a[0], a[1], withBias ? a[2] : Value(),
                                   b.getI64IntegerAttr(axis), b.getF64FloatAttr(1e-5));
    };
  };
  check("layer_norm last axis", {uniform({2, 3, 4}), uniform({4}), uniform({4})},
        layerNorm(2, true));
  check("layer_norm two axes, lower-rank scale",
        {uniform({2, 3, 4}), uniform({4}), uniform({3, 4})}, layerNorm(1, true));
  check("layer_norm without bias, broadcast scale", {uniform({2, 3, 4}), uniform({3, 1})},
        layerNorm(1, false));
  check("layer_norm all axes, lower-rank bias", {uniform({2, 3}), uniform({2, 3}), uniform({3})},
        layerNorm(0, true));

  auto rmsNorm = [](int64_t axis) {
    return [axis](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<RmsNormOp>(loc, a[0], a[1], b.getI64IntegerAttr(axis),
                                 b.getF64FloatAttr(1e-6));
    };
  };
  check("rms_norm last axis", {uniform({2, 3, 4}), uniform({4})}, rmsNorm(2));
  check("rms_norm two axes, lower-rank scale", {uniform({2, 3, 4}), uniform({4})}, rmsNorm(1));
  check("rms_norm broadcast scale", {uniform({2, 3, 4}), uniform({3, 1})}, rmsNorm(1));
  check("rms_norm all axes, scalar scale", {uniform({2, 3}), uniform({})}, rmsNorm(0));
}

void GradientCheckTest::checkDataMovement() {
  auto reshape = [](Shape shape) {
    return [shape](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<ReshapeOp>(loc, RankedTensorType::get(shape, b.getF64Type()), a[0]);
    };
  };
  check("reshape [2,3,4] -> [4,6]", {uniform({2, 3, 4})}, reshape({4, 6}));
  check("reshape [6] -> [2,1,3]", {uniform({6})}, reshape({2, 1, 3}));
  auto transpose = [](Shape perm) {
    return [perm](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<TransposeOp>(loc, a[0], perm);
    };
  };
  check("transpose [2,0,1]", {uniform({2, 3, 4})}, transpose({2, 0, 1}));
  check("transpose [1,0]", {uniform({3, 4})}, transpose({1, 0}));
  check("concat axis 1", {uniform({2, 1, 3}), uniform({2, 2, 3}), uniform({2, 3, 3})},
        [](OpBuilder &b, Location loc, ValueRange a) -> Value {
          return b.create<ConcatOp>(loc, a, 1);
        });
  check("concat axis 0", {uniform({1, 3}), uniform({2, 3})},
        [](OpBuilder &b, Location loc, ValueRange a) -> Value {
          return b.create<ConcatOp>(loc, a, 0);
        });
  auto slice = [](Shape starts, Shape limits, Shape steps) {
    return [=](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<SliceOp>(loc, a[0], starts, limits, steps);
    };
  };
  check("slice forward strided", {uniform({5, 6})}, slice({1, 0}, {4, 6}, {1, 2}));
  check("slice negative steps", {uniform({6, 7})}, slice({5, 0}, {-1, 7}, {-2, 3}));
  check("slice full reverse", {uniform({3, 4})}, slice({2, 3}, {-1, -1}, {-1, -1}));

  auto gather = [](int64_t axis) {
    return [axis](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<GatherOp>(loc, a[0], a[1], axis);
    };
  };
  check("gather axis 0 repeated", {uniform({5, 3}), ints({4}, {1, 3, 1, -1})}, gather(0));
  check("gather axis 1 2-d indices", {uniform({3, 5}), ints({2, 2}, {0, 4, 4, -5}, DType::I32)},
        gather(1));
  check("gather scalar index", {uniform({4, 3}), ints({}, {2})}, gather(0));

  auto expand = [](Shape shape) {
    return [shape](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<ExpandOp>(loc, RankedTensorType::get(shape, b.getF64Type()), a[0]);
    };
  };
  check("expand [3,1] -> [2,3,4]", {uniform({3, 1})}, expand({2, 3, 4}));
  check("expand [] -> [2,2]", {uniform({})}, expand({2, 2}));

  auto trilu = [](bool upper, int64_t k) {
    return [upper, k](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<TriluOp>(loc, a[0], b.getBoolAttr(upper), b.getI64IntegerAttr(k));
    };
  };
  check("trilu upper", {uniform({4, 4})}, trilu(true, 0));
  check("trilu lower k=-1", {uniform({2, 3, 4})}, trilu(false, -1));
  check("trilu upper k=1", {uniform({3, 5})}, trilu(true, 1));

  auto cumsum = [](int64_t axis, bool exclusive, bool reverse) {
    return [=](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<CumSumOp>(loc, a[0], b.getI64IntegerAttr(axis), b.getBoolAttr(exclusive),
                                b.getBoolAttr(reverse));
    };
  };
  check("cumsum axis 1", {uniform({3, 5})}, cumsum(1, false, false));
  check("cumsum axis 0 exclusive", {uniform({4, 3})}, cumsum(0, true, false));
  check("cumsum axis 1 reverse", {uniform({2, 5, 3})}, cumsum(1, false, true));
  check("cumsum axis 2 exclusive reverse", {uniform({2, 3, 4})}, cumsum(2, true, true));

  auto scatterAdd = [](Shape shape, int64_t axis) {
    return [shape, axis](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<ScatterAddOp>(loc, RankedTensorType::get(shape, b.getF64Type()), a[0], a[1],
                                    axis);
    };
  };
  check("scatter_add axis 0 repeated", {uniform({4, 2}), ints({4}, {0, 2, 0, -1})},
        scatterAdd({3, 2}, 0));
  check("scatter_add axis 1", {uniform({2, 2, 2}), ints({2, 2}, {1, 1, 0, -1}, DType::I32)},
        scatterAdd({2, 3}, 1));

  auto insertSlice = [](Shape starts, Shape limits, Shape steps) {
    return [=](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<InsertSliceOp>(loc, a[0], a[1], starts, limits, steps);
    };
  };
  check("insert_slice negative steps", {uniform({2, 2}), uniform({3, 4})},
        insertSlice({2, 3}, {-1, 0}, {-2, -2}));
  check("insert_slice forward strided", {uniform({2, 2}), uniform({4, 5})},
        insertSlice({1, 0}, {3, 5}, {1, 3}));
}

void GradientCheckTest::checkLosses() {
  auto nllLoss = [](LossReduction reduction, std::optional<int64_t> ignoreIndex, bool withWeight) {
    return [=](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<NllLossOp>(loc, a[0], a[1], withWeight ? a[2] : Value(), reduction,
                                 ignoreIndex ? b.getI64IntegerAttr(*ignoreIndex) : IntegerAttr());
    };
  };
  struct Variant {
    LossReduction reduction;
    std::optional<int64_t> ignoreIndex;
    bool withWeight;
  };
  std::vector<Variant> variants;
  for (LossReduction reduction : {LossReduction::None, LossReduction::Sum, LossReduction::Mean})
    for (std::optional<int64_t> ignoreIndex :
         {std::optional<int64_t>(), std::optional<int64_t>(2), std::optional<int64_t>(-100)})
      for (bool withWeight : {false, true})
        variants.push_back({reduction, ignoreIndex, withWeight});
  for (auto [reduction, ignoreIndex, withWeight] : variants) {
    std::string name = "nll_loss " + stringifyLossReduction(reduction).str() +
                       (ignoreIndex ? " ignore " + std::to_string(*ignoreIndex) : "") +
                       (withWeight ? " weight" : "");
    // Targets name class 2 and, where it is the ignored index, -100.
    std::vector<Arg> args = {uniform({5, 4}), ints({5}, {2, 0, -100, 3, 2})};
    if (!ignoreIndex || *ignoreIndex != -100)
      args[1] = ints({5}, {2, 0, 1, 3, 2});
    if (withWeight)
      args.push_back(fixed(positive({4})));
    check(name, args, nllLoss(reduction, ignoreIndex, withWeight));
  }
  check("nll_loss spatial mean ignore weight",
        {uniform({3, 4, 2}), ints({3, 2}, {0, 1, 3, 3, 2, 1}, DType::I32), fixed(positive({4}))},
        nllLoss(LossReduction::Mean, 3, true));
  check("nll_loss spatial none", {uniform({2, 3, 2}), ints({2, 2}, {0, 2, 1, 1})},
        nllLoss(LossReduction::None, std::nullopt, false));
}

//===----------------------------------------------------------------------===//
// Tests
//===----------------------------------------------------------------------===//

/// A bare, unverified instance of every registered ppc op, to ask the
/// registry about (its queries depend only on the op's class here).
std::vector<Operation *> everyPpcOp(MLIRContext &context) {
  std::vector<Operation *> ops;
  for (RegisteredOperationName name : context.getRegisteredOperations())
    if (name.getDialectNamespace() == PpcDialect::getDialectNamespace())
      ops.push_back(Operation::create(UnknownLoc::get(&context), name, {}, {}, NamedAttrList(),
                                      nullptr, {}, 0));
  return ops;
}

TEST_F(GradientCheckTest, EveryRuleMatchesFiniteDifferences) {
  checkElementwise();
  checkContractions();
  checkReductions();
  checkNormalizations();
  checkDataMovement();
  checkLosses();

  const GradientRegistry &registry = GradientRegistry::get();
  std::set<std::string> withRule;
  for (Operation *op : everyPpcOp(context)) {
    if (registry.lookup(op))
      withRule.insert(op->getName().getStringRef().str());
    op->destroy();
  }
  EXPECT_EQ(checked, withRule) << "every op with a gradient rule needs instances";
  EXPECT_LT(worst, kTolerance);
  std::cout << "gradient check: " << checked.size() << " ops, " << instances
            << " instances, worst relative error " << worst << "\n";
  RecordProperty("ops", static_cast<int>(checked.size()));
  RecordProperty("instances", instances);
  RecordProperty("worst_relative_error", std::to_string(worst));
}

TEST_F(GradientCheckTest, EveryPpcOpHasARuleOrIsNonDifferentiable) {
  const GradientRegistry &registry = GradientRegistry::get();
  for (Operation *op : everyPpcOp(context)) {
    // The mesh, the collectives, send/recv and transfers appear only in
    // partitioned programs, after autodiff; the pass names a collective on a
    // gradient path. attention_grad, layer_norm_grad and rms_norm_grad
    // appear only in gradients (ppc takes no second derivatives).
    if (llvm::isa<MeshOp, SendOp, RecvOp, TransferOp, AttentionGradOp, LayerNormGradOp,
                  RmsNormGradOp>(op) ||
        op->hasTrait<CollectiveTrait>()) {
      op->destroy();
      continue;
    }
    bool rule = registry.lookup(op), none = registry.isNonDifferentiable(op);
    EXPECT_NE(rule, none) << op->getName().getStringRef().str()
                          << (rule ? " has a rule and is marked non-differentiable"
                                   : " has no rule and is not marked non-differentiable");
    op->destroy();
  }
}

TEST_F(GradientCheckTest, CastsToIntegersAndComparisonsAreNonDifferentiable) {
  OpBuilder b(&context);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  Value x =
      b.create<ConstantOp>(loc, DenseElementsAttr::get(RankedTensorType::get({2}, b.getF32Type()),
                                                       llvm::ArrayRef<float>{1.5f, -2.5f}));
  const GradientRegistry &registry = GradientRegistry::get();
  auto toInt = b.create<CastOp>(loc, RankedTensorType::get({2}, b.getI64Type()), x);
  auto toF64 = b.create<CastOp>(loc, RankedTensorType::get({2}, b.getF64Type()), x);
  auto less = b.create<LessOp>(loc, x, x);
  EXPECT_TRUE(registry.isNonDifferentiable(toInt));
  EXPECT_FALSE(registry.isNonDifferentiable(toF64));
  EXPECT_TRUE(registry.isNonDifferentiable(less));
  EXPECT_TRUE(registry.isNonDifferentiable(x.getDefiningOp()));
}

TEST_F(GradientCheckTest, NllLossWeightGradientIsAnError) {
  OpBuilder b(&context);
  Location loc = NameLoc::get(b.getStringAttr("loss_node"));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto f64 = [&](Shape shape) { return RankedTensorType::get(shape, b.getF64Type()); };
  auto func = b.create<func::FuncOp>(
      loc, "f",
      b.getFunctionType({f64({3, 4}), RankedTensorType::get({3}, b.getI64Type()), f64({4})}, {}));
  Block *body = func.addEntryBlock();
  b.setInsertionPointToEnd(body);
  auto loss = b.create<NllLossOp>(loc, body->getArgument(0), body->getArgument(1),
                                  body->getArgument(2), LossReduction::Mean, IntegerAttr());
  Value resultGrads[] = {scalarConstant(b, loc, b.getF64Type(), 1.0)};
  bool wanted[] = {true, false, true};
  llvm::SmallVector<Value> grads;
  const GradientRule *rule = GradientRegistry::get().lookup(loss);
  ASSERT_NE(rule, nullptr);
  EXPECT_TRUE(failed((*rule)(GradientRequest{b, loss, resultGrads, wanted}, grads)));
  EXPECT_NE(errors.find("nll_loss has no gradient with respect to its weight"), std::string::npos)
      << errors;
}

} // namespace
