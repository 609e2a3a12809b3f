//===- Spmd.cpp - runs per-rank programs on a simulated mesh -------------===//

#include "executor/Spmd.h"
#include "executor/Collectives.h"
#include "executor/Interpreter.h"
#include "runtime/Printable.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <deque>
#include <map>
#include <vector>

using namespace mlir;

namespace ppc {

namespace {

std::string str(llvm::ArrayRef<int64_t> shape) {
  return "[" +
         llvm::join(llvm::map_range(shape, [](int64_t d) { return std::to_string(d); }), ",") + "]";
}

/// `'name' ` for a named message, "" otherwise.
std::string quotedName(StringRef name) {
  return name.empty() ? std::string() : "'" + printable(name) + "' ";
}

/// Whether group members at `a` and `b` are at the same collective: the
/// same op, or ops with the same name, inherent attributes and types (group
/// members that run different functions).
bool sameCollective(Operation *a, Operation *b) {
  return a == b || (a->getName() == b->getName() &&
                    a->getPropertiesAsAttribute() == b->getPropertiesAsAttribute() &&
                    a->getOperandTypes() == b->getOperandTypes() &&
                    a->getResultTypes() == b->getResultTypes());
}

/// A tensor sent and not yet received, with the send that sent it.
struct Message {
  Tensor tensor;
  SendOp send;
};

/// Where one rank is in its program.
struct RankState {
  func::FuncOp program;
  ExecutionFrame frame;
  /// The next op to run (or the op the rank waits at).
  Block::iterator next, end;
  /// The recv or collective the rank waits at, or null while it can run.
  Operation *waitingAt = nullptr;
  /// While it waits at a collective: the ranks of its group in group order.
  llvm::SmallVector<int64_t> group;
  bool returned = false;
  llvm::SmallVector<Tensor> results;
};

/// One run of a mesh: the ranks' states and the messages in flight. Ranks
/// take turns (`advance`), each running until it waits or returns.
class MeshRun {
public:
  MeshRun(MeshOp mesh, const ExecOptions &options, int64_t &currentRank)
      : mesh(mesh), options(options), currentRank(currentRank) {}

  LogicalResult start(llvm::ArrayRef<func::FuncOp> programOfRank,
                      llvm::ArrayRef<llvm::SmallVector<Tensor>> argsPerRank);
  /// Runs every rank to its return.
  LogicalResult run();

  std::vector<RankState> ranks;

private:
  /// Runs `rank` until it waits or returns; sets `progressed` when it ran
  /// an op or reached a collective.
  LogicalResult advance(int64_t rank, bool &progressed);
  /// Runs the collective `op` that `rank` reached: at once for a local one,
  /// else when the last member of its group reaches it. Returns whether it
  /// ran (otherwise `rank` waits).
  FailureOr<bool> collective(int64_t rank, Operation &op, const CollectiveKernel &kernel);
  /// Runs the collective that every rank of `group` waits at.
  LogicalResult meet(llvm::ArrayRef<int64_t> group, const CollectiveKernel &kernel);
  LogicalResult send(int64_t rank, SendOp op);
  /// Takes the next message from the peer; returns false (the rank waits)
  /// when there is none.
  FailureOr<bool> receive(int64_t rank, RecvOp op);
  /// The peer of a send or recv run by `rank`, checked against the mesh.
  template <typename OpT> FailureOr<int64_t> peerOf(int64_t rank, OpT op);
  LogicalResult checkMesh(Operation *op, StringRef meshName);
  LogicalResult reportDeadlock();
  LogicalResult checkMailboxesEmpty();

