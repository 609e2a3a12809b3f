//===- ShardingRulesTest.cpp - sharding rules against local execution -----===//
//
// For each instance (an op with operands of given shapes and attributes) and
// each parallel or reduction factor of its rule whose size is even, the test
// splits that factor in two, as a 2-way mesh axis would:
//  - every operand the factor appears in is viewed with its dimensions
//    broken into their factors' sizes, cut in half along the factor and
//    viewed back with local dimensions; the other operands stay whole;
//  - the op is rebuilt on the halves' types (attributes cloned, result types
//    from the rule, then verified) and both halves run on the reference
//    executor in f64;
//  - the halves' results are combined (concatenated along the factor where
//    the result has it, summed for a reduction factor, means as the
//    partitioner will combine them) and compared with the whole op's result.
// Every op with a rule must be checked here.
//
//===----------------------------------------------------------------------===//

#include "passes/sharding/ShardingRules.h"
#include "executor/Interpreter.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "passes/sharding/LocalForms.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <random>
#include <set>

using namespace mlir;
using namespace ppc;

namespace {

constexpr double kTolerance = 1e-12;

/// Builds the op under test from the function's arguments, one per operand
/// in order, and returns its result.
using BuildFn = std::function<Value(OpBuilder &b, Location loc, ValueRange args)>;

/// Combines the two halves' results of a reduction factor; `localArgs` are
/// the halves' arguments. Sums unless an instance says otherwise.
using CombineFn = std::function<Tensor(const Tensor &first, const Tensor &second,
                                       llvm::ArrayRef<std::vector<Tensor>> localArgs)>;

std::string shapeName(llvm::ArrayRef<int64_t> shape) {
  std::string name = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    name += (i ? "," : "") + std::to_string(d);
  return name + "]";
}

//===----------------------------------------------------------------------===//
// Tensors viewed through their factors
//===----------------------------------------------------------------------===//

/// The sizes of a tensor's factors, dimension by dimension, major to minor.
Shape factorShape(const ShardingRule &rule, const TensorFactors &dims) {
  Shape shape;
  for (const auto &factors : dims)
    for (int64_t f : factors)
      shape.push_back(rule.factorSizes[f]);
  return shape;
}

/// Where factor `f` is in `factorShape`, or -1.
int64_t factorPosition(const TensorFactors &dims, int64_t f) {
  int64_t position = 0;
  for (const auto &factors : dims)
    for (int64_t g : factors) {
      if (g == f)
        return position;
      ++position;
    }
  return -1;
}

/// The dimensions of a tensor's shard when factor `f` is split in two.
Shape localShape(const ShardingRule &rule, const TensorFactors &dims, int64_t f) {
  Shape shape;
  for (const auto &factors : dims) {
    int64_t size = 1;
    for (int64_t g : factors)
      size *= g == f ? rule.factorSizes[g] / 2 : rule.factorSizes[g];
    shape.push_back(size);
  }
  return shape;
}

void copyElement(const Tensor &from, int64_t i, Tensor &to, int64_t j) {
  if (from.isFloat())
    to.floats()[j] = from.floats()[i];
  else
    to.ints()[j] = from.ints()[i];
}

/// A tensor of `factors` shape seen as [outer, size, inner] around `axis`.
struct AxisView {
  int64_t outer = 1, size, inner = 1;
  AxisView(llvm::ArrayRef<int64_t> factors, int64_t axis) : size(factors[axis]) {
    for (int64_t s : factors.take_front(axis))
      outer *= s;
    for (int64_t s : factors.drop_front(axis + 1))
      inner *= s;
  }
};

/// Half `half` of `t` along `axis` of its factor shape, with `shape`.
Tensor halfOf(const Tensor &t, llvm::ArrayRef<int64_t> factors, int64_t axis, int half,
              llvm::ArrayRef<int64_t> shape) {
  AxisView v(factors, axis);
  int64_t h = v.size / 2;
  Tensor out(t.dtype(), shape);
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t s = 0; s < h; ++s)
      for (int64_t i = 0; i < v.inner; ++i)
        copyElement(t, (o * v.size + half * h + s) * v.inner + i, out, (o * h + s) * v.inner + i);
  return out;
}

/// The inverse of `halfOf`: the halves joined along `axis`.
Tensor joinHalves(const Tensor &first, const Tensor &second, llvm::ArrayRef<int64_t> factors,
                  int64_t axis, llvm::ArrayRef<int64_t> shape) {
  AxisView v(factors, axis);
  int64_t h = v.size / 2;
  Tensor out(first.dtype(), shape);
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t s = 0; s < v.size; ++s)
      for (int64_t i = 0; i < v.inner; ++i)
        copyElement(s < h ? first : second, (o * h + s % h) * v.inner + i, out,
                    (o * v.size + s) * v.inner + i);
  return out;
}

Tensor sum(const Tensor &first, const Tensor &second, llvm::ArrayRef<std::vector<Tensor>>) {
  Tensor out = first;
  for (int64_t e = 0; e < out.numElements(); ++e) {
    if (out.isFloat())
      out.floats()[e] += second.floats()[e];
    else
      out.ints()[e] += second.ints()[e];
  }
  return out;
}

/// The largest difference relative to max(1, |expected|); infinite on a
/// shape, dtype or integer mismatch.
double relativeError(const Tensor &actual, const Tensor &expected) {
  if (actual.shape() != expected.shape() || actual.dtype() != expected.dtype())
    return INFINITY;
  double worst = 0;
  for (int64_t e = 0; e < expected.numElements(); ++e) {
    if (!expected.isFloat()) {
      if (actual.ints()[e] != expected.ints()[e])
        return INFINITY;
      continue;
    }
    double a = actual.floats()[e], b = expected.floats()[e];
    double error = std::fabs(a - b) / std::max(1.0, std::fabs(b));
    worst = std::isnan(error) ? INFINITY : std::max(worst, error);
  }
  return worst;
}

