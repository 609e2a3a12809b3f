//===- Driver.cpp - what the ppc subcommands share ------------------------===//

#include "tools/ppc/Driver.h"
#include "frontend/TrainableParameters.h"
#include "ir/PpcDialect.h"
#include "passes/Pipelines.h"
#include "passes/memory/MemoryPlan.h"
#include "passes/pipeline/Schedule.h"
#include "passes/pipeline/Timeline.h"
#include "passes/sharding/CommunicationReport.h"
#include "passes/sharding/CostModel.h"
#include "runtime/ppcrt/CommandLine.h"
#include "runtime/ppcrt/Program.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;
namespace cl = llvm::cl;

namespace ppc {

int reportError(const llvm::Twine &message) {
  llvm::errs() << "error: " << printable(message.str()) << "\n";
  return 1;
}

void reportWarning(const llvm::Twine &message) {
  llvm::errs() << "warning: " << printable(message.str()) << "\n";
}

void printSubcommands(llvm::ArrayRef<Subcommand> subcommands, llvm::raw_ostream &os) {
  for (const Subcommand &c : subcommands)
    os << "  " << llvm::left_justify(c.name, 12) << c.summary << "\n";
}

std::optional<int> runSubcommand(llvm::ArrayRef<Subcommand> subcommands, llvm::StringRef prefix,
                                 int argc, char **argv) {
  for (const Subcommand &c : subcommands) {
    if (llvm::StringRef(argv[1]) != c.name)
      continue;
    // The subcommand parses its own options; it is argv[0] of its line.
    std::string program = (prefix + " " + c.name).str();
    std::vector<char *> args{program.data()};
    args.insert(args.end(), argv + 2, argv + argc);
    return c.run(static_cast<int>(args.size()), args.data());
  }
  return std::nullopt;
}

void parseCommandLine(int argc, char **argv, llvm::cl::OptionCategory &category,
                      const char *overview) {
  // Every other category (LLVM's and MLIR's options) is hidden, not
  // removed: HideUnrelatedOptions would hide it from --help-hidden too.
  llvm::StringMap<llvm::cl::Option *> &options = llvm::cl::getRegisteredOptions();
  llvm::cl::OptionCategory *generic = options.lookup("help")->Categories.front();
  for (auto &entry : options) {
    llvm::cl::Option *option = entry.second;
    if (!llvm::is_contained(option->Categories, &category) &&
        !llvm::is_contained(option->Categories, generic))
      option->setHiddenFlag(llvm::cl::Hidden);
  }
  std::string text = std::string(overview) +
                     "\n(--help-hidden also lists LLVM's and MLIR's options, such as "
                     "--mlir-print-ir-after-all.)\n";
  // Before LLVM's parser, which would report the flag's value as an
  // unexpected positional argument, or accept it.
  if (std::string error = ppcrt::flagTakenAsValue(argc, argv); !error.empty())
    std::exit(reportError(error));
  llvm::cl::ParseCommandLineOptions(argc, argv, text);
}

/// The ONNX node a location names, if any.
static std::string nodeOf(Location loc) {
  if (auto name = llvm::dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = llvm::dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (std::string n = nodeOf(l); !n.empty())
        return n;
  return "";
}

DriverDiagnostics::DriverDiagnostics(MLIRContext &context) : context(context) {
  id = context.getDiagEngine().registerHandler([](Diagnostic &d) {
    std::string node = nodeOf(d.getLocation());
    llvm::StringRef severity = d.getSeverity() == DiagnosticSeverity::Error     ? "error"
                               : d.getSeverity() == DiagnosticSeverity::Warning ? "warning"
                                                                                : "note";
    llvm::errs() << severity << ": " << (node.empty() ? "" : "node '" + printable(node) + "': ")
                 << printable(d.str()) << "\n";
    return success();
  });
}

DriverDiagnostics::~DriverDiagnostics() { context.getDiagEngine().eraseHandler(id); }

PipelineFlags::PipelineFlags(llvm::cl::OptionCategory &category)
    : dumpIR("dump-ir",
             llvm::cl::desc("write the IR before the first pass and after every pass "
                            "to DIR/NN_<pass>.mlir"),
             llvm::cl::value_desc("DIR"), llvm::cl::cat(category)) {
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
}

namespace {
/// What --dump-ir has written to one directory in this process: a command
/// runs several pipelines (import, then training and parallelize), whose
/// dumps are numbered on, and whose passes pipeline.txt lists together.
struct DumpSession {
  int counter = 0;
  std::string passes;
};

DumpSession &dumpSession(llvm::StringRef dir) {
  static llvm::StringMap<DumpSession> sessions;
  return sessions[dir];
}

/// Writes the module to DIR/NN_<name>.mlir after every pass.
class DumpIRInstrumentation : public PassInstrumentation {
public:
  DumpIRInstrumentation(std::string dir, ModuleOp module)
      : dir(std::move(dir)), module(module), session(dumpSession(this->dir)) {}

  void dump(llvm::StringRef name) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, llvm::formatv("{0:02}_{1}.mlir", session.counter++, name).str());
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec) {
      reportWarning("cannot write '" + path + "': " + ec.message());
      return;
    }
    // The first file is what ppc-opt replays the pipeline on: it keeps the
    // locations (the ONNX node names), which passes name values by.
    module->print(os, OpPrintingFlags().enableDebugInfo(session.counter == 1));
    os << "\n";
  }

