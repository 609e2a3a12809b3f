//===- MemoryPlanTest.cpp - static memory plan against the executor ------===//
//
// Small functions whose liveness peak is worked out by hand, the kinds the
// plan gives buffers, that buffers live at the same time never share bytes,
// and that the reference executor measures exactly the planned peak on a
// whole GPT training step.
//
//===----------------------------------------------------------------------===//

#include "passes/memory/MemoryPlan.h"
#include "executor/Interpreter.h"
#include "frontend/OnnxImporter.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "passes/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <random>

using namespace mlir;
using namespace ppc;

namespace {

class MemoryPlanTest : public ::testing::Test {
protected:
  MemoryPlanTest() { context.loadDialect<PpcDialect, func::FuncDialect>(); }

  func::FuncOp parse(llvm::StringRef source) {
    module = parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module) << "cannot parse:\n" << source.str() << "\n" << errors;
    if (!module)
      return {};
    return *module->getOps<func::FuncOp>().begin();
  }

  const Buffer &bufferOf(const MemoryPlan &plan, Value value) {
    for (const Buffer &b : plan.buffers)
      if (b.value == value)
        return b;
    ADD_FAILURE() << "value has no buffer";
    return plan.buffers.front();
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::string errors;
  ScopedDiagnosticHandler handler{&context, [this](Diagnostic &d) {
                                    errors += d.str() + "\n";
                                    return success();
                                  }};
};

/// Every pair of buffers live at a common op occupies disjoint bytes, and
/// the arena holds them all.
void expectNoOverlap(const MemoryPlan &plan) {
  EXPECT_GE(plan.arenaBytes, plan.peakBytes);
  std::vector<const Buffer *> byBegin;
  for (const Buffer &b : plan.buffers) {
    EXPECT_GE(b.offset, 0);
    EXPECT_LE(b.offset + b.bytes, plan.arenaBytes);
    if (b.bytes > 0)
      byBegin.push_back(&b);
  }
  llvm::sort(byBegin, [](const Buffer *x, const Buffer *y) { return x->begin < y->begin; });
  int64_t overlaps = 0;
  for (size_t i = 0; i < byBegin.size(); ++i)
    for (size_t j = i + 1; j < byBegin.size() && byBegin[j]->begin <= byBegin[i]->end; ++j) {
      const Buffer &x = *byBegin[i], &y = *byBegin[j];
      if (x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes)
        ++overlaps;
    }
  EXPECT_EQ(overlaps, 0);
}

// Op k:          0     1     2 (unused)  3           4         5
// live values:  x w m s %0 | w m s %0 %1 | w m s %0 %1 %2 | w m s %1 %3 | ...
// The input x dies at op 0, %0 is used twice (ops 1 and 2), %2 has no use,
// the step argument has none either and stays held.
constexpr llvm::StringLiteral kSmallStep = R"mlir(
func.func @step(%x: tensor<4x8xf32> {ppc.input = "x"},
                %w: tensor<8xf32> {ppc.param = "w"},
                %m: tensor<8xf32> {ppc.state = "m:w"},
                %s: tensor<i64> {ppc.step})
    -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = ppc.mul %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = ppc.exp %0 : tensor<4x8xf32>
  %2 = ppc.less %1, %0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %3 = ppc.reduce_sum %1 axes = [0] keepdims = false : (tensor<4x8xf32>) -> tensor<8xf32>
  %4 = ppc.add %3, %m : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %4, %w : tensor<8xf32>, tensor<8xf32>
}
)mlir";