//===----------------------------------------------------------------------===//
// The check
//===----------------------------------------------------------------------===//

/// A slice's (or insert_slice's) bounds on a shard, as the partitioner
/// rewrites them (`localizeSliceBounds`).
template <typename OpT>
void setLocalBounds(OpT slice, llvm::ArrayRef<int64_t> globalShape,
                    llvm::ArrayRef<int64_t> localShape) {
  llvm::SmallVector<int64_t> starts(slice.getStarts()), limits(slice.getLimits());
  localizeSliceBounds(starts, limits, slice.getSteps(), globalShape, localShape);
  slice.setStarts(starts);
  slice.setLimits(limits);
}

/// The attributes the rules do not carry over unchanged: a slice's (or
/// insert_slice's) bounds along a split dimension.
void localizeAttributes(Operation *op, Operation *global, llvm::ArrayRef<Tensor> localArgs) {
  auto shape = [&](unsigned i) {
    return llvm::cast<RankedTensorType>(global->getOperand(i).getType()).getShape();
  };
  if (auto slice = llvm::dyn_cast<SliceOp>(op))
    setLocalBounds(slice, shape(0), localArgs[0].shape());
  if (auto insert = llvm::dyn_cast<InsertSliceOp>(op))
    setLocalBounds(insert, shape(1), localArgs[1].shape());
}

template <typename OpT> BuildFn unary() {
  return [](OpBuilder &b, Location loc, ValueRange a) -> Value { return b.create<OpT>(loc, a[0]); };
}

template <typename OpT> BuildFn binary() {
  return [](OpBuilder &b, Location loc, ValueRange a) -> Value {
    return b.create<OpT>(loc, a[0], a[1]);
  };
}

/// A one-operand op whose result type is given: `shape` with `element`
/// (f64 if null).
template <typename OpT> BuildFn typed(Shape shape, Type element) {
  return [=](OpBuilder &b, Location loc, ValueRange a) -> Value {
    Type type = RankedTensorType::get(shape, element ? element : b.getF64Type());
    return b.create<OpT>(loc, type, a[0]);
  };
}

class ShardingRulesTest : public ::testing::Test {
protected:
  ShardingRulesTest() { context.loadDialect<PpcDialect, func::FuncDialect>(); }

  double draw(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }
  int64_t drawInt(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi - 1)(rng);
  }
  Tensor uniform(llvm::ArrayRef<int64_t> shape, double lo = -2, double hi = 2) {
    Tensor t(DType::F64, shape);
    for (double &v : t.floats())
      v = draw(lo, hi);
    return t;
  }
  Tensor positive(llvm::ArrayRef<int64_t> shape) { return uniform(shape, 0.5, 2); }
  Tensor nonZero(llvm::ArrayRef<int64_t> shape) {
    Tensor t = uniform(shape, 0.5, 2);
    for (double &v : t.floats())
      v = draw(0, 1) < 0.5 ? -v : v;
    return t;
  }
  /// Small whole numbers, so that comparisons find equal elements.
  Tensor wholes(llvm::ArrayRef<int64_t> shape) {
    Tensor t(DType::F64, shape);
    for (double &v : t.floats())
      v = drawInt(0, 3);
    return t;
  }
  /// Integers in [lo, hi).
  Tensor ints(llvm::ArrayRef<int64_t> shape, int64_t lo, int64_t hi, DType dtype = DType::I64) {
    Tensor t(dtype, shape);
    for (int64_t e = 0; e < t.numElements(); ++e)
      t.setInt(e, drawInt(lo, hi));
    return t;
  }
  Tensor bools(llvm::ArrayRef<int64_t> shape) { return ints(shape, 0, 2, DType::I1); }

  func::FuncOp addFunction(OpBuilder &b, ModuleOp module, Location loc, llvm::StringRef name,
                           llvm::ArrayRef<Tensor> args) {
    llvm::SmallVector<Type> types;
    for (const Tensor &arg : args)
      types.push_back(RankedTensorType::get(arg.shape(), mlirType(arg.dtype(), &context)));
    b.setInsertionPointToEnd(module.getBody());
    auto func = b.create<func::FuncOp>(loc, name, b.getFunctionType(types, {}));
    b.setInsertionPointToEnd(func.addEntryBlock());
    return func;
  }

  void finish(OpBuilder &b, Location loc, func::FuncOp func, Operation *op) {
    b.create<func::ReturnOp>(loc, op->getResults());
    func.setType(b.getFunctionType(func.getArgumentTypes(), op->getResultTypes()));
  }

  /// Checks every even parallel or reduction factor of the rule of the op
  /// that `build` creates from `args`. `combine` replaces the sum of a
  /// reduction factor's halves (means).
  void check(const std::string &name, std::vector<Tensor> args, BuildFn build,
             CombineFn combine = sum) {
    SCOPED_TRACE(name);
    errors.clear();
    OpBuilder b(&context);
    Location loc = NameLoc::get(b.getStringAttr(name));
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    func::FuncOp full = addFunction(b, *module, loc, "full", args);
    Operation *op = build(b, loc, full.getArguments()).getDefiningOp();
    finish(b, loc, full, op);
    ASSERT_TRUE(succeeded(verify(*module))) << errors;
    ASSERT_TRUE(llvm::equal(op->getOperands(), full.getArguments()))
        << "the operands must be the arguments, in order";
    std::string opName = op->getName().getStringRef().str();

    std::optional<ShardingRule> rule = ShardingRuleRegistry::get().lookup(op);
    ASSERT_TRUE(rule) << "no sharding rule for " << opName;
    ASSERT_EQ(rule->verify(op), "") << rule->str();
    SCOPED_TRACE(rule->str());
    // A split indexed or normalized factor needs more than a clone.
    for (FactorKind kind : rule->factorKinds) {
      if (kind == FactorKind::IndexedReduction || kind == FactorKind::Normalized) {
        EXPECT_TRUE(lookupLocalForm(op))
            << opName << " has an indexed or normalized factor and no local form "
            << "(passes/sharding/LocalForms.cpp)";
      }
    }

    ExecOptions options{/*f64=*/true};
    auto expected = runFunction(full, args, options);
    ASSERT_TRUE(succeeded(expected)) << errors;

    for (int64_t f = 0, e = rule->factorSizes.size(); f < e; ++f) {
      // Indexed and normalized factors are split by local forms, not by
      // cloning the op: PartitionTest checks them through the partitioner.
      if (rule->factorKinds[f] == FactorKind::NeedReplication ||
          rule->factorKinds[f] == FactorKind::IndexedReduction ||
          rule->factorKinds[f] == FactorKind::Normalized || rule->factorSizes[f] % 2 != 0)
        continue;
      SCOPED_TRACE("factor #" + std::to_string(f));
      std::vector<Tensor> localArgs[2];
      llvm::SmallVector<Tensor> localResults[2];
      for (int half : {0, 1}) {
        for (auto [arg, dims] : llvm::zip(args, rule->operands)) {
          int64_t position = factorPosition(dims, f);
          localArgs[half].push_back(position < 0 ? arg
                                                 : halfOf(arg, factorShape(*rule, dims), position,
                                                          half, localShape(*rule, dims, f)));
        }
        std::string fnName = "local_" + std::to_string(f) + "_" + std::to_string(half);
        func::FuncOp local = addFunction(b, *module, loc, fnName, localArgs[half]);
        IRMapping mapping;
        mapping.map(full.getArguments(), local.getArguments());
        Operation *localOp = b.clone(*op, mapping);
        for (auto [result, dims] : llvm::zip(localOp->getResults(), rule->results)) {
          auto type = llvm::cast<RankedTensorType>(result.getType());
          result.setType(type.clone(localShape(*rule, dims, f)));
        }
        localizeAttributes(localOp, op, localArgs[half]);
        // A constant's operand is its value.
        if (auto constant = llvm::dyn_cast<ConstantOp>(localOp)) {
          const TensorFactors &dims = rule->results[0];
          auto value = Tensor::fromAttr(constant.getValue());
          ASSERT_TRUE(succeeded(value));
          constant.setValueAttr(halfOf(*value, factorShape(*rule, dims), factorPosition(dims, f),
                                       half, localShape(*rule, dims, f))
                                    .toAttr(&context));
        }
        finish(b, loc, local, localOp);
        ASSERT_TRUE(succeeded(verify(local))) << errors;
        auto results = runFunction(local, localArgs[half], options);
        ASSERT_TRUE(succeeded(results)) << errors;
        localResults[half] = std::move(*results);
      }

      for (auto [r, dims] : llvm::enumerate(rule->results)) {
        const Tensor &first = localResults[0][r], &second = localResults[1][r];
        int64_t position = factorPosition(dims, f);
        Tensor combined;
        if (position >= 0)
          combined =
              joinHalves(first, second, factorShape(*rule, dims), position, (*expected)[r].shape());
        else if (rule->factorKinds[f] == FactorKind::Reduction)
          combined = combine(first, second, localArgs);
        else
          FAIL() << "parallel factor #" << f << " is not in result " << r;
        double error = relativeError(combined, (*expected)[r]);
        EXPECT_LE(error, kTolerance) << "result " << r;
        worst = std::max(worst, error);
      }
      ++splits;
    }
    checked.insert(opName);
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
  std::mt19937_64 rng{20241121};
  std::set<std::string> checked;
  int instances = 0, splits = 0;
  double worst = 0;
};