  void runAfterPass(Pass *pass, Operation *) override {
    // Pass adaptors (which run nested pipelines) have no argument.
    if (!pass->getArgument().empty())
      dump(pass->getArgument());
  }

private:
  std::string dir;
  ModuleOp module;
  DumpSession &session;
};
} // namespace

DumpPoint dumpPoint(llvm::StringRef dumpDir) {
  const DumpSession &session = dumpSession(dumpDir);
  return {session.counter, session.passes};
}

void rewindDump(llvm::StringRef dumpDir, const DumpPoint &point) {
  DumpSession &session = dumpSession(dumpDir);
  session.counter = point.counter;
  session.passes = point.passes;
}

LogicalResult runPipeline(ModuleOp module, const std::function<void(OpPassManager &)> &build,
                          llvm::StringRef dumpDir) {
  PassManager pm(module->getContext(), ModuleOp::getOperationName());
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  build(pm);
  if (!dumpDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(dumpDir)) {
      reportError("--dump-ir: cannot create '" + dumpDir + "': " + ec.message());
      return failure();
    }
    // The passes so far, as ppc-opt's --pass-pipeline takes them: ppc-opt
    // DIR/00_import.mlir --pass-pipeline="$(cat DIR/pipeline.txt)" prints
    // the last file's IR.
    DumpSession &session = dumpSession(dumpDir);
    std::string passes;
    llvm::raw_string_ostream text(passes);
    pm.printAsTextualPipeline(text);
    // "builtin.module(P)": P, to join with the other pipelines' passes.
    llvm::StringRef inner(passes);
    if (inner.consume_front(ModuleOp::getOperationName()) && inner.consume_front("(") &&
        inner.consume_back(")"))
      passes = inner.str();
    session.passes += (session.passes.empty() || passes.empty() ? "" : ",") + passes;
    llvm::SmallString<256> path(dumpDir);
    llvm::sys::path::append(path, "pipeline.txt");
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      reportWarning("cannot write '" + path + "': " + ec.message());
    else
      os << "builtin.module(" << session.passes << ")\n";
    // Dumps come in pass order only when passes run one at a time.
    module->getContext()->disableMultithreading();
    auto dumper = std::make_unique<DumpIRInstrumentation>(dumpDir.str(), module);
    if (session.counter == 0)
      dumper->dump("import");
    pm.addInstrumentation(std::move(dumper));
  }
  return pm.run(module);
}

ParameterFlags::ParameterFlags(cl::OptionCategory &category)
    : train("train",
            cl::desc("train only the float initializers whose names match PATTERN (a glob; "
                     "repeatable) [the export helper's record, else every float "
                     "initializer]"),
            cl::value_desc("PATTERN"), cl::cat(category)),
      freeze("freeze",
             cl::desc("keep the float initializers whose names match PATTERN constant "
                      "(a glob; repeatable)"),
             cl::value_desc("PATTERN"), cl::cat(category)),
      untie("untie",
            cl::desc("give every parameter that an eval-mode export merged with others of "
                     "equal value (an Identity of an initializer) its own copy"),
            cl::init(false), cl::cat(category)) {}

LogicalResult ParameterFlags::apply(OnnxModel &model, ImportOptions &options) {
  if (untie)
    model.untieMergedInitializers();
  ParameterChoice choice;
  choice.train.assign(train.begin(), train.end());
  choice.freeze.assign(freeze.begin(), freeze.end());
  auto parameters = chooseParameters(
      model, choice, [](const llvm::Twine &message) { reportError(message); },
      [](const llvm::Twine &message) { reportWarning(message); });
  if (failed(parameters))
    return failure();
  options.parameters = std::move(*parameters);
  return success();
}

