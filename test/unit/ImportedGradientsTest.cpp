//===- ImportedGradientsTest.cpp - gradients of imported ONNX ops ---------===//
//
// Tile, GatherElements, ScatterElements, OneHot and TopK are imported as
// compositions of ppc ops, so their gradients are the autodiff pass chaining
// the parts' rules. For each, this imports a one-node ONNX graph whose float
// inputs are initializers (parameters), in f64, with the loss
// reduce_sum(op(...) * W) for a constant W, runs the autodiff pass and
// compares every parameter's gradient with central differences of the loss.
// CumSum (a ppc op of its own) is run through the importer the same way.
//
//===----------------------------------------------------------------------===//

#include "executor/Interpreter.h"
#include "frontend/OnnxImporter.h"
#include "frontend/OnnxTensor.h"
#include "ir/PpcDialect.h"
#include "passes/PassValidation.h"
#include "passes/Passes.h"
#include "test/unit/FiniteDifferences.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <random>

using namespace mlir;
using namespace ppc;

namespace {

/// One ONNX node under test, its initializers and its output's shape.
struct Case {
  std::string name;
  onnx::NodeProto node;
  std::vector<std::pair<std::string, Tensor>> initializers;
  Shape outputShape;
};

Tensor ints(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> values) {
  Tensor t(DType::I64, shape);
  for (auto [i, v] : llvm::enumerate(values))
    t.setInt(i, v);
  return t;
}

/// A float initializer; its values are drawn by randomArguments.
Tensor param(llvm::ArrayRef<int64_t> shape) { return Tensor(DType::F32, shape); }

onnx::NodeProto node(const std::string &type, std::vector<std::string> inputs,
                     std::vector<std::pair<std::string, int64_t>> intAttrs = {},
                     std::vector<std::pair<std::string, std::string>> stringAttrs = {}) {
  onnx::NodeProto n;
  n.set_op_type(type);
  n.set_name(type);
  for (const std::string &input : inputs)
    n.add_input(input);
  n.add_output("out");
  for (const auto &[key, value] : intAttrs) {
    auto *a = n.add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }
  for (const auto &[key, value] : stringAttrs) {
    auto *a = n.add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(value);
  }
  return n;
}

/// The case's graph with loss = ReduceSum(out * W), W a Constant node.
onnx::ModelProto lossModel(const Case &c, std::mt19937 &rng) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto &g = *model.mutable_graph();
  g.set_name(c.name);
  for (const auto &[name, value] : c.initializers) {
    onnx::TensorProto &t = *g.add_initializer();
    encodeTensorProto(value, t);
    t.set_name(name);
  }
  *g.add_node() = c.node;
  Tensor weights(DType::F32, c.outputShape);
  std::uniform_real_distribution<double> draw(-1, 1);
  for (int64_t i = 0; i < weights.numElements(); ++i)
    weights.setDouble(i, draw(rng));
  onnx::NodeProto &w = *g.add_node();
  w.set_op_type("Constant");
  w.set_name("W");
  w.add_output("w");
  auto *value = w.add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  encodeTensorProto(weights, *value->mutable_t());
  onnx::NodeProto &mul = *g.add_node();
  mul.set_op_type("Mul");
  mul.set_name("weigh");
  mul.add_input("out");
  mul.add_input("w");
  mul.add_output("weighted");
  onnx::NodeProto &sum = *g.add_node();
  sum.set_op_type("ReduceSum");
  sum.set_name("loss");
  sum.add_input("weighted");
  sum.add_output("loss");
  auto *keep = sum.add_attribute();
  keep->set_name("keepdims");
  keep->set_type(onnx::AttributeProto::INT);
  keep->set_i(0);
  auto *out = g.add_output();
  out->set_name("loss");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  out->mutable_type()->mutable_tensor_type()->mutable_shape();
  return model;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  all.push_back({"tile",
                 node("Tile", {"x", "repeats"}),
                 {{"x", param({2, 3})}, {"repeats", ints({2}, {3, 2})}},
                 {6, 6}});
  all.push_back({"gather_elements axis 0, a negative index",
                 node("GatherElements", {"x", "idx"}, {{"axis", 0}}),
                 {{"x", param({3, 4})}, {"idx", ints({2, 4}, {0, 2, -1, 1, 2, 2, 0, 0})}},
                 {2, 4}});
  all.push_back({"gather_elements axis 1, fewer rows",
                 node("GatherElements", {"x", "idx"}, {{"axis", 1}}),
                 {{"x", param({3, 4})}, {"idx", ints({2, 3}, {3, 0, 0, 1, 2, 1})}},
                 {2, 3}});
  all.push_back({"scatter_elements none",
                 node("ScatterElements", {"x", "idx", "u"}, {{"axis", 1}}),
                 {{"x", param({3, 4})}, {"idx", ints({2, 2}, {3, 1, 0, -2})}, {"u", param({2, 2})}},
                 {3, 4}});
  all.push_back(
      {"scatter_elements add, repeated indices",
       node("ScatterElements", {"x", "idx", "u"}, {{"axis", 0}}, {{"reduction", "add"}}),
       {{"x", param({3, 2})}, {"idx", ints({3, 2}, {1, 0, 1, 2, 1, 0})}, {"u", param({3, 2})}},
       {3, 2}});
  all.push_back({"topk values, largest",
                 node("TopK", {"x", "k"}, {{"axis", 1}}),
                 {{"x", param({3, 5})}, {"k", ints({1}, {2})}},
                 {3, 2}});
  all.push_back({"topk values, smallest along axis 0",
                 node("TopK", {"x", "k"}, {{"axis", 0}, {"largest", 0}}),
                 {{"x", param({4, 3})}, {"k", ints({1}, {3})}},
                 {3, 3}});
  all.push_back(
      {"one_hot values",
       node("OneHot", {"idx", "depth", "v"}, {{"axis", -1}}),
       {{"idx", ints({2, 3}, {0, 3, -1, 2, 5, 1})}, {"depth", ints({}, {4})}, {"v", param({2})}},
       {2, 3, 4}});
  all.push_back({"cumsum reverse exclusive",
                 node("CumSum", {"x", "axis"}, {{"exclusive", 1}, {"reverse", 1}}),
                 {{"x", param({3, 4})}, {"axis", ints({}, {1})}},
                 {3, 4}});
  return all;
}

} // namespace

