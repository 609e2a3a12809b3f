//===- CommunicationReport.cpp - what a partitioned step communicates -----===//

#include "passes/sharding/CommunicationReport.h"
#include "ir/PpcAttrs.h"

#include "llvm/ADT/StringExtras.h"

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

static int64_t bytesOf(Type type) {
  auto shaped = llvm::cast<ShapedType>(type);
  unsigned bits = shaped.getElementType().getIntOrFloatBitWidth();
  return shaped.getNumElements() * std::max(1u, bits / 8);
}

CommunicationReport analyzeCommunication(func::FuncOp step, MeshOp mesh) {
  CommunicationReport report;
  step.walk([&](Operation *op) {
    if (!op->hasTrait<CollectiveTrait>() || llvm::isa<AxisIndexOp, AllSliceOp>(op))
      return;
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
    if (auto value = op->getAttrOfType<StringAttr>("ppc.value"))
      record.value = value.getValue().str();
    double n = record.groupSize;
    // S: the full tensor: the result of a gather, the operand of a scatter
    // or reduction, either for all-to-all.
    Type full = llvm::isa<AllGatherOp>(op) ? op->getResult(0).getType()
                                           : op->getOperand(0).getType();
    record.elements = llvm::cast<ShapedType>(full).getNumElements();
    double factor = llvm::isa<AllReduceOp>(op) ? 2 * (n - 1) / n : (n - 1) / n;
    record.bytesPerRank = factor * bytesOf(full);
    report.bytesByAxis[llvm::join(record.axes, ",")] += record.bytesPerRank;
    report.collectives.push_back(std::move(record));
  });
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
    // Psi counts whole parameters: a local shard times its blocks.
    int64_t bytes = bytesOf(step.getArgument(i).getType());
    report.parameterBytesPerRank += bytes;
    if (sharding)
      for (auto axesOfDim : sharding.getDimAxes()) {
        llvm::SmallVector<StringRef> dimAxes;
        for (StringAttr a : axesOfDim)
          dimAxes.push_back(a.getValue());
        bytes *= *mesh.getGroupSize(dimAxes);
      }
    report.parameterBytes += bytes;
  }
  if (auto plan = step->getAttrOfType<DictionaryAttr>("ppc.plan"))
    for (NamedAttribute entry : plan) {
      if (auto f = llvm::dyn_cast<FloatAttr>(entry.getValue()))
        report.plan[entry.getName().str()] = f.getValueAsDouble();
      if (auto i = llvm::dyn_cast<IntegerAttr>(entry.getValue()))
        report.plan[entry.getName().str()] = static_cast<double>(i.getInt());
    }
  return report;
}

llvm::json::Value reportToJson(const CommunicationReport &report, MeshOp mesh,
                               int64_t steps) {
  llvm::json::Array collectives;
  for (const CollectiveRecord &c : report.collectives)
    collectives.push_back(llvm::json::Object{
        {"op", c.kind},
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
  double formula = dp > 1 ? 2.0 * report.parameterBytesPerRank * (dp - 1) / dp : 0.0;
  llvm::json::Object plan;
  for (const auto &[key, value] : report.plan)
    plan[key] = value;
  double measured = report.bytesByAxis.count("dp") ? report.bytesByAxis.at("dp") : 0.0;
  llvm::json::Object mesh_;
  for (StringRef axis : mesh.getAxisNames())
    mesh_[axis] = *mesh.getAxisSize(axis);
  return llvm::json::Object{
      {"mesh", std::move(mesh_)},
      {"ranks", mesh.getNumRanks()},
      {"steps", steps},
      {"note", "SPMD: every rank runs these collectives once per step"},
      {"per_rank_per_step", llvm::json::Object{{"collectives", std::move(collectives)},
                                               {"bytes_by_axes", std::move(byAxis)}}},
      {"plan", std::move(plan)},
      {"data_parallel", llvm::json::Object{{"parameter_bytes", report.parameterBytes},
                                           {"parameter_bytes_per_rank",
                                            report.parameterBytesPerRank},
                                           {"formula_bytes", formula},
                                           {"measured_bytes", measured},
                                           {"ratio", formula > 0 ? measured / formula : 0.0}}},
      {"parameters", std::move(parameters)}};
}

} // namespace ppc