LogicalResult parseDimFlags(llvm::ArrayRef<std::string> flags, ImportOptions &options) {
  for (const std::string &flag : flags) {
    auto [name, value] = llvm::StringRef(flag).split('=');
    int64_t size;
    if (name.empty() || value.getAsInteger(10, size) || size <= 0) {
      reportError("--dim '" + flag + "': expected NAME=N with N > 0");
      return failure();
    }
    options.dimSizes[name] = size;
  }
  return success();
}

OwningOpRef<ModuleOp> importModel(llvm::StringRef path, MLIRContext &context,
                                  const ImportOptions &options, llvm::StringRef dumpDir,
                                  std::unique_ptr<OnnxModel> &model) {
  auto loaded = OnnxModel::load(path);
  if (!loaded) {
    reportError(llvm::toString(loaded.takeError()));
    return nullptr;
  }
  model = std::move(*loaded);
  return importModel(*model, context, options, dumpDir);
}

OwningOpRef<ModuleOp> importModel(const OnnxModel &model, MLIRContext &context,
                                  const ImportOptions &options, llvm::StringRef dumpDir,
                                  llvm::function_ref<void(const llvm::Twine &)> emitError) {
  OwningOpRef<ModuleOp> module =
      importOnnxModel(model, context, options, [&](const llvm::Twine &m) {
        if (emitError)
          emitError(m);
        else
          reportError(m);
      });
  if (!module)
    return nullptr;
  ImportPipelineOptions pipeline;
  pipeline.maxFoldElements = options.maxFoldElements;
  if (failed(runPipeline(
          *module, [&](OpPassManager &pm) { buildImportPipeline(pm, pipeline); }, dumpDir)))
    return nullptr;
  return module;
}

/// "i64 [2,16]": how errors describe a tensor's dtype and shape.
static std::string describe(DType dtype, llvm::ArrayRef<int64_t> shape) {
  std::string s = dtypeName(dtype).str() + " [";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "," : "") + std::to_string(d);
  return s + "]";
}

FailureOr<llvm::SmallVector<Tensor>> bindArguments(func::FuncOp func, const OnnxModel &model,
                                                   llvm::StringMap<Tensor> &inputs,
                                                   const ExecOptions &options) {
  llvm::SmallVector<Tensor> args;
  llvm::StringSet<> used;
  bool ok = true;
  for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
    auto type = llvm::cast<RankedTensorType>(arg.getType());
    DType declared = *dtypeOf(type.getElementType());
    if (auto name = func.getArgAttrOfType<StringAttr>(i, PpcDialect::kInputAttrName)) {
      auto it = inputs.find(name.getValue());
      if (it == inputs.end()) {
        reportError("input '" + printable(name.getValue()) + "' is missing; pass --input " +
                    printable(name.getValue()) + "=FILE.npy");
        ok = false;
        continue;
      }
      used.insert(name.getValue());
      const Tensor &t = it->second;
      // Promoted to f64, a float input takes a float file of any precision.
      bool dtypeOk = t.dtype() == declared || (options.f64 && t.isFloat() && isFloat(declared));
      if (!dtypeOk || t.shape() != type.getShape()) {
        reportError("input '" + printable(name.getValue()) + "': expected " +
                    describe(declared, type.getShape()) + ", got " +
                    describe(t.dtype(), t.shape()));
        ok = false;
        continue;
      }
      args.push_back(t.castTo(options.storage(type)));
      continue;
    }
    auto name = func.getArgAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName);
    auto value = model.loadInitializer(name.getValue());
    if (!value) {
      reportError(llvm::toString(value.takeError()));
      ok = false;
      continue;
    }
    args.push_back(value->castTo(options.storage(type)));
  }
  for (const auto &entry : inputs) {
    if (!used.contains(entry.getKey())) {
      reportError("--input '" + entry.getKey() + "': the model has no graph input of that name");
      ok = false;
    }
  }
  if (!ok)
    return failure();
  return args;
}