TEST(ImportedGradients, CompositionsMatchCentralDifferences) {
  std::mt19937 rng(7);
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("ppc-imported-gradients", dir));
  for (const Case &c : cases()) {
    SCOPED_TRACE(c.name);
    // TopK's k and one of the outputs are of the node; only "out" is read.
    Case written = c;
    if (c.node.op_type() == "TopK")
      written.node.add_output("indices");
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, "case.onnx");
    {
      std::ofstream file(path.c_str(), std::ios::binary);
      ASSERT_TRUE(lossModel(written, rng).SerializeToOstream(&file));
    }
    auto model = OnnxModel::load(path);
    ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
    MLIRContext context;
    ImportOptions options;
    options.promoteToF64 = true;
    std::string errors;
    OwningOpRef<ModuleOp> module = importOnnxModel(
        **model, context, options, [&](const llvm::Twine &m) { errors += m.str() + "\n"; });
    ASSERT_TRUE(module) << errors;
    PassManager pm(&context);
    pm.addPass(createAutodiff());
    ASSERT_TRUE(succeeded(pm.run(*module)));
    auto forward = module->lookupSymbol<func::FuncOp>("forward");
    auto grad = module->lookupSymbol<func::FuncOp>("forward_grad");
    ASSERT_TRUE(forward && grad);

    ExecOptions exec;
    exec.f64 = true;
    llvm::SmallVector<Tensor> args = randomArguments(forward, 11, exec);
    // Every argument is a parameter (the graphs have no inputs).
    llvm::SmallVector<unsigned> params;
    for (unsigned p = 0; p < args.size(); ++p)
      params.push_back(p);
    double worst = worstCentralDifference(forward, grad, args, params, exec);
    EXPECT_LT(worst, 1e-8) << "worst relative error " << worst;
    std::cout << "imported gradient " << c.name << ": " << args.size()
              << " parameters, worst relative error " << worst << "\n";
  }
  llvm::sys::fs::remove_directories(dir);
}
