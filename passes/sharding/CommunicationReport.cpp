//===- CommunicationReport.cpp - what a partitioned step communicates -----===//

#include "passes/sharding/CommunicationReport.h"
#include "ir/PpcAttrs.h"
#include "ir/PpcOps.h"
#include "passes/Provenance.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace ppc {

static std::string nodeName(Location loc) {
  if (auto name = llvm::dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = llvm::dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (std::string n = nodeName(l); !n.empty())
        return n;
  return "";
}

static int64_t bytesOf(Type type) { return boundedTensorBytes(type); }

/// The record of a collective or send; nullopt for any other op.
static std::optional<CollectiveRecord> recordOf(Operation *op, MeshOp mesh) {
  if (auto send = llvm::dyn_cast<SendOp>(op)) {
    CollectiveRecord record;
    record.kind = "send";
    record.axes = {send.getAxis().str()};
    record.groupSize = 2;
    record.node = nodeName(op->getLoc());
    record.value = send.getValueName().str();
    record.elements = llvm::cast<ShapedType>(send.getInput().getType()).getNumElements();
    record.bytesPerRank = bytesOf(send.getInput().getType());
    return record;
  }
  if (!op->hasTrait<CommunicatesTrait>())
    return std::nullopt;
  CollectiveRecord record;
  record.kind = op->getName().stripDialect().str();
  auto axes = op->getAttrOfType<ArrayAttr>("axes");
  llvm::SmallVector<StringRef> names;
  for (Attribute a : axes) {
    names.push_back(llvm::cast<StringAttr>(a).getValue());
    record.axes.push_back(names.back().str());
  }
  record.groupSize = *mesh.getGroupSize(names);
  record.node = nodeName(op->getLoc());
  if (auto value = op->getAttrOfType<StringAttr>(PpcDialect::kValueAttrName))
    record.value = value.getValue().str();
  double n = record.groupSize;
  // S: the full tensor: the result of a gather, the operand of a scatter
  // or reduction, either for all-to-all.
  Type full = llvm::isa<AllGatherOp>(op) ? op->getResult(0).getType() : op->getOperand(0).getType();
  record.elements = llvm::cast<ShapedType>(full).getNumElements();
  double factor = llvm::isa<AllReduceOp>(op) ? 2 * (n - 1) / n : (n - 1) / n;
  record.bytesPerRank = factor * bytesOf(full);
  return record;
}

CommunicationReport analyzeCommunication(func::FuncOp step, MeshOp mesh) {
  CommunicationReport report;
  step.walk([&](Operation *op) {
    if (auto mb = intAttrOf(op, kMicroBatchAttrName))
      report.microBatches = std::max(report.microBatches, *mb + 1);
    if (std::optional<CollectiveRecord> record = recordOf(op, mesh)) {
      report.bytesByAxis[llvm::join(record->axes, ",")] += record->bytesPerRank;
      report.collectives.push_back(std::move(*record));
    }
  });
  if (auto zero = step->getAttrOfType<IntegerAttr>(PpcDialect::kZeroAttrName))
    report.zero = zero.getInt();
  int64_t dp = mesh.getAxisSize("dp").value_or(1);
  // How many parts of each argument the mesh axes other than dp (tp) and
  // dp make.
  auto parts = [&](unsigned i, bool overDp) {
    int64_t n = 1;
    if (auto sharding = step.getArgAttrOfType<ShardingAttr>(i, PpcDialect::kShardingAttrName))
      for (auto axesOfDim : sharding.getDimAxes())
        for (StringAttr a : axesOfDim)
          if ((a.getValue() == "dp") == overDp)
            n *= *mesh.getAxisSize(a.getValue());
    return n;
  };
  llvm::StringMap<int64_t> stateParts;
  int64_t stateBytesWhole = 0, copies = 0;
  for (unsigned i = 0; i < step.getNumArguments(); ++i)
    if (auto state = step.getArgAttrOfType<StringAttr>(i, PpcDialect::kStateAttrName)) {
      int64_t bytes = bytesOf(step.getArgument(i).getType());
      report.optimizerStateBytes += bytes;
      stateBytesWhole += bytes * parts(i, true);
      stateParts[state.getValue().split(':').second] = parts(i, true);
    }
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto name = step.getArgAttrOfType<StringAttr>(i, PpcDialect::kParamAttrName);
    if (!name)
      continue;
    auto sharding = step.getArgAttrOfType<ShardingAttr>(i, PpcDialect::kShardingAttrName);
    std::string layout;
    llvm::raw_string_ostream os(layout);
    if (sharding)
      os << sharding;
    report.parameters.emplace_back(name.getValue().str(), os.str());
    int64_t local = bytesOf(step.getArgument(i).getType());
    report.parameterStateBytes += local;
    // A pipeline rank holding a copy of a parameter another rank updates
    // (a tied embedding) neither reduces nor updates it.
    if (!stateParts.empty() && !stateParts.count(name.getValue())) {
      copies += local;
      continue;
    }
    // Psi: the rank's parameter bytes before ZeRO (its tp shards); the
    // whole parameters: a local shard times its parts.
    int64_t shard = local * parts(i, true);
    report.parameterBytesPerRank += shard;
    report.parameterBytes += shard * parts(i, false);
    // ZeRO shards a gradient over dp from stage 2, where it can shard the
    // parameter's state (stage 3: the parameter) at all.
    int64_t gradientParts = parts(i, true);
    if (report.zero >= 2 && gradientParts == 1)
      gradientParts = stateParts.lookup(name.getValue());
    report.gradientBytes += shard / std::max<int64_t>(1, report.zero >= 2 ? gradientParts : 1);
  }
  // DESIGN.md §6 with this program's bytes per parameter byte: parameters
  // and gradients (each as large as the parameters) and optimizer state.
  double psi = report.parameterBytesPerRank;
  double k = psi > 0 ? stateBytesWhole / psi : 0;
  double z = report.zero, d = dp;
  report.modelStateFormula =
      psi * ((z >= 3 ? 1 / d : 1) + (z >= 2 ? 1 / d : 1) + k * (z >= 1 ? 1 / d : 1)) + copies;
  if (auto plan = step->getAttrOfType<DictionaryAttr>(PpcDialect::kPlanAttrName))
    for (NamedAttribute entry : plan) {
      if (auto f = llvm::dyn_cast<FloatAttr>(entry.getValue()))
        report.plan[entry.getName().str()] = f.getValueAsDouble();
      if (auto i = llvm::dyn_cast<IntegerAttr>(entry.getValue()))
        report.plan[entry.getName().str()] = static_cast<double>(i.getInt());
      if (auto text = llvm::dyn_cast<StringAttr>(entry.getValue());
          text && entry.getName() == "recompute")
        report.planRecompute = text.getValue().str();
    }
  return report;
}

