//===- OpTablesTest.cpp - every op in every table that must know it -------===//
//
// What each ppc op needs besides its definition, checked against the
// dialect's registered ops, so that a new op missing from a table fails
// here rather than as a wrong plan or a compile error on some later model:
// a reference-executor kernel, a CPU and a CUDA emitter (or fusion, for the
// elementwise ops), and for an elementwise op the scalar function it
// declares (ElementwiseOpInterface) in runtime/ppcrt/Scalar.h. The gradient
// and sharding-rule tables have theirs in GradientCheckTest and
// ShardingRulesTest.
//
//===----------------------------------------------------------------------===//

#include "codegen/EmitContext.h"
#include "codegen/Fusion.h"
#include "executor/Kernels.h"
#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

using namespace mlir;
using namespace ppc;
using namespace ppc::codegen;

namespace {

class OpTablesTest : public ::testing::Test {
protected:
  OpTablesTest() { context.loadDialect<PpcDialect, func::FuncDialect>(); }

  /// The names of the ppc ops for which `has` is false, each checked on a
  /// bare instance (the tables key on the op's class alone).
  std::set<std::string> missing(const std::function<bool(Operation *)> &has) {
    std::set<std::string> names;
    for (RegisteredOperationName name : context.getRegisteredOperations()) {
      if (name.getDialectNamespace() != PpcDialect::getDialectNamespace())
        continue;
      Operation *op = Operation::create(UnknownLoc::get(&context), name, {}, {}, NamedAttrList(),
                                        nullptr, {}, 0);
      if (!has(op))
        names.insert(name.getStringRef().str());
      op->destroy();
    }
    return names;
  }

  MLIRContext context;
};

/// Ops that exist only in partitioned programs, which the SPMD executor
/// and the runtime's communication run, not a kernel or an emitter table
/// of their own: the mesh, the collectives, send and recv.
bool communicates(Operation *op) {
  return llvm::isa<MeshOp, SendOp, RecvOp>(op) || op->hasTrait<CollectiveTrait>();
}

TEST_F(OpTablesTest, EveryOpHasAnExecutorKernel) {
  const KernelRegistry &kernels = KernelRegistry::get();
  EXPECT_EQ(missing([&](Operation *op) { return communicates(op) || kernels.lookup(op); }),
            std::set<std::string>{})
      << "ops without a reference-executor kernel (executor/kernels/*.cpp)";
}

TEST_F(OpTablesTest, EveryOpHasAnEmitterOrFuses) {
  EXPECT_EQ(missing([](Operation *op) {
              return llvm::isa<MeshOp>(op) || isElementwise(op) || lookupEmitter(op);
            }),
            std::set<std::string>{})
      << "ops code generation cannot emit (codegen/Ops.cpp, codegen/Communication.cpp)";
}

// The op emitters are shared by the targets and call `<library>::name(...)`
// against each target's kernel library: every such name must be defined in
// both (runtime/ppcrt/CpuKernels.h, runtime/ppcrt/cuda/Kernels.cuh).
TEST_F(OpTablesTest, BothKernelLibrariesHaveWhatTheEmittersCall) {
  std::set<std::string> called;
  for (const char *emitters : {"/codegen/Ops.cpp", "/codegen/Communication.cpp"}) {
    auto source = llvm::MemoryBuffer::getFile(std::string(PPC_SOURCE_DIR) + emitters);
    ASSERT_TRUE(bool(source)) << "cannot read " << emitters;
    llvm::StringRef text = (*source)->getBuffer();
    // The library is the format string's {0}: "  {0}::fill({1}, ...".
    for (size_t at = text.find("{0}::"); at != llvm::StringRef::npos;
         at = text.find("{0}::", at + 1)) {
      llvm::StringRef rest = text.drop_front(at + 5);
      llvm::StringRef name = rest.take_while([](char c) { return llvm::isAlnum(c); });
      if (!name.empty() && name != "ReduceKind" && name != "LossReduction")
        called.insert(name.str());
    }
  }
  ASSERT_GT(called.size(), 10u) << "the emitters' calls were not found";
  const std::vector<std::vector<std::string>> libraries = {
      {"/runtime/ppcrt/CpuKernels.h"},
      {"/runtime/ppcrt/cuda/Kernels.cuh", "/runtime/ppcrt/cuda/Cuda.h"}};
  for (const auto &headers : libraries) {
    std::string text, library = headers.front();
    for (const std::string &path : headers) {
      auto header = llvm::MemoryBuffer::getFile(PPC_SOURCE_DIR + path);
      ASSERT_TRUE(bool(header)) << "cannot read " << path;
      text += (*header)->getBuffer().str();
    }
    std::set<std::string> absent;
    for (const std::string &name : called)
      if (text.find(" " + name + "(") == std::string::npos)
        absent.insert(name);
    EXPECT_EQ(absent, std::set<std::string>{}) << "kernels " << library << " lacks";
  }
}

TEST_F(OpTablesTest, EveryElementwiseOpHasItsScalarFunction) {
  auto header = llvm::MemoryBuffer::getFile(PPC_SOURCE_DIR "/runtime/ppcrt/Scalar.h");
  ASSERT_TRUE(bool(header)) << "cannot read runtime/ppcrt/Scalar.h";
  llvm::StringRef text = (*header)->getBuffer();
  std::set<std::string> elementwise;
  EXPECT_EQ(missing([&](Operation *op) {
              if (!isElementwise(op))
                return true;
              elementwise.insert(op->getName().getStringRef().str());
              llvm::StringRef fn = scalarFunction(op);
              // Cast alone has none: code generation spells it by type.
              if (fn.empty())
                return llvm::isa<CastOp>(op);
              return llvm::Regex(("inline [A-Za-z0-9_<>]+ " + fn + "\\(").str()).match(text);
            }),
            std::set<std::string>{})
      << "elementwise ops whose scalar function runtime/ppcrt/Scalar.h lacks";
  // The interface is attached (cast, the unary and binary ops and where at
  // least); an op that loses it lacks an emitter (EveryOpHasAnEmitterOrFuses).
  EXPECT_GE(elementwise.size(), 30u);
}

} // namespace
