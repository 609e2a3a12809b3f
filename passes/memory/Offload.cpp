//===- Offload.cpp - optimizer state and parameters in host memory --------===//
//
// ZeRO-Offload (Ren et al., 2021) and FSDP's CPUOffload as a rewrite of each
// rank's training program: what `what` names lives in host memory, the
// optimizer step runs on the host, and `ppc.transfer` copies each value that
// crosses between the device's ops and the host's, once each way at most.
// Where the copies go decides what overlaps: a gradient is copied to the host
// right after it is computed (so the copy runs beside the rest of the
// backward), a value is copied to the device right before its first reader
// there. Code generation runs the host's ops with the CPU kernels and each
// transfer on a copy stream of its own (codegen/Emitter.cpp).
//
//===----------------------------------------------------------------------===//

#include "passes/memory/Offload.h"

#include "ir/PpcDialect.h"
#include "ir/PpcOps.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"
#include "passes/memory/MemoryPlan.h"
#include "passes/memory/Recompute.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_OFFLOAD
#include "passes/Passes.h.inc"

std::optional<OffloadLevel> parseOffloadLevel(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<OffloadLevel>>(name)
      .Case("none", OffloadLevel::None)
      .Case("optimizer", OffloadLevel::Optimizer)
      .Case("optimizer+params", OffloadLevel::OptimizerAndParams)
      .Default(std::nullopt);
}

llvm::StringRef offloadLevelName(OffloadLevel level) {
  switch (level) {
  case OffloadLevel::None:
    return "none";
  case OffloadLevel::Optimizer:
    return "optimizer";
  case OffloadLevel::OptimizerAndParams:
    return "optimizer+params";
  }
  return "none";
}