FailureOr<llvm::SmallVector<std::string>> orderTokenInputs(const OnnxModel &model,
                                                           llvm::ArrayRef<std::string> keys) {
  if (keys.empty() || keys.size() > 2) {
    reportError("training feeds token windows to one or two integer inputs "
                "(inputs, then labels); the model has " +
                llvm::Twine(keys.size()));
    return failure();
  }
  const auto &inputs = model.proto().graph().input();
  auto position = [&](const std::string &key) {
    for (int i = 0; i < inputs.size(); ++i)
      if (std::string(ppcrt::kInputKey) + inputs[i].name() == key)
        return int64_t(i);
    return int64_t(inputs.size()); // appended: labels
  };
  llvm::SmallVector<std::string> ordered(keys.begin(), keys.end());
  llvm::stable_sort(ordered, [&](const std::string &a, const std::string &b) {
    return position(a) < position(b);
  });
  return ordered;
}

FailureOr<std::pair<MeshOp, llvm::SmallVector<func::FuncOp>>> meshPrograms(ModuleOp module,
                                                                           llvm::StringRef flag) {
  auto meshes = module.getOps<MeshOp>();
  llvm::SmallVector<func::FuncOp> programs = trainingPrograms(module);
  if (meshes.empty() || programs.empty())
    return failure(reportError(flag + ": a single rank communicates nothing; give --mesh"));
  return std::make_pair(*meshes.begin(), std::move(programs));
}

LogicalResult writeCommunicationReport(llvm::StringRef path, ModuleOp module, int64_t steps) {
  auto found = meshPrograms(module, "--report");
  if (failed(found))
    return failure();
  auto &[mesh, programs] = *found;
  std::vector<CommunicationReport> reports;
  llvm::SmallVector<llvm::json::Object> extra;
  for (func::FuncOp fn : programs) {
    reports.push_back(analyzeCommunication(fn, mesh));
    if (auto rank = fn->getAttrOfType<IntegerAttr>(PpcDialect::kPipelineRankAttrName)) {
      reports.back().pipelineRank = rank.getInt();
      if (auto stages = fn->getAttrOfType<DenseI64ArrayAttr>(PpcDialect::kStagesAttrName))
        reports.back().stages.assign(stages.asArrayRef().begin(), stages.asArrayRef().end());
    }
    FailureOr<MemoryPlan> plan = planMemory(fn);
    if (failed(plan))
      return failure();
    extra.push_back(llvm::json::Object{{"memory", memoryPlanJson(*plan)}});
  }
  std::string schedule;
  if (auto attr = module->getAttrOfType<DictionaryAttr>(PpcDialect::kScheduleAttrName))
    if (auto kind = attr.getAs<StringAttr>("kind"))
      schedule = kind.getValue().str();
  llvm::json::Value json = reportToJson(reports, extra, mesh, steps, schedule);
  return writeOutput(path,
                     [&](llvm::raw_ostream &os) { os << llvm::formatv("{0:2}", json) << "\n"; });
}