TEST_F(MemoryPlanTest, PeakOfSmallStepByHand) {
  func::FuncOp func = parse(kSmallStep);
  ASSERT_TRUE(func);
  MemoryPlan plan = *planMemory(func);
  EXPECT_EQ(plan.numOps, 6);
  ASSERT_EQ(plan.buffers.size(), 4u + 5u);

  // Live ranges: arguments from op 0, results from their op, to the last use;
  // parameters and optimizer state (w, m) to the end, where the executables
  // keep them between steps.
  Block &body = func.getBody().front();
  auto range = [&](Value v) {
    const Buffer &b = bufferOf(plan, v);
    return std::make_pair(b.begin, b.end);
  };
  auto results = [&](int k) { return std::next(body.begin(), k)->getResult(0); };
  using Range = std::pair<int64_t, int64_t>;
  EXPECT_EQ(range(body.getArgument(0)), Range(0, 0));
  EXPECT_EQ(range(body.getArgument(1)), Range(0, 5));
  EXPECT_EQ(range(body.getArgument(2)), Range(0, 5));
  EXPECT_EQ(range(body.getArgument(3)), Range(0, 5));
  EXPECT_EQ(range(results(0)), Range(0, 2));
  EXPECT_EQ(range(results(1)), Range(1, 3));
  EXPECT_EQ(range(results(2)), Range(2, 2));
  EXPECT_EQ(range(results(3)), Range(3, 4));
  EXPECT_EQ(range(results(4)), Range(4, 5));
  EXPECT_EQ(bufferOf(plan, results(2)).bytes, 32); // i1 is one byte

  // Op 2 holds w, m, s (72 bytes), %0 and %1 (128 each) and %2 (32).
  EXPECT_EQ(plan.peakBytes, 360);
  EXPECT_EQ(*peakLiveBytes(func), 360); // the same liveness, no placement
  EXPECT_EQ(plan.peakOp, 2);
  EXPECT_EQ(plan.atPeak[BufferKind::Parameter], 32);
  EXPECT_EQ(plan.atPeak[BufferKind::OptimizerState], 32);
  EXPECT_EQ(plan.atPeak[BufferKind::Input], 8);
  EXPECT_EQ(plan.atPeak[BufferKind::Activation], 288);
  EXPECT_EQ(plan.atPeak[BufferKind::Gradient], 0);
  // The inputs' own maximum is at op 0 (x and s); activations' at op 2.
  EXPECT_EQ(plan.maxByKind[BufferKind::Input], 136);
  EXPECT_EQ(plan.maxByKind[BufferKind::Activation], 288);
  expectNoOverlap(plan);

  // The executor frees and counts the same way.
  llvm::SmallVector<Tensor> args = {Tensor(DType::F32, {4, 8}), Tensor(DType::F32, {8}),
                                    Tensor(DType::F32, {8}), Tensor(DType::I64, {})};
  RunStats stats;
  ASSERT_TRUE(succeeded(runFunction(func, args, ExecOptions{}, &stats))) << errors;
  EXPECT_EQ(stats.peakBytes, plan.peakBytes);
  // Stored in f64, the five f32 buffers live at op 2 double.
  ExecOptions f64;
  f64.f64 = true;
  for (Tensor &t : args)
    t = t.castTo(f64.storage(mlirType(t.dtype(), &context)));
  ASSERT_TRUE(succeeded(runFunction(func, args, f64, &stats))) << errors;
  EXPECT_EQ(stats.peakBytes, 360 + 32 + 32 + 128 + 128);
}

TEST_F(MemoryPlanTest, ArgumentsDieAtTheirLastUse) {
  // Two large inputs consumed early leave only the small result: the peak
  // is at op 0, not at the return.
  func::FuncOp func = parse(R"mlir(
func.func @f(%a: tensor<64xf32> {ppc.input = "a"}, %b: tensor<64xf32> {ppc.input = "b"})
    -> tensor<f32> {
  %0 = ppc.add %a, %b : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %1 = ppc.reduce_sum %0 axes = [0] keepdims = false : (tensor<64xf32>) -> tensor<f32>
  %2 = ppc.neg %1 : tensor<f32>
  return %2 : tensor<f32>
}
)mlir");
  ASSERT_TRUE(func);
  MemoryPlan plan = *planMemory(func);
  EXPECT_EQ(plan.peakBytes, 3 * 256);
  EXPECT_EQ(plan.peakOp, 0);
  EXPECT_EQ(plan.maxByKind[BufferKind::Input], 512);
  // Op 1: %0 and %1; op 2: %1 and %2; the return: %2.
  EXPECT_EQ(plan.maxByKind[BufferKind::Activation], 260);
  // The input's bytes are free again after op 0: %1 and %2 reuse them.
  expectNoOverlap(plan);
  EXPECT_EQ(plan.arenaBytes, plan.peakBytes);

  RunStats stats;
  llvm::SmallVector<Tensor> args = {Tensor(DType::F32, {64}), Tensor(DType::F32, {64})};
  ASSERT_TRUE(succeeded(runFunction(func, args, ExecOptions{}, &stats))) << errors;
  EXPECT_EQ(stats.peakBytes, plan.peakBytes);
}