llvm::json::Object programToJson(const CommunicationReport &report, MeshOp mesh) {
  llvm::json::Array collectives;
  for (const CollectiveRecord &c : report.collectives)
    collectives.push_back(llvm::json::Object{{"op", c.kind},
                                             {"axes", llvm::json::Array(c.axes)},
                                             {"elements", c.elements},
                                             {"group_size", c.groupSize},
                                             {"bytes_per_rank", c.bytesPerRank},
                                             {"node", c.node},
                                             {"value", c.value}});
  llvm::json::Object byAxis;
  for (const auto &[axes, bytes] : report.bytesByAxis)
    byAxis[axes] = bytes;
  llvm::json::Object parameters;
  for (const auto &[name, layout] : report.parameters)
    parameters[name] = layout;
  int64_t dp = mesh.getAxisSize("dp").value_or(1);
  double psi = report.parameterBytesPerRank, share = dp > 1 ? (dp - 1.0) / dp : 0.0;
  double m = report.microBatches;
  double plain = 2 * psi * share;
  double formula = report.zero == 3   ? 3 * m * psi * share
                   : report.zero == 2 ? (m + 1) * psi * share
                                      : plain;
  llvm::json::Object plan;
  for (const auto &[key, value] : report.plan)
    plan[key] = value;
  if (!report.planRecompute.empty())
    plan["recompute"] = report.planRecompute;
  double measured = report.bytesByAxis.count("dp") ? report.bytesByAxis.at("dp") : 0.0;
  double states = report.parameterStateBytes + report.gradientBytes + report.optimizerStateBytes;
  llvm::json::Object object{
      {"per_rank_per_step", llvm::json::Object{{"collectives", std::move(collectives)},
                                               {"bytes_by_axes", std::move(byAxis)}}},
      {"plan", std::move(plan)},
      {"data_parallel",
       llvm::json::Object{{"zero", report.zero},
                          {"micro_batches", report.microBatches},
                          {"parameter_bytes", report.parameterBytes},
                          {"parameter_bytes_per_rank", report.parameterBytesPerRank},
                          {"plain_formula_bytes", plain},
                          {"formula_bytes", formula},
                          {"measured_bytes", measured},
                          {"ratio", formula > 0 ? measured / formula : 0.0},
                          {"ratio_to_plain", plain > 0 ? measured / plain : 0.0}}},
      {"model_states",
       llvm::json::Object{
           {"parameters", report.parameterStateBytes},
           {"gradients", report.gradientBytes},
           {"optimizer_state", report.optimizerStateBytes},
           {"total", states},
           {"formula", report.modelStateFormula},
           {"ratio", report.modelStateFormula > 0 ? states / report.modelStateFormula : 0.0}}},
      {"parameters", std::move(parameters)}};
  if (report.pipelineRank >= 0) {
    object["pipeline_rank"] = report.pipelineRank;
    object["stages"] = llvm::json::Array(report.stages);
  }
  return object;
}

