//===- OnnxConformance.cpp - the ONNX backend node tests ------------------===//
//
// Runs every ONNX backend node test (model.onnx + test_data_set_*/ with
// input_*.pb and output_*.pb) through import, the import pipeline and the
// reference executor, and compares with the expected outputs as ONNX's
// runner does (rtol 1e-3, atol 1e-7). A test whose model uses an op ppc does
// not support is skipped with that reason; a test of supported ops may only
// be skipped through the skip list, each entry with a written reason.
// ppc compiles static shapes, so graph inputs that shapes depend on (a
// Reshape's shape, a Slice's starts, ...) are bound to their test values at
// import, and the test says so.
//
//===----------------------------------------------------------------------===//

#include "executor/Interpreter.h"
#include "frontend/OnnxImporter.h"
#include "frontend/OnnxTensor.h"
#include "ir/PpcDialect.h"
#include "passes/Pipelines.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <map>
#include <set>
#include <variant>

using namespace mlir;
using namespace ppc;
namespace cl = llvm::cl;

namespace {

cl::opt<std::string> dataDir("data", cl::desc("directory of node tests"),
                             cl::init("/usr/share/libonnx-testdata/data/node"));
cl::opt<std::string> skipFile("skips", cl::desc("skip list: 'test_name: reason' lines"),
                              cl::Required);
cl::opt<std::string> filter("filter", cl::desc("run only tests whose name contains this"));
cl::opt<bool> verbose("v", cl::desc("print every test's result"));

enum class Outcome { Pass, Fail, Skip };
struct Result {
  Outcome outcome;
  std::string reason;
};

llvm::StringMap<std::string> readSkips(llvm::StringRef path) {
  llvm::StringMap<std::string> skips;
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    llvm::errs() << "error: file '" << path << "': " << buffer.getError().message() << "\n";
    std::exit(1);
  }
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n');
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (line.empty() || line.starts_with("#"))
      continue;
    auto [name, reason] = line.split(':');
    if (reason.trim().empty()) {
      llvm::errs() << "error: file '" << path << "': skip of '" << name << "' has no reason\n";
      std::exit(1);
    }
    skips[name.trim()] = reason.trim().str();
  }
  return skips;
}

llvm::Expected<Tensor> readTensorPb(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, false, false);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), "cannot read " + path);
  onnx::TensorProto proto;
  if (!proto.ParseFromArray((*buffer)->getBufferStart(),
                            static_cast<int>((*buffer)->getBufferSize())))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'" + path + "' is not a TensorProto");
  return decodeTensorProto(proto, llvm::sys::path::parent_path(path));
}

/// Sorted `prefix_N.pb` files of a data set directory.
std::vector<std::string> dataFiles(llvm::StringRef dir, llvm::StringRef prefix) {
  std::map<int, std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    int index;
    if (name.consume_front(prefix) && name.consume_back(".pb") && !name.getAsInteger(10, index))
      files[index] = it->path();
  }
  std::vector<std::string> result;
  for (auto &[i, f] : files)
    result.push_back(f);
  return result;
}

/// Compares like numpy.testing.assert_allclose(rtol=1e-3, atol=1e-7).
std::string compare(const Tensor &actual, const Tensor &expected) {
  auto describe = [](const Tensor &t) {
    std::string s = dtypeName(t.dtype()).str() + " [";
    for (auto [i, d] : llvm::enumerate(t.shape()))
      s += (i ? "," : "") + std::to_string(d);
    return s + "]";
  };
  if (actual.shape() != expected.shape() || actual.dtype() != expected.dtype())
    return "got " + describe(actual) + ", expected " + describe(expected);
  for (int64_t i = 0; i < expected.numElements(); ++i) {
    if (!expected.isFloat()) {
      if (actual.ints()[i] != expected.ints()[i])
        return llvm::formatv("element {0}: got {1}, expected {2}", i, actual.ints()[i],
                             expected.ints()[i]);
      continue;
    }
    double a = actual.floats()[i], e = expected.floats()[i];
    if (std::isnan(e) && std::isnan(a))
      continue;
    if (std::isinf(e) && a == e)
      continue;
    if (!(std::abs(a - e) <= 1e-7 + 1e-3 * std::abs(e)))
      return llvm::formatv("element {0}: got {1}, expected {2}", i, a, e);
  }
  return "";
}

/// ONNX 1.12's test data stores bfloat16 tensors as their uint16 bit
/// patterns; these convert between the two representations.
Tensor bf16FromBits(const Tensor &bits) {
  Tensor t(DType::BF16, bits.shape());
  for (int64_t i = 0; i < t.numElements(); ++i) {
    llvm::APFloat f(llvm::APFloat::BFloat(),
                    llvm::APInt(16, static_cast<uint64_t>(bits.ints()[i])));
    bool lost;
    f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
    t.floats()[i] = f.convertToDouble();
  }
  return t;
}