//===----------------------------------------------------------------------===//
// Instances, by op family
//===----------------------------------------------------------------------===//

void ShardingRulesTest::checkElementwise() {
  auto constant = [](Tensor value) {
    return [value](OpBuilder &b, Location loc, ValueRange) -> Value {
      return b.create<ConstantOp>(loc, value.toAttr(b.getContext()));
    };
  };
  check("constant f64 [4,6]", {}, constant(uniform({4, 6})));
  check("constant i64 [6,1]", {}, constant(ints({6, 1}, -5, 5)));
  check("constant scalar", {}, constant(uniform({})));

  enum Domain { Any, Positive, NonZero, Bool };
  std::vector<std::tuple<std::string, BuildFn, Domain>> unaries = {
      {"neg", unary<NegOp>(), Any},         {"abs", unary<AbsOp>(), Any},
      {"sqrt", unary<SqrtOp>(), Positive},  {"reciprocal", unary<ReciprocalOp>(), NonZero},
      {"exp", unary<ExpOp>(), Any},         {"log", unary<LogOp>(), Positive},
      {"erf", unary<ErfOp>(), Any},         {"tanh", unary<TanhOp>(), Any},
      {"sigmoid", unary<SigmoidOp>(), Any}, {"relu", unary<ReluOp>(), Any},
      {"sin", unary<SinOp>(), Any},         {"cos", unary<CosOp>(), Any},
      {"floor", unary<FloorOp>(), Any},     {"ceil", unary<CeilOp>(), Any},
      {"sign", unary<SignOp>(), Any},       {"not", unary<NotOp>(), Bool}};
  for (const auto &[name, build, domain] : unaries)
    for (const Shape &shape : {Shape{4, 6}, Shape{2, 1, 4}, Shape{}}) {
      Tensor x = domain == Positive  ? positive(shape)
                 : domain == NonZero ? nonZero(shape)
                 : domain == Bool    ? bools(shape)
                                     : uniform(shape);
      check(name + " " + shapeName(shape), {x}, build);
    }

  Builder types(&context);
  check("cast f64 -> f32", {uniform({4, 6})}, typed<CastOp>({4, 6}, types.getF32Type()));
  check("cast f64 -> i64", {uniform({2, 4}, -9, 9)}, typed<CastOp>({2, 4}, types.getI64Type()));
  check("cast i64 -> f64", {ints({6, 2}, -9, 9)}, typed<CastOp>({6, 2}, {}));
  check("cast i1 -> f64", {bools({2, 2})}, typed<CastOp>({2, 2}, {}));

  // Equal shapes, one operand broadcast in its leading and middle
  // dimensions, a scalar, and both operands broadcast.
  std::vector<std::pair<Shape, Shape>> patterns = {
      {{4, 6}, {4, 6}}, {{2, 1, 4}, {6, 4}}, {{2, 4}, {}}, {{1, 6}, {4, 1}}};
  for (auto [lhs, rhs] : patterns) {
    std::string suffix = " " + shapeName(lhs) + " " + shapeName(rhs);
    check("add" + suffix, {uniform(lhs), uniform(rhs)}, binary<AddOp>());
    check("sub" + suffix, {uniform(lhs), uniform(rhs)}, binary<SubOp>());
    check("mul" + suffix, {uniform(lhs), uniform(rhs)}, binary<MulOp>());
    check("div" + suffix, {uniform(lhs), nonZero(rhs)}, binary<DivOp>());
    check("pow" + suffix, {positive(lhs), uniform(rhs)}, binary<PowOp>());
    check("max" + suffix, {uniform(lhs), uniform(rhs)}, binary<MaxOp>());
    check("min" + suffix, {uniform(lhs), uniform(rhs)}, binary<MinOp>());
    check("equal" + suffix, {wholes(lhs), wholes(rhs)}, binary<EqualOp>());
    check("less" + suffix, {wholes(lhs), wholes(rhs)}, binary<LessOp>());
    check("greater" + suffix, {wholes(lhs), wholes(rhs)}, binary<GreaterOp>());
    check("and" + suffix, {bools(lhs), bools(rhs)}, binary<AndOp>());
    check("or" + suffix, {bools(lhs), bools(rhs)}, binary<OrOp>());
    check("xor" + suffix, {bools(lhs), bools(rhs)}, binary<XorOp>());
  }
  auto where = [](OpBuilder &b, Location loc, ValueRange a) -> Value {
    return b.create<WhereOp>(loc, a[0], a[1], a[2]);
  };
  check("where [4,6] [6] [4,1]", {bools({4, 6}), uniform({6}), uniform({4, 1})}, where);
  check("where [2,1,4] [2,6,4] []", {bools({2, 1, 4}), uniform({2, 6, 4}), uniform({})}, where);
  auto rotary = [](bool transposed) {
    return [transposed](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<RotaryOp>(loc, a[0], a[1], a[2], transposed);
    };
  };
  check("rotary [2,4,6,4] tables [6,4]", {uniform({2, 4, 6, 4}), uniform({6, 4}), uniform({6, 4})},
        rotary(false));
  check("rotary transposed [2,4,6] tables [2,1,6] [6]",
        {uniform({2, 4, 6}), uniform({2, 1, 6}), uniform({6})}, rotary(true));
}