LogicalResult writeTimeline(ModuleOp module, llvm::StringRef tracePath, llvm::StringRef svgPath) {
  auto attr = module->getAttrOfType<DictionaryAttr>(PpcDialect::kScheduleAttrName);
  if (!attr) {
    reportError("--trace and --timeline draw a pipeline schedule; give --mesh AxBxC "
                "with C > 1");
    return failure();
  }
  auto integer = [&](StringRef name) { return attr.getAs<IntegerAttr>(name).getInt(); };
  auto kind = pipeline::parseScheduleKind(attr.getAs<StringAttr>("kind").getValue());
  auto schedule = pipeline::buildSchedule(*kind, integer("ranks"), integer("micro_batches"),
                                          integer("virtual_stages"));
  if (!schedule) {
    reportError(llvm::toString(schedule.takeError()));
    return failure();
  }
  // Stage costs: micro-batch 0's forward and backward ops of each stage,
  // priced as the stage assignment prices them; a transfer at the largest
  // send's time.
  MeshOp mesh = *module.getOps<MeshOp>().begin();
  AxisSizes sizes;
  for (auto [name, size] : llvm::zip(mesh.getAxisNames(), mesh.getShape()))
    sizes[name] = size;
  DeviceModel device;
  pipeline::StageCosts costs;
  costs.forward.assign(schedule->stages(), 0);
  costs.backward.assign(schedule->stages(), 0);
  for (func::FuncOp fn : trainingPrograms(module))
    fn.walk([&](Operation *op) {
      auto slot = op->getAttrOfType<StringAttr>(PpcDialect::kSlotAttrName);
      if (!slot)
        return;
      double seconds = localOpSeconds(op, device, sizes);
      if (llvm::isa<SendOp>(op)) {
        costs.sendSeconds = std::max(costs.sendSeconds, seconds);
        return;
      }
      auto [head, stage] = slot.getValue().split("@s");
      unsigned s;
      if (head != "F0" && head != "B0")
        return;
      if (stage.getAsInteger(10, s) || s >= costs.forward.size())
        return;
      (head == "F0" ? costs.forward : costs.backward)[s] += seconds;
    });
  pipeline::Timeline timeline = pipeline::predictTimeline(*schedule, costs);
  int64_t perStage = mesh.getNumRanks() / schedule->ranks;
  llvm::SmallVector<std::string> rows;
  for (int64_t r = 0; r < schedule->ranks; ++r)
    rows.push_back(llvm::formatv("pp{0} (ranks {1}-{2})", r, r * perStage, (r + 1) * perStage - 1));
  llvm::errs() << llvm::formatv(
      "predicted {0} schedule, p={1} v={2} m={3}: step {4:e3} s, bubble {5:f4} "
      "(formula {6:f4})\n",
      pipeline::scheduleName(*kind), schedule->ranks, schedule->virtualStages,
      schedule->microBatches, timeline.makespan, timeline.bubbleFraction,
      pipeline::formulaBubbleFraction(*schedule));
  if (!tracePath.empty() && failed(writeOutput(tracePath, [&](llvm::raw_ostream &os) {
        pipeline::writeChromeTrace(timeline, *schedule, rows, os);
      })))
    return failure();
  std::string title =
      llvm::formatv("{0}: predicted {1} schedule, p={2} v={3} m={4}",
                    module->getAttrOfType<StringAttr>(PpcDialect::kSourceAttrName)
                        ? module->getAttrOfType<StringAttr>(PpcDialect::kSourceAttrName).getValue()
                        : "model",
                    pipeline::scheduleName(*kind), schedule->ranks, schedule->virtualStages,
                    schedule->microBatches);
  if (!svgPath.empty() && failed(writeOutput(svgPath, [&](llvm::raw_ostream &os) {
        pipeline::writeSvgTimeline(timeline, *schedule, rows, title, os);
      })))
    return failure();
  return success();
}

std::vector<std::string> modelFiles(const OnnxModel &model, llvm::StringRef path) {
  std::vector<std::string> files = {path.str()};
  for (const auto &init : model.proto().graph().initializer())
    for (const auto &entry : init.external_data())
      if (entry.key() == "location") {
        llvm::SmallString<256> file(model.directory());
        llvm::sys::path::append(file, entry.value());
        files.push_back(std::string(file));
      }
  return files;
}

LogicalResult checkOutputs(llvm::ArrayRef<std::pair<std::string, std::string>> outputs,
                           llvm::ArrayRef<std::string> inputs) {
  // Paths are compared as files (sys::fs::equivalent: same device and inode)
  // where both exist, else by their absolute spelling.
  auto same = [](llvm::StringRef a, llvm::StringRef b) {
    bool equivalent = false;
    if (!llvm::sys::fs::equivalent(a, b, equivalent))
      return equivalent;
    llvm::SmallString<256> x(a), y(b);
    llvm::sys::fs::make_absolute(x);
    llvm::sys::fs::make_absolute(y);
    llvm::sys::path::remove_dots(x, true);
    llvm::sys::path::remove_dots(y, true);
    return x == y;
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto &[flag, path] = outputs[i];
    if (path.empty() || path == "-")
      continue;
    if (llvm::sys::fs::is_directory(path)) {
      reportError(flag + " '" + path + "': is a directory; name a file");
      return failure();
    }
    for (const std::string &input : inputs)
      if (!input.empty() && same(path, input)) {
        reportError(flag + " '" + path + "': is the input '" + input +
                    "'; writing it would destroy it");
        return failure();
      }
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].second.empty() && outputs[j].second != "-" && same(path, outputs[j].second)) {
        reportError(flag + " '" + path + "': is also " + outputs[j].first + "'s output");
        return failure();
      }
  }
  return success();
}

LogicalResult writeOutput(llvm::StringRef path,
                          llvm::function_ref<void(llvm::raw_ostream &)> write) {
  // llvm::writeToOutput writes a temporary file and renames it ("-" is stdout).
  if (llvm::Error e = llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
        write(os);
        return llvm::Error::success();
      })) {
    reportError("cannot write '" + path + "': " + llvm::toString(std::move(e)));
    return failure();
  }
  return success();
}

} // namespace ppc