TEST_F(MemoryPlanTest, ReusedValueInAChain) {
  // a -> b -> c with b used again at the end keeps b alive across c.
  func::FuncOp func = parse(R"mlir(
func.func @f(%a: tensor<16xf32> {ppc.input = "a"}) -> tensor<16xf32> {
  %b = ppc.neg %a : tensor<16xf32>
  %c = ppc.exp %b : tensor<16xf32>
  %d = ppc.neg %c : tensor<16xf32>
  %e = ppc.add %d, %b : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %e : tensor<16xf32>
}
)mlir");
  ASSERT_TRUE(func);
  MemoryPlan plan = *planMemory(func);
  // Op 0: a, b; op 1: b, c; op 2: b, c, d; op 3: b, d, e; return: e.
  EXPECT_EQ(plan.peakBytes, 3 * 64);
  EXPECT_EQ(plan.peakOp, 2);
  expectNoOverlap(plan);
  EXPECT_EQ(plan.arenaBytes, 3 * 64);
  RunStats stats;
  ASSERT_TRUE(succeeded(runFunction(func, {Tensor(DType::F32, {16})}, ExecOptions{}, &stats)))
      << errors;
  EXPECT_EQ(stats.peakBytes, plan.peakBytes);
}

TEST_F(MemoryPlanTest, KindsByAttributes) {
  func::FuncOp func = parse(R"mlir(
ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 1]
func.func @f(%s: tensor<i64> {ppc.step}, %w: tensor<4xf32> {ppc.param = "w"},
             %m: tensor<4xf32> {ppc.state = "exp_avg:w"}, %x: tensor<4xf32> {ppc.input = "x"},
             %u: tensor<4xf32>) -> tensor<4xf32> {
  %g = ppc.mul %w, %x {ppc.memory = "gradient"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = ppc.all_reduce %g on @mesh["dp"] sum : tensor<4xf32>
  %t = ppc.all_reduce %r on @mesh["dp"] sum {ppc.memory = "activation"} : tensor<4xf32>
  %m2 = ppc.add %m, %t {ppc.memory = "optimizer_state"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %w2 = ppc.sub %w, %m2 {ppc.memory = "parameter"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a = ppc.neg %w2 {ppc.mb_grad = array<i64: -1>} : tensor<4xf32>
  %q = ppc.neg %x {ppc.step_grad = array<i64: 0>} : tensor<4xf32>
  return %a : tensor<4xf32>
}
)mlir");
  ASSERT_TRUE(func);
  Block &body = func.getBody().front();
  std::vector<BufferKind> expected = {
      BufferKind::Input,         BufferKind::Parameter,  BufferKind::OptimizerState,
      BufferKind::Input,         BufferKind::Input,      BufferKind::Gradient,
      BufferKind::Communication, BufferKind::Activation, BufferKind::OptimizerState,
      BufferKind::Parameter,     BufferKind::Activation, BufferKind::Gradient};
  llvm::SmallVector<Value> values(body.getArguments().begin(), body.getArguments().end());
  for (Operation &op : body)
    values.append(op.result_begin(), op.result_end());
  ASSERT_EQ(values.size(), expected.size());
  for (auto [i, v] : llvm::enumerate(values))
    EXPECT_EQ(bufferKindName(classify(v)), bufferKindName(expected[i])) << "value " << i;

  MemoryPlan plan = *planMemory(func);
  for (auto [b, kind] : llvm::zip(plan.buffers, expected))
    EXPECT_EQ(b.kind, kind);
  expectNoOverlap(plan);

  // Reports: every kind, snake_case keys.
  llvm::json::Value json = memoryPlanJson(plan);
  llvm::json::Object *object = json.getAsObject();
  ASSERT_TRUE(object);
  EXPECT_EQ(object->getInteger("peak_bytes"), plan.peakBytes);
  EXPECT_EQ(object->getInteger("arena_bytes"), plan.arenaBytes);
  EXPECT_EQ(object->getInteger("peak_op"), plan.peakOp);
  llvm::json::Object *atPeak = object->getObject("at_peak");
  ASSERT_TRUE(atPeak);
  EXPECT_EQ(atPeak->size(), 7u);
  EXPECT_EQ(atPeak->getInteger("optimizer_state"), plan.atPeak[BufferKind::OptimizerState]);
  EXPECT_EQ(object->getObject("max_by_kind")->getInteger("gradients"),
            plan.maxByKind[BufferKind::Gradient]);

  std::string table;
  llvm::raw_string_ostream os(table);
  printMemoryTable(plan, "@f", os);
  EXPECT_NE(table.find("memory plan: @f"), std::string::npos) << table;
  EXPECT_NE(table.find("optimizer state"), std::string::npos) << table;
  EXPECT_NE(table.find("fragmentation"), std::string::npos) << table;
}

TEST_F(MemoryPlanTest, WorkspacesLiveAtTheirOpAlone) {
  // %b's kernel takes 256 bytes of workspace: live at its op with its
  // operand and result (peak 16 + 16 + 256), apart from both, and nowhere
  // else.
  func::FuncOp func = parse(R"mlir(
func.func @f(%a: tensor<4xf32> {ppc.input = "a"}) -> tensor<8xf32> {
  %b = ppc.neg %a : tensor<4xf32>
  %c = ppc.concat %b, %b axis = 0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return %c : tensor<8xf32>
}
)mlir");
  ASSERT_TRUE(func);
  Operation *neg = &func.getBody().front().front();
  StorageHooks hooks;
  auto bytes = [&](Operation *op) -> int64_t { return op == neg ? 256 : 0; };
  hooks.workspaceBytes = bytes;
  MemoryPlan plan = *planMemory(func, /*alignment=*/16, hooks);
  ASSERT_EQ(plan.workspaces.size(), 1u);
  const Buffer &workspace = plan.buffers[plan.workspaces.lookup(neg)];
  EXPECT_FALSE(workspace.value);
  EXPECT_EQ(workspace.kind, BufferKind::Workspace);
  EXPECT_EQ(workspace.bytes, 256);
  EXPECT_EQ(workspace.begin, 0);
  EXPECT_EQ(workspace.end, 0);
  EXPECT_EQ(plan.peakBytes, 16 + 16 + 256);
  EXPECT_EQ(plan.peakOp, 0);
  EXPECT_EQ(plan.maxByKind[BufferKind::Workspace], 256);
  expectNoOverlap(plan);
  annotateOffsets(plan, func);
  EXPECT_EQ(neg->getAttrOfType<IntegerAttr>(kWorkspaceOffsetAttrName).getInt(), workspace.offset);
  std::string table;
  llvm::raw_string_ostream os(table);
  printMemoryTable(plan, "@f", os);
  EXPECT_NE(table.find("workspace"), std::string::npos) << table;
  // Without the hook: no workspace.
  EXPECT_TRUE(planMemory(func)->workspaces.empty());
}

TEST_F(MemoryPlanTest, PointToPointOps) {
  // A send has no result (its operand dies there); a received value is
  // communication until its last use.
  func::FuncOp func = parse(R"mlir(
ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 1, 1]
func.func @f(%x: tensor<4xf32> {ppc.input = "x"}) -> tensor<8xf32> {
  ppc.send %x to @mesh["pp"] 1 : tensor<4xf32>
  %y = ppc.recv from @mesh["pp"] 1 : tensor<8xf32>
  %z = ppc.neg %y : tensor<8xf32>
  return %z : tensor<8xf32>
}
)mlir");
  ASSERT_TRUE(func);
  MemoryPlan plan = *planMemory(func);
  ASSERT_EQ(plan.buffers.size(), 3u);
  EXPECT_EQ(plan.buffers[0].end, 0);
  EXPECT_EQ(plan.buffers[1].kind, BufferKind::Communication);
  EXPECT_EQ(plan.buffers[2].kind, BufferKind::Activation);
  EXPECT_EQ(plan.peakBytes, 64);
  EXPECT_EQ(plan.peakOp, 2);
  EXPECT_EQ(plan.maxByKind[BufferKind::Communication], 32);
  expectNoOverlap(plan);
  annotateOffsets(plan, func);
  EXPECT_FALSE(func.getBody().front().front().hasAttr(kOffsetAttrName));
}

TEST_F(MemoryPlanTest, AnnotatesOffsets) {
  func::FuncOp func = parse(kSmallStep);
  ASSERT_TRUE(func);
  MemoryPlan plan = *planMemory(func, /*alignment=*/64);
  for (const Buffer &b : plan.buffers)
    EXPECT_EQ(b.offset % 64, 0);
  expectNoOverlap(plan);
  annotateOffsets(plan, func);
  auto args = func->getAttrOfType<DenseI64ArrayAttr>(kArgOffsetsAttrName);
  ASSERT_TRUE(args);
  ASSERT_EQ(args.size(), 4);
  EXPECT_EQ(args[1], bufferOf(plan, func.getArgument(1)).offset);
  EXPECT_EQ(func->getAttrOfType<IntegerAttr>(kArenaBytesAttrName).getInt(), plan.arenaBytes);
  for (Operation &op : func.getBody().front()) {
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>(kOffsetAttrName);
    if (op.getNumResults() == 0) {
      EXPECT_FALSE(offsets);
      continue;
    }
    ASSERT_TRUE(offsets);
    EXPECT_EQ(offsets[0], bufferOf(plan, op.getResult(0)).offset);
  }
  EXPECT_TRUE(succeeded(verify(*module))) << errors;
}

/// The training step of examples/gpt-tiny.onnx (2 layers, d = 64, 121k
/// parameters) built by the training pipeline, with its arguments in f32:
/// the model's initializers, zero optimizer state, random tokens.
class MemoryPlanGptTinyTest : public MemoryPlanTest {
protected:
  func::FuncOp buildStep(const TrainingPipelineOptions &options) {
    llvm::SmallString<256> path(__FILE__);
    for (int i = 0; i < 3; ++i)
      llvm::sys::path::remove_filename(path);
    llvm::sys::path::append(path, "examples", "gpt-tiny.onnx");
    auto loaded = OnnxModel::load(path);
    if (!loaded) {
      ADD_FAILURE() << llvm::toString(loaded.takeError());
      return {};
    }
    model = std::move(*loaded);
    loadImportDialects(context);
    module = importOnnxModel(*model, context, ImportOptions{},
                             [&](const llvm::Twine &m) { errors += m.str() + "\n"; });
    if (!module) {
      ADD_FAILURE() << errors;
      return {};
    }
    PassManager pm(&context);
    buildImportPipeline(pm, ImportPipelineOptions{});
    buildTrainingPipeline(pm, options);
    if (failed(pm.run(*module))) {
      ADD_FAILURE() << errors;
      return {};
    }
    return module->lookupSymbol<func::FuncOp>("train_step");
  }

  llvm::SmallVector<Tensor> arguments(func::FuncOp step) {
    ExecOptions f32;
    std::mt19937_64 rng(7);
    llvm::SmallVector<Tensor> args;
    for (auto [i, arg] : llvm::enumerate(step.getArguments())) {
      auto type = llvm::cast<RankedTensorType>(arg.getType());
      if (auto name = step.getArgAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName)) {
        auto value = model->loadInitializer(name.getValue());
        if (!value) {
          ADD_FAILURE() << llvm::toString(value.takeError());
          return {};
        }
        args.push_back(value->castTo(f32.storage(type)));
        continue;
      }
      Tensor t(f32.storage(type), type.getShape());
      if (!t.isFloat() && step.getArgAttr(i, PpcDialect::kInputAttrName))
        for (int64_t e = 0; e < t.numElements(); ++e)
          t.setInt(e, std::uniform_int_distribution<int64_t>(0, 255)(rng));
      args.push_back(std::move(t));
    }
    return args;
  }

  /// Plans `step`, runs it in f32 and checks the executor measures the plan.
  MemoryPlan expectExecutorMeasuresPlan(func::FuncOp step) {
    MemoryPlan plan = *planMemory(step);
    RunStats stats;
    EXPECT_TRUE(succeeded(runFunction(step, arguments(step), ExecOptions{}, &stats))) << errors;
    EXPECT_EQ(stats.peakBytes, plan.peakBytes);
    expectNoOverlap(plan);
    return plan;
  }

  std::unique_ptr<OnnxModel> model;
};