void ShardingRulesTest::checkContractions() {
  check("matmul [4,6] @ [6,2]", {uniform({4, 6}), uniform({6, 2})}, binary<MatMulOp>());
  check("matmul batch broadcast [2,1,4,6] @ [2,6,4]", {uniform({2, 1, 4, 6}), uniform({2, 6, 4})},
        binary<MatMulOp>());
  check("matmul 2d @ batch [4,6] @ [2,6,4]", {uniform({4, 6}), uniform({2, 6, 4})},
        binary<MatMulOp>());
  check("matmul batch @ 2d [2,4,6] @ [6,2]", {uniform({2, 4, 6}), uniform({6, 2})},
        binary<MatMulOp>());
  check("matmul size-1 batch [1,4,2] @ [2,2,6]", {uniform({1, 4, 2}), uniform({2, 2, 6})},
        binary<MatMulOp>());

  auto einsum = [](std::string equation) {
    return [equation](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<EinsumOp>(loc, equation, a);
    };
  };
  check("einsum matmul", {uniform({4, 6}), uniform({6, 2})}, einsum("ij,jk->ik"));
  check("einsum batch", {uniform({2, 4, 6}), uniform({2, 6, 4})}, einsum("bij,bjk->bik"));
  check("einsum attention scores", {uniform({2, 2, 4, 6}), uniform({2, 2, 4, 6})},
        einsum("bhqd,bhkd->bhqk"));
  check("einsum three operands", {uniform({2, 4}), uniform({4, 6}), uniform({6, 2})},
        einsum("ij,jk,kl->il"));
  check("einsum transpose", {uniform({4, 6})}, einsum("ij->ji"));
  check("einsum outer", {uniform({2, 4}), uniform({2, 6})}, einsum("bi,bj->bij"));
  check("einsum full contraction", {uniform({4, 6}), uniform({4, 6})}, einsum("ij,ij->"));
  check("einsum lonely label", {uniform({4, 6}), uniform({2})}, einsum("ij,k->ik"));
  check("einsum sum", {uniform({4, 6})}, einsum("ij->"));
  check("einsum diagonal", {uniform({4, 4})}, einsum("ii->i"));
  check("einsum trace times vector", {uniform({4, 4, 2}), uniform({2})}, einsum("iij,j->"));

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
  check("attention [2,4,3,5] [2,4,6,5] [2,4,6,2]",
        {uniform({2, 4, 3, 5}), uniform({2, 4, 6, 5}), uniform({2, 4, 6, 2})},
        attention(0.5, false));
  check("attention causal [4,6,4]", {uniform({4, 6, 4}), uniform({4, 6, 4}), uniform({4, 6, 4})},
        attention(0.25, true));
  check(
      "attention bias [2,1,4,6] over [2,2,4,6]",
      {uniform({2, 2, 4, 3}), uniform({2, 2, 6, 3}), uniform({2, 2, 6, 4}), uniform({2, 1, 4, 6})},
      attention(0.5, false));
  auto attentionGrad = [](bool causal) {
    return [causal](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b
          .create<AttentionGradOp>(loc, TypeRange{a[0].getType(), a[1].getType(), a[2].getType()},
                                   a[0], a[1], a[2], a[3], a[4], a[5],
                                   a.size() > 6 ? a[6] : Value(), b.getF64FloatAttr(0.5),
                                   causal ? b.getUnitAttr() : UnitAttr())
          .getDQ();
    };
  };
  check("attention_grad [2,2,4,3] [2,2,6,3] [2,2,6,4] bias [2,1,1,6]",
        {uniform({2, 2, 4, 3}), uniform({2, 2, 6, 3}), uniform({2, 2, 6, 4}), uniform({2, 2, 4, 4}),
         uniform({2, 2, 4}, 1, 3), uniform({2, 2, 4, 4}), uniform({2, 1, 1, 6})},
        attentionGrad(false));
  check("attention_grad causal [4,4,3]",
        {uniform({4, 4, 3}), uniform({4, 4, 3}), uniform({4, 4, 3}), uniform({4, 4, 3}),
         uniform({4, 4}, 1, 3), uniform({4, 4, 3})},
        attentionGrad(true));
}