  MeshOp mesh;
  const ExecOptions &options;
  /// The rank whose op runs now, named by errors; -1 for none.
  int64_t &currentRank;
  /// Messages in flight, by (sender, receiver), oldest first.
  std::map<std::pair<int64_t, int64_t>, std::deque<Message>> mailboxes;
};

LogicalResult MeshRun::start(llvm::ArrayRef<func::FuncOp> programOfRank,
                             llvm::ArrayRef<llvm::SmallVector<Tensor>> argsPerRank) {
  ranks.reserve(programOfRank.size());
  for (auto [rank, program] : llvm::enumerate(programOfRank)) {
    currentRank = rank;
    func::FuncOp func = program;
    auto frame = ExecutionFrame::create(func, argsPerRank[rank]);
    if (failed(frame))
      return failure();
    Block &body = func.getBody().front();
    ranks.push_back({func, std::move(*frame), body.begin(), body.end()});
  }
  currentRank = -1;
  return success();
}

LogicalResult MeshRun::run() {
  int64_t running = ranks.size();
  while (running > 0) {
    bool progressed = false;
    for (int64_t rank = 0, e = ranks.size(); rank < e; ++rank) {
      if (ranks[rank].returned)
        continue;
      if (failed(advance(rank, progressed)))
        return failure();
      if (ranks[rank].returned)
        --running;
    }
    currentRank = -1;
    if (running > 0 && !progressed)
      return reportDeadlock();
  }
  return checkMailboxesEmpty();
}

LogicalResult MeshRun::advance(int64_t rank, bool &progressed) {
  RankState &state = ranks[rank];
  // A collective's last member to arrive moves every member on.
  if (state.waitingAt && !state.group.empty())
    return success();
  currentRank = rank;
  // Each case moves `state.next` on once its op has run.
  while (state.next != state.end) {
    Operation &op = *state.next;
    if (llvm::isa<func::ReturnOp>(op)) {
      auto results = state.frame.takeOperands(op);
      if (failed(results))
        return failure();
      state.results = std::move(*results);
      state.returned = progressed = true;
      return success();
    }
    if (const CollectiveKernel *kernel = lookupCollectiveKernel(&op)) {
      progressed = true;
      FailureOr<bool> ran = collective(rank, op, *kernel);
      if (failed(ran))
        return failure();
      if (!*ran)
        return success();
      continue;
    }
    if (auto sendOp = llvm::dyn_cast<SendOp>(op)) {
      if (failed(send(rank, sendOp)))
        return failure();
    } else if (auto recvOp = llvm::dyn_cast<RecvOp>(op)) {
      FailureOr<bool> received = receive(rank, recvOp);
      if (failed(received))
        return failure();
      if (!*received)
        return success();
    } else if (failed(state.frame.runOp(op, options))) {
      return failure();
    }
    progressed = true;
    ++state.next;
  }
  return state.program.emitError() << "function has no return";
}

LogicalResult MeshRun::checkMesh(Operation *op, StringRef meshName) {
  if (meshName != mesh.getSymName())
    return op->emitError() << "runs on mesh @" << meshName << ", but the program runs on mesh @"
                           << mesh.getSymName();
  return success();
}

FailureOr<bool> MeshRun::collective(int64_t rank, Operation &op, const CollectiveKernel &kernel) {
  RankState &state = ranks[rank];
  if (failed(checkMesh(&op, collectiveMesh(&op).getValue())) || failed(checkHostSizes(&op)))
    return failure();
  ArrayAttr axes = collectiveAxes(&op);
  llvm::SmallVector<StringRef> names = axisNames(axes);
  auto badAxes = [&] {
    return op.emitError() << "axes " << axes << " are not distinct axes of mesh @"
                          << mesh.getSymName();
  };

  if (kernel.local) {
    FailureOr<int64_t> position = mesh.getIndexInGroup(rank, names);
    FailureOr<int64_t> size = mesh.getGroupSize(names);
    if (failed(position) || failed(size))
      return badAxes();
    auto operands = state.frame.takeOperands(op);
    if (failed(operands))
      return failure();
    llvm::SmallVector<Tensor> results;
    if (failed(kernel.local(&op, *position, *size, *operands, results, options)) ||
        failed(checkResults(&op, results, options)))
      return failure();
    state.frame.setResults(op, results);
    ++state.next;
    return true;
  }

  auto group = mesh.getGroup(rank, names);
  if (failed(group))
    return badAxes();
  state.waitingAt = &op;
  state.group = std::move(*group);
  // Each member's next collective on this group must be this one.
  bool everyoneIsHere = true;
  for (int64_t member : state.group) {
    RankState &other = ranks[member];
    if (!other.waitingAt || other.group != state.group) {
      everyoneIsHere = false;
      continue;
    }
    if (sameCollective(other.waitingAt, &op))
      continue;
    currentRank = -1;
    InFlightDiagnostic diag = op.emitError();
    diag << "group over " << axes << " (ranks "
         << llvm::join(llvm::map_range(state.group, [](int64_t r) { return std::to_string(r); }),
                       ", ")
         << ") meets at different collectives: rank " << member << " waits at '"
         << other.waitingAt->getName() << "' " << other.waitingAt->getLoc() << ", rank " << rank
         << " reaches '" << op.getName() << "' " << op.getLoc();
    diag.attachNote(other.waitingAt->getLoc()) << "rank " << member << " waits here";
    return diag;
  }
  if (!everyoneIsHere)
    return false;
  // `meet` clears the members' groups, this rank's included.
  llvm::SmallVector<int64_t> members = state.group;
  if (failed(meet(members, kernel)))
    return failure();
  currentRank = rank;
  return true;
}

LogicalResult MeshRun::meet(llvm::ArrayRef<int64_t> group, const CollectiveKernel &kernel) {
  llvm::SmallVector<llvm::SmallVector<Tensor>> operands;
  operands.reserve(group.size());
  for (int64_t member : group) {
    currentRank = member;
    RankState &state = ranks[member];
    auto values = state.frame.takeOperands(*state.waitingAt);
    if (failed(values))
      return failure();
    operands.push_back(std::move(*values));
  }
  // The group's errors name its ranks themselves.
  currentRank = -1;
  Operation *op = ranks[group.front()].waitingAt;
  llvm::SmallVector<llvm::SmallVector<Tensor>> results;
  if (failed(kernel.group(op, group, operands, results, options)))
    return failure();
  for (auto [member, memberResults] : llvm::zip_equal(group, results)) {
    currentRank = member;
    RankState &state = ranks[member];
    if (failed(checkResults(state.waitingAt, memberResults, options)))
      return failure();
    state.frame.setResults(*state.waitingAt, memberResults);
    state.waitingAt = nullptr;
    state.group.clear();
    ++state.next;
  }
  return success();
}

template <typename OpT> FailureOr<int64_t> MeshRun::peerOf(int64_t rank, OpT op) {
  if (failed(checkMesh(op, op.getMesh())))
    return failure();
  std::optional<int64_t> peer = op.getPeerRank(mesh, rank);
  if (!peer)
    return op.emitError() << "peer " << static_cast<int64_t>(op.getPeer()) << " on axis '"
                          << op.getAxis() << "' is not a rank of mesh @" << mesh.getSymName();
  return *peer;
}

LogicalResult MeshRun::send(int64_t rank, SendOp op) {
  FailureOr<int64_t> peer = peerOf(rank, op);
  if (failed(peer))
    return failure();
  auto operands = ranks[rank].frame.takeOperands(*op.getOperation());
  if (failed(operands))
    return failure();
  mailboxes[{rank, *peer}].push_back({std::move(operands->front()), op});
  return success();
}

FailureOr<bool> MeshRun::receive(int64_t rank, RecvOp op) {
  RankState &state = ranks[rank];
  FailureOr<int64_t> peer = peerOf(rank, op);
  if (failed(peer))
    return failure();
  auto mailbox = mailboxes.find({*peer, rank});
  if (mailbox == mailboxes.end() || mailbox->second.empty()) {
    state.waitingAt = op;
    return false;
  }
  state.waitingAt = nullptr;
  Message message = std::move(mailbox->second.front());
  mailbox->second.pop_front();

  auto type = llvm::cast<ShapedType>(op.getResult().getType());
  DType dtype = resultDType(op, 0, options);
  const Tensor &tensor = message.tensor;
  if (tensor.dtype() != dtype || tensor.shape() != type.getShape()) {
    InFlightDiagnostic diag = op.emitError();
    diag << "message " << quotedName(message.send.getValueName()) << "from rank " << *peer << " is "
         << dtypeName(tensor.dtype()) << " " << str(tensor.shape()) << ", expected "
         << dtypeName(dtype) << " " << str(type.getShape());
    if (!op.getValueName().empty())
      diag << " for '" << printable(op.getValueName()) << "'";
    diag.attachNote(message.send.getLoc()) << "sent here by rank " << *peer;
    return diag;
  }
  // Keeps the frame's byte accounting: every op takes its operands first.
  if (failed(state.frame.takeOperands(*op.getOperation())))
    return failure();
  state.frame.setResults(*op.getOperation(), message.tensor);
  return true;
}

LogicalResult MeshRun::reportDeadlock() {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "deadlock: ";
  llvm::ListSeparator waiting;
  Operation *first = nullptr;
  llvm::SmallVector<int64_t> returned;
  for (auto [rank, state] : llvm::enumerate(ranks)) {
    if (state.returned) {
      returned.push_back(rank);
      continue;
    }
    first = first ? first : state.waitingAt;
    os << waiting << "rank " << rank << " waits at " << state.waitingAt->getName() << " "
       << state.waitingAt->getLoc();
  }
  if (!returned.empty())
    os << "; returned: rank" << (returned.size() > 1 ? "s " : " ")
       << llvm::join(llvm::map_range(returned, [](int64_t r) { return std::to_string(r); }), ", ");
  return first->emitError(os.str());
}

LogicalResult MeshRun::checkMailboxesEmpty() {
  bool empty = true;
  for (auto &[ends, messages] : mailboxes) {
    if (messages.empty())
      continue;
    empty = false;
    auto [sender, receiver] = ends;
    InFlightDiagnostic diag = messages.front().send.emitError();
    diag << "rank " << sender << " sent " << messages.size() << " message"
         << (messages.size() > 1 ? "s" : "") << " to rank " << receiver << " that "
         << (messages.size() > 1 ? "were" : "was") << " never received";
    if (StringRef name = messages.front().send.getValueName(); !name.empty())
      diag << " (first: '" << printable(name) << "')";
  }
  return success(empty);
}

} // namespace

FailureOr<llvm::SmallVector<llvm::SmallVector<Tensor>>>
runMesh(llvm::ArrayRef<func::FuncOp> programOfRank, MeshOp mesh,
        llvm::ArrayRef<llvm::SmallVector<Tensor>> argsPerRank, const ExecOptions &options,
        llvm::SmallVectorImpl<int64_t> *peakBytesPerRank,
        llvm::SmallVectorImpl<int64_t> *hostPeakBytesPerRank) {
  int64_t numRanks = mesh.getNumRanks();
  if (static_cast<int64_t>(programOfRank.size()) != numRanks)
    return mesh.emitError() << "mesh @" << mesh.getSymName() << " has " << numRanks
                            << " ranks, but programs were given for " << programOfRank.size();
  if (static_cast<int64_t>(argsPerRank.size()) != numRanks)
    return func::FuncOp(programOfRank.front()).emitError()
           << "mesh @" << mesh.getSymName() << " has " << numRanks
           << " ranks, but arguments were given for " << argsPerRank.size();

  // While a rank runs an op on its own, its errors name it.
  int64_t currentRank = -1;
  ScopedDiagnosticHandler nameRank(mesh.getContext(), [&](Diagnostic &diag) {
    if (currentRank >= 0 && diag.getSeverity() == DiagnosticSeverity::Error)
      diag << " (rank " << currentRank << ")";
    return failure(); // not handled: pass it on
  });

  MeshRun run(mesh, options, currentRank);
  if (failed(run.start(programOfRank, argsPerRank)) || failed(run.run()))
    return failure();
  llvm::SmallVector<llvm::SmallVector<Tensor>> results;
  if (peakBytesPerRank)
    peakBytesPerRank->clear();
  if (hostPeakBytesPerRank)
    hostPeakBytesPerRank->clear();
  for (RankState &state : run.ranks) {
    results.push_back(std::move(state.results));
    if (peakBytesPerRank)
      peakBytesPerRank->push_back(state.frame.peakBytes());
    if (hostPeakBytesPerRank)
      hostPeakBytesPerRank->push_back(state.frame.hostPeakBytes());
  }
  return results;
}

FailureOr<llvm::SmallVector<llvm::SmallVector<Tensor>>>
runSpmd(func::FuncOp func, MeshOp mesh, llvm::ArrayRef<llvm::SmallVector<Tensor>> argsPerRank,
        const ExecOptions &options, llvm::SmallVectorImpl<int64_t> *peakBytesPerRank) {
  llvm::SmallVector<func::FuncOp> programs(mesh.getNumRanks(), func);
  return runMesh(programs, mesh, argsPerRank, options, peakBytesPerRank);
}

//===----------------------------------------------------------------------===//
// Sharding and unsharding tensors
//===----------------------------------------------------------------------===//

namespace {

std::string str(Attribute attr) {
  std::string s;
  llvm::raw_string_ostream os(s);
  attr.print(os);
  return s;
}

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::SmallVector<StringRef> names(llvm::ArrayRef<StringAttr> axes) {
  return llvm::to_vector(llvm::map_range(axes, [](StringAttr a) { return a.getValue(); }));
}

/// Where `rank`'s part of each dimension lies: the index, among the parts,
/// of the part it holds, and the dimension's blocks (each block is split in
/// as many parts as the dimension; a rank holds its part of every block).
struct DimPart {
  int64_t part, blocks;
};

llvm::SmallVector<DimPart> partsOf(ShardingAttr sharding, MeshOp mesh, int64_t rank) {
  llvm::SmallVector<DimPart> parts;
  for (auto [d, axes] : llvm::enumerate(sharding.getDimAxes()))
    parts.push_back({*mesh.getIndexInGroup(rank, names(axes)), sharding.getBlocks(d)});
  return parts;
}

/// Calls `fn(localFlat, globalFlat)` for every element a rank holds, given
/// its parts of a tensor of `globalShape`.
void forEachLocalElement(llvm::ArrayRef<int64_t> localShape, llvm::ArrayRef<int64_t> globalShape,
                         llvm::ArrayRef<DimPart> parts,
                         llvm::function_ref<void(int64_t, int64_t)> fn) {
  Shape localStrides = stridesOf(localShape), globalStrides = stridesOf(globalShape);
  int64_t count = 1;
  for (int64_t d : localShape)
    count *= d;
  for (int64_t local = 0; local < count; ++local) {
    int64_t global = 0;
    for (size_t d = 0; d < localShape.size(); ++d) {
      int64_t i = (local / localStrides[d]) % localShape[d];
      int64_t partSize = localShape[d] / parts[d].blocks;
      int64_t block = i / partSize, offset = i % partSize;
      global += (block * (globalShape[d] / parts[d].blocks) + parts[d].part * partSize + offset) *
                globalStrides[d];
    }
    fn(local, global);
  }
}

void copyElement(const Tensor &src, int64_t from, Tensor &dst, int64_t to) {
  if (src.isFloat())
    dst.floats()[to] = src.floats()[from];
  else
    dst.ints()[to] = src.ints()[from];
}

void addElement(const Tensor &src, int64_t from, Tensor &dst, int64_t to) {
  if (src.isFloat())
    dst.floats()[to] += src.floats()[from];
  else
    dst.ints()[to] = static_cast<int64_t>(static_cast<uint64_t>(dst.ints()[to]) +
                                          static_cast<uint64_t>(src.ints()[from]));
}

} // namespace

llvm::Expected<Tensor> shardTensor(const Tensor &global, ShardingAttr sharding, MeshOp mesh,
                                   int64_t rank) {
  auto localShape = sharding.getLocalShape(mesh, global.shape());
  if (failed(localShape))
    return error("sharding " + str(sharding) + " does not fit a tensor of shape " +
                 str(global.shape()) + " on mesh @" + mesh.getSymName());
  if (rank < 0 || rank >= mesh.getNumRanks())
    return error(llvm::formatv("rank {0} is not on mesh @{1}", rank, mesh.getSymName()));
  Tensor local(global.dtype(), *localShape);
  if (*mesh.getIndexInGroup(rank, names(sharding.getPartialAxes())) != 0)
    return local;
  forEachLocalElement(*localShape, global.shape(), partsOf(sharding, mesh, rank),
                      [&](int64_t l, int64_t g) { copyElement(global, g, local, l); });
  return local;
}

llvm::Expected<Tensor> unshardTensor(llvm::ArrayRef<Tensor> perRank, ShardingAttr sharding,
                                     MeshOp mesh) {
  if (static_cast<int64_t>(perRank.size()) != mesh.getNumRanks())
    return error(llvm::formatv("mesh @{0} has {1} ranks, but {2} tensors were given",
                               mesh.getSymName(), mesh.getNumRanks(), perRank.size()));
  const Tensor &first = perRank.front();
  Shape globalShape(first.shape());
  if (globalShape.size() != sharding.getRank())
    return error("sharding " + str(sharding) + " does not fit a tensor of shape " +
                 str(first.shape()));
  for (auto [d, size, axes] : llvm::enumerate(globalShape, sharding.getDimAxes())) {
    if (size % sharding.getBlocks(d) != 0)
      return error("sharding " + str(sharding) + " does not fit a local tensor of shape " +
                   str(first.shape()));
    auto parts = mesh.getGroupSize(names(axes));
    if (failed(parts))
      return error("sharding " + str(sharding) + " uses axes that mesh @" + mesh.getSymName() +
                   " does not have");
    size *= *parts;
  }
  for (auto [rank, t] : llvm::enumerate(perRank))
    if (t.shape() != first.shape() || t.dtype() != first.dtype())
      return error(llvm::formatv("rank {0} holds {1} {2}, but rank 0 holds {3} {4}", rank,
                                 dtypeName(t.dtype()), str(t.shape()), dtypeName(first.dtype()),
                                 str(first.shape())));

  // Ranks off coordinate 0 of a replicated axis hold copies; skip them.
  llvm::SmallVector<unsigned> replicated;
  for (auto [index, axis] : llvm::enumerate(mesh.getAxisNames()))
    if (!sharding.getDimOfAxis(axis) && !sharding.isPartialOver(axis))
      replicated.push_back(index);
  bool partial = !sharding.getPartialAxes().empty();
  Tensor global(first.dtype(), globalShape);
  for (auto [rank, local] : llvm::enumerate(perRank)) {
    llvm::SmallVector<int64_t> coordinates = mesh.getCoordinates(rank);
    if (llvm::any_of(replicated, [&](unsigned axis) { return coordinates[axis] != 0; }))
      continue;
    forEachLocalElement(local.shape(), globalShape, partsOf(sharding, mesh, rank),
                        [&](int64_t l, int64_t g) {
                          if (partial)
                            addElement(local, l, global, g);
                          else
                            copyElement(local, l, global, g);
                        });
  }
  if (partial)
    global.roundToDType();
  return global;
}

} // namespace ppc