/// The planned peak of the whole GPT training step (forward, backward and
/// AdamW) is what the executor measures running it in f32.
TEST_F(MemoryPlanGptTinyTest, ExecutorMeasuresThePlannedPeakWithAdamW) {
  func::FuncOp step = buildStep(TrainingPipelineOptions{});
  ASSERT_TRUE(step);
  MemoryPlan plan = expectExecutorMeasuresPlan(step);
  // The parameters (121k f32) and AdamW's two moments, all live at the peak;
  // every gradient is live at once before the update.
  EXPECT_GT(plan.atPeak[BufferKind::Parameter], 4 * 120000);
  EXPECT_EQ(plan.atPeak[BufferKind::OptimizerState], 2 * plan.atPeak[BufferKind::Parameter]);
  EXPECT_EQ(plan.maxByKind[BufferKind::Gradient], plan.atPeak[BufferKind::Parameter]);
  // Greedy packing of a real step stays close to the peak.
  EXPECT_LT(plan.arenaBytes, plan.peakBytes + plan.peakBytes / 20);
  printMemoryTable(plan, "@train_step of gpt-tiny (AdamW)", llvm::outs());
  llvm::outs().flush();
}

TEST_F(MemoryPlanGptTinyTest, ExecutorMeasuresThePlannedPeakWithMicroBatches) {
  TrainingPipelineOptions options;
  options.optimizer = "sgd";
  options.momentum = 0.9;
  options.microBatches = 2;
  func::FuncOp step = buildStep(options);
  ASSERT_TRUE(step);
  MemoryPlan plan = expectExecutorMeasuresPlan(step);
  EXPECT_EQ(plan.atPeak[BufferKind::OptimizerState], plan.atPeak[BufferKind::Parameter]);
  EXPECT_LT(plan.arenaBytes, plan.peakBytes + plan.peakBytes / 20);
}

} // namespace