void ShardingRulesTest::checkReductions() {
  auto reduce = [](auto tag, Shape axes, bool keepdims) {
    using OpT = decltype(tag);
    return [axes, keepdims](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<OpT>(loc, a[0], axes, keepdims);
    };
  };
  // The partitioner divides the summed partial means by the shard count.
  CombineFn mean = [](const Tensor &first, const Tensor &second,
                      llvm::ArrayRef<std::vector<Tensor>> args) {
    Tensor out = sum(first, second, args);
    for (double &v : out.floats())
      v /= 2;
    return out;
  };
  std::vector<std::pair<Shape, bool>> variants = {
      {{1}, false},       {{1}, true},       {{0, 2}, false}, {{0, 2}, true},
      {{0, 1, 2}, false}, {{0, 1, 2}, true}, {{}, false}};
  for (auto [axes, keepdims] : variants) {
    std::string suffix = " axes " + shapeName(axes) + (keepdims ? " keepdims" : "");
    Shape shape = {2, 4, 6};
    check("reduce_sum" + suffix, {uniform(shape)}, reduce(ReduceSumOp(), axes, keepdims));
    check("reduce_mean" + suffix, {uniform(shape)}, reduce(ReduceMeanOp(), axes, keepdims), mean);
    check("reduce_max" + suffix, {uniform(shape)}, reduce(ReduceMaxOp(), axes, keepdims));
    check("reduce_min" + suffix, {uniform(shape)}, reduce(ReduceMinOp(), axes, keepdims));
    check("reduce_prod" + suffix, {positive(shape)}, reduce(ReduceProdOp(), axes, keepdims));
  }
}

void ShardingRulesTest::checkNormalizations() {
  auto softmax = [](auto tag, int64_t axis) {
    using OpT = decltype(tag);
    return [axis](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<OpT>(loc, a[0], axis);
    };
  };
  check("softmax last axis", {uniform({2, 4, 6})}, softmax(SoftmaxOp(), 2));
  check("softmax middle axis", {uniform({2, 4, 6})}, softmax(SoftmaxOp(), 1));
  check("log_softmax last axis", {uniform({4, 6})}, softmax(LogSoftmaxOp(), 1));
  check("log_softmax first axis", {uniform({4, 2, 2})}, softmax(LogSoftmaxOp(), 0));
  check("log_sum_exp last axis", {uniform({2, 4, 6})}, softmax(LogSumExpOp(), 2));
  check("log_sum_exp middle axis", {uniform({2, 4, 6})}, softmax(LogSumExpOp(), 1));

  auto layerNorm = [](int64_t axis, bool withBias) {
    return [axis, withBias](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<LayerNormOp>(loc, a[0], a[1], withBias ? a[2] : Value(),
                                   b.getI64IntegerAttr(axis), b.getF64FloatAttr(1e-5));
    };
  };
  check("layer_norm last axis", {uniform({2, 4, 6}), uniform({6}), uniform({6})},
        layerNorm(2, true));
  check("layer_norm two axes, lower-rank scale",
        {uniform({2, 4, 6}), uniform({6}), uniform({4, 6})}, layerNorm(1, true));
  check("layer_norm without bias, broadcast scale", {uniform({4, 2, 6}), uniform({2, 1})},
        layerNorm(1, false));
  check("layer_norm all axes", {uniform({2, 4}), uniform({2, 4}), uniform({4})},
        layerNorm(0, true));
  // layer_norm_grad and rms_norm_grad, by their input gradient.
  auto normGrad = [](auto op, int64_t axis) {
    using OpT = decltype(op);
    return [axis](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b
          .create<OpT>(loc, a[0], a[1], a[2], b.getI64IntegerAttr(axis), b.getF64FloatAttr(1e-5))
          .getInputGrad();
    };
  };
  check("layer_norm_grad last axis", {uniform({2, 4, 6}), uniform({6}), uniform({2, 4, 6})},
        normGrad(LayerNormGradOp(), 2));
  check("layer_norm_grad two axes, broadcast scale",
        {uniform({4, 2, 6}), uniform({2, 1}), uniform({4, 2, 6})}, normGrad(LayerNormGradOp(), 1));

  auto rmsNorm = [](int64_t axis) {
    return [axis](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<RmsNormOp>(loc, a[0], a[1], b.getI64IntegerAttr(axis),
                                 b.getF64FloatAttr(1e-6));
    };
  };
  check("rms_norm last axis", {uniform({2, 4, 6}), uniform({6})}, rmsNorm(2));
  check("rms_norm two axes, broadcast scale", {uniform({4, 2, 6}), uniform({2, 1})}, rmsNorm(1));
  check("rms_norm_grad last axis", {uniform({2, 4, 6}), uniform({6}), uniform({2, 4, 6})},
        normGrad(RmsNormGradOp(), 2));
  check("rms_norm_grad two axes, broadcast scale",
        {uniform({4, 2, 6}), uniform({2, 1}), uniform({4, 2, 6})}, normGrad(RmsNormGradOp(), 1));
}