Tensor bitsFromBf16(const Tensor &t) {
  Tensor bits(DType::U16, t.shape());
  for (int64_t i = 0; i < t.numElements(); ++i) {
    llvm::APFloat f(t.floats()[i]);
    bool lost;
    f.convert(llvm::APFloat::BFloat(), llvm::APFloat::rmNearestTiesToEven, &lost);
    bits.ints()[i] = f.bitcastToAPInt().getZExtValue();
  }
  return bits;
}

/// The graph inputs that are not initializers, in order: the order of the
/// input_N.pb files.
std::vector<const onnx::ValueInfoProto *> graphInputs(const OnnxModel &model) {
  std::vector<const onnx::ValueInfoProto *> inputs;
  for (const auto &info : model.proto().graph().input())
    if (!model.initializer(info.name()))
      inputs.push_back(&info);
  return inputs;
}

/// The graph inputs that value `name` is computed from.
std::set<std::string> inputsFeeding(const OnnxModel &model, const std::string &name) {
  std::map<std::string, const onnx::NodeProto *> producer;
  for (const auto &node : model.proto().graph().node())
    for (const auto &out : node.output())
      producer[out] = &node;
  std::set<std::string> graphInputNames, result, seen;
  for (const auto *info : graphInputs(model))
    graphInputNames.insert(info->name());
  std::vector<std::string> work{name};
  while (!work.empty()) {
    std::string v = work.back();
    work.pop_back();
    if (!seen.insert(v).second)
      continue;
    if (graphInputNames.count(v))
      result.insert(v);
    if (auto it = producer.find(v); it != producer.end())
      for (const auto &in : it->second->input())
        work.push_back(in);
  }
  return result;
}

/// Imports the model; when a value a shape depends on is not a constant (the
/// importer asks for "input N ('NAME') must be a compile-time constant"), the
/// graph inputs it is computed from are bound to their values in this data
/// set and the import retried: the specialization a static-shape compiler
/// performs. Unsupported ops become a skip.
std::variant<OwningOpRef<ModuleOp>, Result> importSpecialized(const OnnxModel &model,
                                                              MLIRContext &context,
                                                              const llvm::StringMap<Tensor> &values,
                                                              std::set<std::string> &bound) {
  while (true) {
    ImportOptions options;
    for (const std::string &name : bound)
      options.constantInputs[name] = values.lookup(name);
    std::set<std::string> unsupported;
    std::string firstError, needsConstant;
    OwningOpRef<ModuleOp> module;
    {
      ScopedDiagnosticHandler quiet(&context, [](Diagnostic &) { return success(); });
      module = importOnnxModel(model, context, options, [&](const llvm::Twine &message) {
        std::string m = message.str();
        llvm::StringRef ref(m);
        size_t open = m.find("' (");
        if (ref.ends_with("unsupported op") && open != std::string::npos)
          unsupported.insert(m.substr(open + 3, m.find("):") - open - 3));
        else if (firstError.empty())
          firstError = m;
        size_t quote = m.find(" ('");
        if (ref.ends_with("') must be a compile-time constant") && quote != std::string::npos &&
            needsConstant.empty())
          needsConstant = m.substr(quote + 3, m.rfind("')") - quote - 3);
      });
    }
    if (!unsupported.empty()) {
      std::string ops;
      for (const std::string &op : unsupported)
        ops += (ops.empty() ? "" : ", ") + op;
      return Result{Outcome::Skip, "unsupported op " + ops};
    }
    if (module)
      return std::move(module);
    size_t before = bound.size();
    if (!needsConstant.empty())
      for (const std::string &input : inputsFeeding(model, needsConstant))
        if (values.count(input))
          bound.insert(input);
    if (bound.size() == before)
      return Result{Outcome::Fail, "import: " + firstError};
  }
}