namespace {

/// Moves the optimizer state (and with `params` the parameters) of
/// `program` to host memory, its optimizer step to the host, and inserts
/// the transfers between the two.
void offload(func::FuncOp program, bool params) {
  MLIRContext *ctx = program.getContext();
  auto host = StringAttr::get(ctx, "host");
  auto placed = [&](DictionaryAttr attrs) {
    return attrs && (attrs.get(PpcDialect::kStateAttrName) ||
                     (params && attrs.get(PpcDialect::kParamAttrName)));
  };
  for (unsigned i = 0; i < program.getNumArguments(); ++i)
    if (placed(program.getArgAttrDict(i)))
      program.setArgAttr(i, PpcDialect::kPlaceAttrName, host);
  llvm::SmallVector<bool> resultOnHost;
  for (unsigned i = 0; i < program.getNumResults(); ++i) {
    resultOnHost.push_back(placed(program.getResultAttrDict(i)));
    if (resultOnHost.back())
      program.setResultAttr(i, PpcDialect::kPlaceAttrName, host);
  }

  Block &body = program.getBody().front();
  for (Operation &op : body)
    if (op.hasAttr(PpcDialect::kOptimizerAttrName))
      op.setAttr(PpcDialect::kPlaceAttrName, host);
  // A constant that only the host reads is made there, and so is the shard
  // of a parameter in host memory that only the host's update reads (ZeRO 1
  // and 2 slice it out of the whole parameter).
  auto onlyHostReads = [](Operation &op) {
    return !op.use_empty() &&
           llvm::all_of(op.getUsers(), [](Operation *user) { return runsOnHost(user); });
  };
  for (Operation &op : body)
    if ((llvm::isa<ConstantOp>(op) || (llvm::isa<AllSliceOp>(op) && onHost(op.getOperand(0)))) &&
        onlyHostReads(op))
      op.setAttr(PpcDialect::kPlaceAttrName, host);

  llvm::DenseMap<Value, Value> onHostCopy, onDeviceCopy;
  llvm::DenseMap<std::pair<Value, Operation *>, Value> readerCopy;
  OpBuilder b(ctx);
  auto copyOf = [&](Value v, bool toHost, Operation *reader) {
    // An argument in host memory (a parameter) is copied to the device for
    // each op that reads it there, so that no copy stays on the device
    // between its reads (the forward's and the backward's gathers).
    Value &copy = !toHost && llvm::isa<BlockArgument>(v) ? readerCopy[{v, reader}]
                  : toHost                               ? onHostCopy[v]
                                                         : onDeviceCopy[v];
    if (copy)
      return copy;
    // To the host as soon as the value exists; to the device right
    // before its first reader there.
    if (!toHost)
      b.setInsertionPoint(reader);
    else if (auto arg = llvm::dyn_cast<BlockArgument>(v))
      b.setInsertionPointToStart(&body);
    else
      b.setInsertionPointAfter(v.getDefiningOp());
    // Named for diagnostics by the parameter whose update reads or writes
    // it, or that it is.
    StringAttr name;
    if (auto arg = llvm::dyn_cast<BlockArgument>(v))
      name = program.getArgAttrOfType<StringAttr>(arg.getArgNumber(), PpcDialect::kParamAttrName);
    else if (toHost)
      name = reader->getAttrOfType<StringAttr>(PpcDialect::kOptimizerAttrName);
    else
      name = v.getDefiningOp()->getAttrOfType<StringAttr>(PpcDialect::kOptimizerAttrName);
    Location loc = name ? Location(NameLoc::get(name, v.getLoc())) : v.getLoc();
    auto transfer = b.create<TransferOp>(loc, v, toHost);
    if (Operation *def = v.getDefiningOp()) {
      if (auto name = def->getAttrOfType<StringAttr>(PpcDialect::kValueAttrName))
        transfer->setAttr(PpcDialect::kValueAttrName, name);
      if (auto shardings = def->getAttrOfType<ArrayAttr>(PpcDialect::kShardingsAttrName);
          shardings && def->getNumResults() == 1)
        transfer->setAttr(PpcDialect::kShardingsAttrName, shardings);
    }
    copy = transfer.getResult();
    return copy;
  };
  llvm::SmallVector<Operation *> ops;
  for (Operation &op : body)
    ops.push_back(&op);
  for (Operation *op : ops) {
    bool returns = llvm::isa<func::ReturnOp>(op);
    for (OpOperand &use : op->getOpOperands()) {
      bool wanted = returns ? resultOnHost[use.getOperandNumber()] : runsOnHost(op);
      if (onHost(use.get()) != wanted)
        use.set(copyOf(use.get(), wanted, op));
    }
  }
}

/// What a program without a plan (one rank: no planner) offloads with
/// `auto`: nothing where its memory plan fits `budget` with full
/// recomputation (ppc-recompute's auto, after this pass, takes the least of
/// it that fits); else the optimizer state, if that then fits; else the
/// parameters too. Each trial plans a copy of the program.
FailureOr<OffloadLevel> chooseWithoutPlan(func::FuncOp program, double budget) {
  for (OffloadLevel level : {OffloadLevel::None, OffloadLevel::Optimizer}) {
    func::FuncOp trial = program.clone();
    if (level != OffloadLevel::None)
      offload(trial, false);
    recomputeEveryBlock(trial, RecomputePolicy::Full);
    FailureOr<int64_t> peak = peakLiveBytes(trial);
    trial->erase();
    if (failed(peak))
      return failure();
    if (*peak <= budget)
      return level;
  }
  return OffloadLevel::OptimizerAndParams;
}

struct OffloadPass : impl::OffloadBase<OffloadPass> {
  using OffloadBase::OffloadBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<OffloadLevel> level = parseOffloadLevel(what);
    if (what != "auto" && (!level || *level == OffloadLevel::None)) {
      module.emitError() << "offload '" << what
                         << "' is not one of optimizer, optimizer+params, auto";
      return signalPassFailure();
    }
    for (func::FuncOp program : trainingPrograms(module)) {
      // auto: what the planner chose for the step (ppc.plan); without a plan
      // (one rank), the least that fits memory-per-rank.
      if (what == "auto") {
        auto plan = program->getAttrOfType<DictionaryAttr>(PpcDialect::kPlanAttrName);
        if (!plan) {
          FailureOr<OffloadLevel> chosen = chooseWithoutPlan(program, memoryPerRank);
          if (failed(chosen))
            return signalPassFailure();
          level = *chosen;
        } else if (auto chosen = plan.getAs<StringAttr>("offload")) {
          level = parseOffloadLevel(chosen.getValue());
        } else {
          level = OffloadLevel::None;
        }
        if (!level) {
          program.emitError() << "the plan's offload is not one of none, optimizer, "
                                 "optimizer+params";
          return signalPassFailure();
        }
      }
      if (*level != OffloadLevel::None)
        offload(program, *level == OffloadLevel::OptimizerAndParams);
    }
  }
};

} // namespace
} // namespace ppc