void ShardingRulesTest::checkDataMovement() {
  auto reshape = [](Shape to) { return typed<ReshapeOp>(to, {}); };
  check("reshape split [2,4,8] -> [2,4,2,4]", {uniform({2, 4, 8})}, reshape({2, 4, 2, 4}));
  check("reshape merge [4,6] -> [24]", {uniform({4, 6})}, reshape({24}));
  check("reshape split [24] -> [2,3,4]", {uniform({24})}, reshape({2, 3, 4}));
  check("reshape regroup [6,4] -> [4,6]", {uniform({6, 4})}, reshape({4, 6}));
  check("reshape regroup [4,6] -> [6,4]", {uniform({4, 6})}, reshape({6, 4}));
  check("reshape groups [2,3,4,6] -> [3,2,6,4]", {uniform({2, 3, 4, 6})}, reshape({3, 2, 6, 4}));
  check("reshape swap [2,3] -> [3,2]", {uniform({2, 3})}, reshape({3, 2}));
  check("reshape squeeze [2,1,4] -> [2,4]", {uniform({2, 1, 4})}, reshape({2, 4}));
  check("reshape unsqueeze [4] -> [1,4,1]", {uniform({4})}, reshape({1, 4, 1}));
  check("reshape heads [2,4,8] -> [8,2,4]", {uniform({2, 4, 8})}, reshape({8, 2, 4}));
  check("reshape to scalar [1] -> []", {uniform({1})}, reshape({}));

  auto transpose = [](Shape perm) {
    return [perm](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<TransposeOp>(loc, a[0], perm);
    };
  };
  check("transpose [2,0,1]", {uniform({2, 4, 6})}, transpose({2, 0, 1}));
  check("transpose [1,0]", {uniform({4, 6})}, transpose({1, 0}));
  check("transpose heads [0,2,1,3]", {uniform({2, 4, 2, 6})}, transpose({0, 2, 1, 3}));

  auto concat = [](int64_t axis) {
    return [axis](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<ConcatOp>(loc, a, axis);
    };
  };
  check("concat axis 1", {uniform({2, 1, 4}), uniform({2, 2, 4}), uniform({2, 3, 4})}, concat(1));
  check("concat axis 0", {uniform({2, 6}), uniform({4, 6})}, concat(0));

  auto slice = [](Shape starts, Shape limits, Shape steps) {
    return [=](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<SliceOp>(loc, a[0], starts, limits, steps);
    };
  };
  check("slice strided", {uniform({4, 6})}, slice({0, 0}, {4, 6}, {1, 2}));
  check("slice split", {uniform({2, 12})}, slice({0, 4}, {2, 8}, {1, 1}));
  check("slice negative step", {uniform({6, 8})}, slice({5, 0}, {-1, 8}, {-2, 1}));
  check("slice reverse", {uniform({4, 6})}, slice({3, 5}, {-1, -1}, {-1, -1}));
  check("slice identity", {uniform({4, 6})}, slice({0, 0}, {4, 6}, {1, 1}));
  // q, k and v out of a fused projection: blocks of 8 (their parts split).
  check("slice fused qkv first", {uniform({2, 3, 24})}, slice({0, 0, 0}, {2, 3, 8}, {1, 1, 1}));
  check("slice fused qkv last", {uniform({2, 24})}, slice({0, 16}, {2, 24}, {1, 1}));
  check("slice two blocks", {uniform({2, 24})}, slice({0, 8}, {2, 24}, {1, 1}));

  auto insertSlice = [](Shape starts, Shape limits, Shape steps) {
    return [=](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<InsertSliceOp>(loc, a[0], a[1], starts, limits, steps);
    };
  };
  check("insert_slice strided", {uniform({2, 4}), uniform({6, 4})},
        insertSlice({1, 0}, {5, 4}, {2, 1}));
  check("insert_slice negative step", {uniform({2, 6}), uniform({4, 6})},
        insertSlice({3, 0}, {-1, 6}, {-2, 1}));
  check("insert_slice fused qkv middle", {uniform({2, 8}), uniform({2, 24})},
        insertSlice({0, 8}, {2, 16}, {1, 1}));
  check("insert_slice both dims", {uniform({2, 2}), uniform({3, 4})},
        insertSlice({2, 3}, {-1, 0}, {-2, -2}));

  auto gather = [](int64_t axis) {
    return [axis](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<GatherOp>(loc, a[0], a[1], axis);
    };
  };
  check("gather axis 0", {uniform({6, 4}), ints({4}, -6, 6)}, gather(0));
  check("gather embedding [2,4] i32", {uniform({8, 6}), ints({2, 4}, 0, 8, DType::I32)}, gather(0));
  check("gather axis 1 2-d indices", {uniform({4, 6}), ints({2, 2}, -6, 6, DType::I32)}, gather(1));
  check("gather middle axis", {uniform({2, 6, 4}), ints({4}, -6, 6)}, gather(1));
  check("gather scalar index", {uniform({4, 6}), ints({}, 0, 4)}, gather(0));

  auto scatterAdd = [](Shape to, int64_t axis) {
    return [=](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<ScatterAddOp>(loc, RankedTensorType::get(to, b.getF64Type()), a[0], a[1],
                                    axis);
    };
  };
  check("scatter_add axis 0", {uniform({4, 2}), ints({4}, -3, 3)}, scatterAdd({3, 2}, 0));
  check("scatter_add axis 1 2-d indices", {uniform({2, 2, 2}), ints({2, 2}, -3, 3, DType::I32)},
        scatterAdd({2, 3}, 1));
  check("scatter_add middle axis", {uniform({2, 4, 6}), ints({4}, -5, 5)},
        scatterAdd({2, 5, 6}, 1));

  auto expand = [](Shape to) { return typed<ExpandOp>(to, {}); };
  check("expand [3,1] -> [2,3,4]", {uniform({3, 1})}, expand({2, 3, 4}));
  check("expand [] -> [2,2]", {uniform({})}, expand({2, 2}));
  check("expand [1,4] -> [6,4]", {uniform({1, 4})}, expand({6, 4}));
  check("expand [2,1,4] -> [2,6,4]", {uniform({2, 1, 4})}, expand({2, 6, 4}));

  auto trilu = [](bool upper, int64_t k) {
    return [upper, k](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<TriluOp>(loc, a[0], b.getBoolAttr(upper), b.getI64IntegerAttr(k));
    };
  };
  check("trilu upper", {uniform({4, 4})}, trilu(true, 0));
  check("trilu lower k=-1", {uniform({2, 4, 6})}, trilu(false, -1));
  check("trilu upper k=1 two batch dims", {uniform({2, 2, 4, 6})}, trilu(true, 1));

  auto cumsum = [](int64_t axis, bool exclusive, bool reverse) {
    return [=](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<CumSumOp>(loc, a[0], b.getI64IntegerAttr(axis), b.getBoolAttr(exclusive),
                                b.getBoolAttr(reverse));
    };
  };
  auto topK = [](int64_t axis, int64_t k, bool largest) {
    return [=](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<TopKIndicesOp>(loc, a[0], b.getI64IntegerAttr(axis), b.getI64IntegerAttr(k),
                                     b.getBoolAttr(largest));
    };
  };
  auto argMax = [](int64_t axis, bool largest, bool last) {
    return [=](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<ArgMaxOp>(loc, a[0], b.getI64IntegerAttr(axis), b.getBoolAttr(largest),
                                b.getBoolAttr(last));
    };
  };
  check("arg_max over the vocabulary [tokens, vocab]", {uniform({8, 6})}, argMax(1, true, false));
  check("arg_min, last of equals, along a middle axis", {uniform({4, 6, 2})},
        argMax(1, false, true));
  check("top_k_indices of a router [tokens, experts]", {uniform({8, 6})}, topK(1, 2, true));
  check("top_k_indices smallest along a middle axis", {uniform({4, 6, 2})}, topK(1, 3, false));

  check("cumsum along the sequence", {uniform({4, 6, 8})}, cumsum(1, false, false));
  check("cumsum exclusive reverse along the batch", {uniform({4, 6})}, cumsum(0, true, true));
}