Result runDataSet(const OnnxModel &model, llvm::StringRef setDir, MLIRContext &context,
                  std::set<std::string> &bound) {
  auto inputFiles = dataFiles(setDir, "input_");
  auto inputs = graphInputs(model);
  if (inputFiles.size() != inputs.size())
    return {Outcome::Fail, llvm::formatv("{0} input files for {1} graph inputs", inputFiles.size(),
                                         inputs.size())};
  llvm::StringMap<Tensor> values;
  for (auto [info, file] : llvm::zip(inputs, inputFiles)) {
    auto t = readTensorPb(file);
    if (!t)
      return {Outcome::Fail, llvm::toString(t.takeError())};
    if (t->dtype() == DType::U16 &&
        info->type().tensor_type().elem_type() == onnx::TensorProto::BFLOAT16)
      *t = bf16FromBits(*t);
    values[info->name()] = std::move(*t);
  }
  auto imported = importSpecialized(model, context, values, bound);
  if (auto *result = std::get_if<Result>(&imported))
    return *result;
  OwningOpRef<ModuleOp> module = std::move(std::get<OwningOpRef<ModuleOp>>(imported));

  std::string diagnostic;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    if (diagnostic.empty())
      diagnostic = d.str();
    return success();
  });
  PassManager pm(&context);
  buildImportPipeline(pm, ImportPipelineOptions{});
  if (failed(pm.run(*module)))
    return {Outcome::Fail, "import pipeline: " + diagnostic};
  auto func = *module->getOps<func::FuncOp>().begin();
  llvm::SmallVector<Tensor> args;
  for (const auto *info : inputs)
    if (!bound.count(info->name()))
      args.push_back(values[info->name()]);
  auto results = runFunction(func, args, ExecOptions{});
  if (failed(results))
    return {Outcome::Fail, "executor: " + diagnostic};
  auto outputs = dataFiles(setDir, "output_");
  if (outputs.size() != results->size())
    return {Outcome::Fail,
            llvm::formatv("{0} results for {1} expected outputs", results->size(), outputs.size())};
  for (auto [i, f] : llvm::enumerate(outputs)) {
    auto expected = readTensorPb(f);
    if (!expected)
      return {Outcome::Fail, llvm::toString(expected.takeError())};
    Tensor &actual = (*results)[i];
    if (actual.dtype() == DType::BF16 && expected->dtype() == DType::U16)
      actual = bitsFromBf16(actual);
    std::string mismatch = compare(actual, *expected);
    if (!mismatch.empty())
      return {Outcome::Fail, llvm::formatv("output {0}: {1}", i, mismatch)};
  }
  return {Outcome::Pass, ""};
}

Result runTest(llvm::StringRef dir, MLIRContext &context) {
  llvm::SmallString<256> modelPath(dir);
  llvm::sys::path::append(modelPath, "model.onnx");
  auto model = OnnxModel::load(modelPath);
  if (!model)
    return {Outcome::Fail, llvm::toString(model.takeError())};
  // Unsupported ops are known before any data is read (sequence and optional
  // inputs are not TensorProtos).
  {
    std::set<std::string> none;
    auto imported = importSpecialized(**model, context, {}, none);
    if (auto *r = std::get_if<Result>(&imported); r && r->outcome == Outcome::Skip)
      return *r;
  }
  std::error_code ec;
  int sets = 0;
  std::set<std::string> bound;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    if (!llvm::StringRef(llvm::sys::path::filename(it->path())).starts_with("test_data_set_"))
      continue;
    ++sets;
    Result r = runDataSet(**model, it->path(), context, bound);
    if (r.outcome != Outcome::Pass)
      return r;
  }
  if (sets == 0)
    return {Outcome::Fail, "no test_data_set_* directory"};
  std::string note;
  for (const std::string &name : bound)
    note += (note.empty() ? "bound at compile time: " : ", ") + name;
  return {Outcome::Pass, note};
}

} // namespace

int main(int argc, char **argv) {
  cl::ParseCommandLineOptions(argc, argv, "ppc ONNX backend node test runner\n");
  llvm::StringMap<std::string> skips = readSkips(skipFile);
  std::vector<std::string> tests;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dataDir, ec), end; it != end && !ec; it.increment(ec)) {
    std::string name = llvm::sys::path::filename(it->path()).str();
    if (filter.empty() || name.find(filter) != std::string::npos)
      tests.push_back(name);
  }
  if (ec || tests.empty()) {
    llvm::errs() << "error: no node tests in '" << dataDir << "'\n";
    return 1;
  }
  std::sort(tests.begin(), tests.end());

  MLIRContext context;
  loadImportDialects(context);
  int passed = 0, failed = 0, skipped = 0, listed = 0;
  std::vector<std::string> skipLines, failLines;
  for (const std::string &name : tests) {
    llvm::SmallString<256> dir(dataDir);
    llvm::sys::path::append(dir, name);
    Result r = runTest(dir, context);
    auto skip = skips.find(name);
    if (skip != skips.end()) {
      ++listed;
      if (r.outcome == Outcome::Pass)
        failLines.push_back(name + ": passes but is in the skip list (remove it)");
      else
        skipLines.push_back(name + ": " + skip->second + " (skip list)");
      (r.outcome == Outcome::Pass ? failed : skipped)++;
      continue;
    }
    switch (r.outcome) {
    case Outcome::Pass:
      ++passed;
      if (verbose || !r.reason.empty())
        llvm::outs() << "PASS " << name << (r.reason.empty() ? "" : " (" + r.reason + ")") << "\n";
      break;
    case Outcome::Fail:
      ++failed;
      failLines.push_back(name + ": " + r.reason);
      break;
    case Outcome::Skip:
      ++skipped;
      skipLines.push_back(name + ": " + r.reason);
      break;
    }
  }
  for (const std::string &line : skipLines)
    llvm::outs() << "SKIP " << line << "\n";
  for (const std::string &line : failLines)
    llvm::outs() << "FAIL " << line << "\n";
  llvm::outs() << llvm::formatv("node tests among supported ops: {0} ({1} passed, "
                                "{2} failed, {3} skipped by the skip list)\n",
                                passed + failed + listed, passed, failed, listed);
  llvm::outs() << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  return failed ? 1 : 0;
}