llvm::json::Value reportToJson(llvm::ArrayRef<CommunicationReport> programs,
                               llvm::ArrayRef<llvm::json::Object> extra, MeshOp mesh, int64_t steps,
                               llvm::StringRef schedule) {
  llvm::json::Object mesh_;
  for (StringRef axis : mesh.getAxisNames())
    mesh_[axis] = *mesh.getAxisSize(axis);
  llvm::json::Object json{{"mesh", std::move(mesh_)},
                          {"ranks", mesh.getNumRanks()},
                          {"steps", steps},
                          {"note", "every rank of a program runs these collectives "
                                   "once per step"}};
  auto program = [&](size_t i) {
    llvm::json::Object object = programToJson(programs[i], mesh);
    if (i < extra.size())
      for (const auto &entry : extra[i])
        object[entry.first] = entry.second;
    return object;
  };
  if (programs.size() == 1) {
    for (auto &entry : program(0))
      json[entry.first] = entry.second;
    return json;
  }
  json["schedule"] = schedule.str();
  llvm::json::Array ranks;
  for (size_t i = 0; i < programs.size(); ++i)
    ranks.push_back(program(i));
  json["pipeline_ranks"] = std::move(ranks);
  return json;
}

std::vector<TransferExplanation> explainTransfers(func::FuncOp program, MeshOp mesh,
                                                  const DeviceModel &device) {
  AxisSizes sizes;
  for (auto [name, size] : llvm::zip(mesh.getAxisNames(), mesh.getShape()))
    sizes[name] = size;
  // The ops in program order, and the compute seconds before each.
  llvm::SmallVector<Operation *> ops;
  program.walk([&](Operation *op) {
    if (op != program.getOperation() && !llvm::isa<func::ReturnOp>(op))
      ops.push_back(op);
  });
  llvm::DenseMap<Operation *, size_t> place;
  std::vector<double> computeBefore(ops.size() + 1, 0);
  for (auto [i, op] : llvm::enumerate(ops)) {
    place[op] = i;
    bool transfer = op->hasTrait<CommunicatesTrait>() || llvm::isa<SendOp, RecvOp>(op);
    computeBefore[i + 1] = computeBefore[i] + (transfer ? 0 : localOpSeconds(op, device, sizes));
  }
  std::vector<TransferExplanation> out;
  for (auto [i, op] : llvm::enumerate(ops)) {
    std::optional<CollectiveRecord> record = recordOf(op, mesh);
    auto recv = llvm::dyn_cast<RecvOp>(op);
    if (!record && !recv)
      continue;
    TransferExplanation t;
    t.index = i;
    if (record) {
      t.record = std::move(*record);
    } else {
      t.record.kind = "recv";
      t.record.axes = {recv.getAxis().str()};
      t.record.groupSize = 2;
      t.record.node = nodeName(op->getLoc());
      if (auto value = op->getAttrOfType<StringAttr>(PpcDialect::kValueAttrName))
        t.record.value = value.getValue().str();
      t.record.elements = llvm::cast<ShapedType>(recv.getType()).getNumElements();
      t.record.bytesPerRank = bytesOf(recv.getType());
    }
    if (auto why = op->getAttrOfType<StringAttr>(kWhyAttrName))
      t.why = why.getValue().str();
    else if (auto send = llvm::dyn_cast<SendOp>(op))
      t.why =
          llvm::formatv("pipeline stage boundary: sent to pipeline rank {0}", send.getPeer()).str();
    else if (recv)
      t.why =
          llvm::formatv("pipeline stage boundary: received from pipeline rank {0}", recv.getPeer())
              .str();
    t.seconds = localOpSeconds(op, device, sizes);
    // The first op that reads a result (through the function's return: the
    // end of the program); a send's reader is another rank.
    size_t firstUse = ops.size();
    Operation *reader = nullptr;
    for (Value result : op->getResults())
      for (Operation *user : result.getUsers()) {
        auto it = place.find(user);
        if (it != place.end() && it->second < firstUse) {
          firstUse = it->second;
          reader = user;
        }
      }
    Operation *context = reader;
    if (llvm::isa<SendOp>(op) && op->getNumOperands())
      context = op->getOperand(0).getDefiningOp();
    if (context) {
      if (auto mb = intAttrOf(context, kMicroBatchAttrName)) {
        t.microBatch = *mb;
        t.phase = context->hasAttr(kBackwardOfAttrName) ? "backward" : "forward";
      } else {
        t.phase = "step";
      }
    } else {
      t.phase = "step";
    }
    t.computeSecondsBefore = computeBefore[firstUse] - computeBefore[i + 1];
    t.opsBefore = int64_t(firstUse) - int64_t(i) - 1;
    out.push_back(std::move(t));
  }
  return out;
}

} // namespace ppc