void ShardingRulesTest::checkLosses() {
  auto nllLoss = [](LossReduction reduction, std::optional<int64_t> ignoreIndex, bool withWeight) {
    return [=](OpBuilder &b, Location loc, ValueRange a) -> Value {
      return b.create<NllLossOp>(loc, a[0], a[1], withWeight ? a[2] : Value(), reduction,
                                 ignoreIndex ? b.getI64IntegerAttr(*ignoreIndex) : IntegerAttr());
    };
  };
  // The partitioner's mean: the shards' weighted sums (local mean times
  // local weight total) over the sum of their weight totals.
  auto weightedMean = [](std::optional<int64_t> ignoreIndex, bool withWeight) {
    return
        [=](const Tensor &first, const Tensor &second, llvm::ArrayRef<std::vector<Tensor>> args) {
          double weights[2] = {0, 0};
          for (int half : {0, 1}) {
            const Tensor &target = args[half][1];
            for (int64_t e = 0; e < target.numElements(); ++e) {
              int64_t t = target.getInt(e);
              if (!ignoreIndex || t != *ignoreIndex)
                weights[half] += withWeight ? args[half][2].floats()[t] : 1.0;
            }
          }
          Tensor out = first;
          out.floats()[0] = (first.floats()[0] * weights[0] + second.floats()[0] * weights[1]) /
                            (weights[0] + weights[1]);
          return out;
        };
  };
  // Targets in [0, C); the ignored index (a class or -100) is target 0
  // only, so that every half keeps some weight.
  auto targets = [&](Shape shape, int64_t classes, std::optional<int64_t> ignoreIndex) {
    Tensor t = ints(shape, 0, classes);
    for (int64_t e = 0; e < t.numElements(); ++e)
      if (ignoreIndex && (e == 0 || t.getInt(e) == *ignoreIndex))
        t.setInt(e, e == 0 ? *ignoreIndex : (*ignoreIndex + 1) % classes);
    return t;
  };
  for (LossReduction reduction : {LossReduction::None, LossReduction::Sum, LossReduction::Mean})
    for (std::optional<int64_t> ignoreIndex :
         {std::optional<int64_t>(), std::optional<int64_t>(2), std::optional<int64_t>(-100)})
      for (bool withWeight : {false, true}) {
        std::string name = "nll_loss " + stringifyLossReduction(reduction).str() +
                           (ignoreIndex ? " ignore " + std::to_string(*ignoreIndex) : "") +
                           (withWeight ? " weight" : "");
        std::vector<Tensor> args = {uniform({4, 5}), targets({4}, 5, ignoreIndex)};
        if (withWeight)
          args.push_back(positive({5}));
        CombineFn combine = sum;
        if (reduction == LossReduction::Mean)
          combine = weightedMean(ignoreIndex, withWeight);
        check(name, args, nllLoss(reduction, ignoreIndex, withWeight), combine);
      }
  check("nll_loss spatial mean ignore weight",
        {uniform({4, 5, 2}), targets({4, 2}, 5, 3), positive({5})},
        nllLoss(LossReduction::Mean, 3, true), weightedMean(3, true));
  check("nll_loss spatial sum", {uniform({2, 5, 4}), targets({2, 4}, 5, {})},
        nllLoss(LossReduction::Sum, std::nullopt, false));
  check("nll_loss spatial none i32", {uniform({2, 5, 4}), ints({2, 4}, 0, 5, DType::I32)},
        nllLoss(LossReduction::None, std::nullopt, false));
}

//===----------------------------------------------------------------------===//
// Tests
//===----------------------------------------------------------------------===//

TEST_F(ShardingRulesTest, EveryRuleSplitsLikeTheWholeOp) {
  checkElementwise();
  checkContractions();
  checkReductions();
  checkNormalizations();
  checkDataMovement();
  checkLosses();

  const ShardingRuleRegistry &registry = ShardingRuleRegistry::get();
  std::set<std::string> withRule;
  for (RegisteredOperationName name : context.getRegisteredOperations())
    if (registry.contains(name))
      withRule.insert(name.getStringRef().str());
  EXPECT_EQ(checked, withRule) << "every op with a sharding rule needs instances";
  std::cout << "sharding rules: " << checked.size() << " ops, " << instances << " instances, "
            << splits << " factor splits checked\n";
  RecordProperty("ops", static_cast<int>(checked.size()));
  RecordProperty("instances", instances);
  RecordProperty("factor_splits", splits);
  RecordProperty("worst_relative_error", std::to_string(worst));
}

/// The op built by `build` on fresh arguments of `types`, in `module`.
Operation *buildOp(OpBuilder &b, ModuleOp module, llvm::ArrayRef<Type> types,
                   const BuildFn &build) {
  Location loc = b.getUnknownLoc();
  b.setInsertionPointToEnd(module.getBody());
  auto func = b.create<func::FuncOp>(loc, "f", b.getFunctionType(types, {}));
  b.setInsertionPointToEnd(func.addEntryBlock());
  return build(b, loc, func.getArguments()).getDefiningOp();
}

TEST_F(ShardingRulesTest, TextForm) {
  OpBuilder b(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(b.getUnknownLoc());
  auto f64 = [&](Shape shape) -> Type { return RankedTensorType::get(shape, b.getF64Type()); };
  auto text = [&](llvm::ArrayRef<Type> types, BuildFn build) {
    Operation *op = buildOp(b, *module, types, build);
    std::optional<ShardingRule> rule = ShardingRuleRegistry::get().lookup(op);
    return rule ? rule->str() : "no rule";
  };
  EXPECT_EQ(text({f64({8, 4}), f64({4, 2})}, binary<MatMulOp>()),
            "([i, k], [k, j]) -> ([i, j]) {i=8, k=4, j=2} reduction={k}");
  EXPECT_EQ(text({f64({2, 16, 64})}, typed<ReshapeOp>({2, 16, 4, 16}, {})),
            "([i, j, kl]) -> ([i, j, k, l]) {i=2, j=16, k=4, l=16}");
  EXPECT_EQ(text({f64({2, 3})}, typed<ReshapeOp>({3, 2}, {})),
            "([i, j]) -> ([k, l]) {i=2, j=3, k=3, l=2} "
            "replicated={i, j, k, l}");
  EXPECT_EQ(text({f64({2, 1, 4}), f64({3, 4})}, binary<AddOp>()),
            "([i, 1, k], [j, k]) -> ([i, j, k]) {i=2, k=4, j=3}");
  EXPECT_EQ(text({f64({2, 8})},
                 [](OpBuilder &b, Location loc, ValueRange a) -> Value {
                   return b.create<SoftmaxOp>(loc, a[0], 1);
                 }),
            "([i, j]) -> ([i, j]) {i=2, j=8} normalized={j}");
  EXPECT_EQ(text({f64({8, 4}), RankedTensorType::get({2, 3}, b.getI64Type())},
                 [](OpBuilder &b, Location loc, ValueRange a) -> Value {
                   return b.create<GatherOp>(loc, a[0], a[1], b.getI64IntegerAttr(0));
                 }),
            "([i, l], [j, k]) -> ([j, k, l]) {i=8, l=4, j=2, k=3} indexed={i}");
  EXPECT_EQ(text({f64({4, 6}), f64({4, 6})},
                 [](OpBuilder &b, Location loc, ValueRange a) -> Value {
                   return b.create<EinsumOp>(loc, "ij,ij->", a);
                 }),
            "([i, j], [i, j]) -> ([]) {i=4, j=6} reduction={i, j}");
}

TEST_F(ShardingRulesTest, VerifyRejectsInconsistentRules) {
  OpBuilder b(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(b.getUnknownLoc());
  Type lhs = RankedTensorType::get({8, 4}, b.getF64Type());
  Type rhs = RankedTensorType::get({4, 2}, b.getF64Type());
  Operation *op = buildOp(b, *module, {lhs, rhs}, binary<MatMulOp>());
  ShardingRule good = *ShardingRuleRegistry::get().lookup(op);
  ASSERT_EQ(good.verify(op), "");
  // Factors: i = m (0), j = n (1), k (2).
  auto rejects = [&](std::function<void(ShardingRule &)> corrupt, llvm::StringRef message) {
    ShardingRule bad = good;
    corrupt(bad);
    EXPECT_EQ(bad.verify(op), message.str());
  };
  rejects([](ShardingRule &r) { r.factorSizes[2] = 2; },
          "operand 0 dimension 1 has size 4 but factors of total size 2");
  rejects([](ShardingRule &r) { r.operands[1][0] = {7}; },
          "operand 1 dimension 0 names factor #7 of 3");
  rejects([](ShardingRule &r) { r.operands.pop_back(); },
          "rule has 1 operands and 1 results, the op 2 and 1");
  rejects([](ShardingRule &r) { r.results[0].pop_back(); },
          "result 0 has 1 dimension entries for rank 2");
  rejects([](ShardingRule &r) { r.results[0][1] = {2}; }, "reduction factor k appears in result 0");
  rejects([](ShardingRule &r) { r.factorKinds[2] = FactorKind::Parallel; },
          "parallel factor k appears in no result");
  rejects([](ShardingRule &r) { r.factorKinds.pop_back(); }, "3 factor sizes but 2 factor kinds");
  rejects(
      [](ShardingRule &r) {
        r.factorSizes = {8, 2, 2, 2};
        r.factorKinds.push_back(FactorKind::Reduction);
        r.operands[0][1] = {2, 3};
        r.operands[1][0] = {2, 2};
      },
      "reduction factor k appears twice in operand 1");
}

} // namespace
