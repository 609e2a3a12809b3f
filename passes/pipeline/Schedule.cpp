//===- Schedule.cpp - pipeline schedules and their checker ----------------===//

#include "passes/pipeline/Schedule.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <map>

using namespace ppc::pipeline;
using llvm::Twine;

std::optional<ScheduleKind> ppc::pipeline::parseScheduleKind(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<ScheduleKind>>(name)
      .Case("gpipe", ScheduleKind::GPipe)
      .Case("1f1b", ScheduleKind::OneFOneB)
      .Case("interleaved", ScheduleKind::Interleaved)
      .Default(std::nullopt);
}

llvm::StringRef ppc::pipeline::scheduleName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved:
    return "interleaved";
  }
  llvm_unreachable("unknown schedule kind");
}

std::string Action::str() const {
  std::string mbStage = std::to_string(microBatch) + "@s" + std::to_string(stage);
  switch (kind) {
  case Forward:
    return "F" + mbStage;
  case Backward:
    return "B" + mbStage;
  case Send:
  case Recv:
    break;
  }
  return (Twine(kind == Send ? "send " : "recv ") + (gradient ? "grad" : "act") + " mb" +
          Twine(microBatch) + " s" + Twine(stage) + (kind == Send ? " -> r" : " <- r") +
          Twine(peer))
      .str();
}

std::string Schedule::str() const {
  std::string out;
  for (int64_t r = 0; r < ranks; ++r) {
    out += "r" + std::to_string(r) + ":";
    const std::vector<Action> &actions = order[r];
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action &a = actions[i];
      bool continues =
          a.group >= 0 && i > 0 && actions[i - 1].group == a.group && !actions[i - 1].isCompute();
      bool closes = a.group >= 0 && (i + 1 == actions.size() || actions[i + 1].group != a.group);
      out += continues ? ", " : (i == 0 ? " " : "; ");
      out += a.group >= 0 && !continues ? "{" : "";
      out += a.str() + (closes ? "}" : "");
    }
    out += "\n";
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Building schedules
//===----------------------------------------------------------------------===//

namespace {

/// The computations a rank runs between two communication points.
using Step = std::vector<Action>;

Action compute(Action::Kind kind, int64_t microBatch, int64_t stage) {
  Action a{kind};
  a.microBatch = microBatch;
  a.stage = stage;
  return a;
}

Action transfer(Action::Kind kind, int64_t microBatch, int64_t stage, bool gradient, int64_t peer) {
  Action a = compute(kind, microBatch, stage);
  a.gradient = gradient;
  a.peer = peer;
  return a;
}

/// The k-th forward (or backward) computation of `rank` in Megatron-LM's
/// interleaved order: micro-batches go in blocks of p through one model
/// chunk after the other (backwards through the chunks in reverse). With
/// one chunk this is micro-batch k.
Action virtualMicroBatch(const Schedule &s, int64_t rank, int64_t k, bool forward) {
  int64_t p = s.ranks, v = s.virtualStages;
  int64_t inBlock = k % (p * v);
  int64_t chunk = inBlock / p;
  if (!forward)
    chunk = v - 1 - chunk;
  int64_t microBatch = k / (p * v) * p + inBlock % p;
  return compute(forward ? Action::Forward : Action::Backward, microBatch, chunk * p + rank);
}

/// A flush schedule of `rank`: `warmup` forwards, then forwards and
/// backwards alternating, then the remaining backwards. In the steady phase
/// a forward and the backward after it form one step when `pairSteady` (as
/// in Megatron's interleaved schedule), else a step each.
std::vector<Step> flushSteps(const Schedule &s, int64_t rank, int64_t warmup, bool pairSteady) {
  int64_t total = s.microBatches * s.virtualStages;
  warmup = std::min(warmup, total);
  std::vector<Step> steps;
  for (int64_t k = 0; k < warmup; ++k)
    steps.push_back({virtualMicroBatch(s, rank, k, /*forward=*/true)});
  for (int64_t k = 0; k < total - warmup; ++k) {
    Action f = virtualMicroBatch(s, rank, warmup + k, /*forward=*/true);
    Action b = virtualMicroBatch(s, rank, k, /*forward=*/false);
    if (pairSteady) {
      steps.push_back({f, b});
    } else {
      steps.push_back({f});
      steps.push_back({b});
    }
  }
  for (int64_t k = total - warmup; k < total; ++k)
    steps.push_back({virtualMicroBatch(s, rank, k, /*forward=*/false)});
  return steps;
}

/// The computation steps of `rank` for the schedule's kind.
std::vector<Step> computeSteps(const Schedule &s, int64_t rank) {
  int64_t p = s.ranks;
  switch (s.kind) {
  case ScheduleKind::GPipe:
    return flushSteps(s, rank, s.microBatches, /*pairSteady=*/false);
  case ScheduleKind::OneFOneB:
    return flushSteps(s, rank, p - rank - 1, /*pairSteady=*/false);
  case ScheduleKind::Interleaved:
    // Megatron-LM runs every forward first when there are exactly p
    // micro-batches.
    return flushSteps(s, rank,
                      s.microBatches == p ? s.microBatches * s.virtualStages
                                          : (p - rank - 1) * 2 + (s.virtualStages - 1) * p,
                      /*pairSteady=*/true);
  }
  llvm_unreachable("unknown schedule kind");
}

/// The stage that consumes what computation `c` produces (-1: none).
int64_t consumerStage(const Schedule &s, const Action &c) {
  int64_t to = c.kind == Action::Forward ? c.stage + 1 : c.stage - 1;
  return to >= 0 && to < s.stages() ? to : -1;
}

/// The stage that produces what computation `c` needs besides its own
/// forward (-1: none).
int64_t producerStage(const Schedule &s, const Action &c) {
  int64_t from = c.kind == Action::Forward ? c.stage - 1 : c.stage + 1;
  return from >= 0 && from < s.stages() ? from : -1;
}

/// The Recv computation `c` needs first, when its input comes from another
/// rank.
std::optional<Action> remoteInput(const Schedule &s, const Action &c) {
  int64_t from = producerStage(s, c);
  if (from < 0 || s.rankOf(from) == s.rankOf(c.stage))
    return std::nullopt;
  return transfer(Action::Recv, c.microBatch, from, c.kind == Action::Backward, s.rankOf(from));
}

/// The Send of what computation `c` produces, when another rank needs it.
std::optional<Action> remoteOutput(const Schedule &s, const Action &c) {
  int64_t to = consumerStage(s, c);
  if (to < 0 || s.rankOf(to) == s.rankOf(c.stage))
    return std::nullopt;
  return transfer(Action::Send, c.microBatch, c.stage, c.kind == Action::Backward, s.rankOf(to));
}

/// Appends `group` to `order`, posted together when it has more than one
/// action.
void appendGroup(std::vector<Action> &order, std::vector<Action> &group, int64_t &nextGroup) {
  int64_t id = group.size() > 1 ? nextGroup++ : -1;
  for (Action &a : group) {
    a.group = id;
    order.push_back(a);
  }
  group.clear();
}

/// The order of one rank: its steps, with one group between consecutive
/// steps holding the sends of the step before and the receives of the step
/// after.
std::vector<Action> rankOrder(const Schedule &s, llvm::ArrayRef<Step> steps) {
  std::vector<Action> order, group;
  int64_t nextGroup = 0;
  for (const Step &step : steps) {
    for (const Action &c : step)
      if (std::optional<Action> recv = remoteInput(s, c))
        group.push_back(*recv);
    appendGroup(order, group, nextGroup);
    for (const Action &c : step) {
      order.push_back(c);
      if (std::optional<Action> send = remoteOutput(s, c))
        group.push_back(*send);
    }
  }
  appendGroup(order, group, nextGroup);
  return order;
}

} // namespace

llvm::Expected<Schedule> ppc::pipeline::buildSchedule(ScheduleKind kind, int64_t p, int64_t m,
                                                      int64_t v) {
  llvm::StringRef name = scheduleName(kind);
  if (p < 1)
    return llvm::createStringError("pipeline ranks (pp) must be at least 1, got " + Twine(p));
  if (m < 1)
    return llvm::createStringError("--micro-batches must be at least 1, got " + Twine(m));
  if (kind != ScheduleKind::Interleaved && v != 1)
    return llvm::createStringError("--schedule " + name + " runs 1 virtual stage per rank, got " +
                                   Twine(v));
  if (kind == ScheduleKind::Interleaved && v < 2)
    return llvm::createStringError(
        "--schedule interleaved needs at least 2 virtual stages per rank, got " + Twine(v));
  if (kind == ScheduleKind::Interleaved && m % p != 0)
    return llvm::createStringError("--schedule interleaved needs --micro-batches (" + Twine(m) +
                                   ") to be a multiple of the pipeline ranks (pp=" + Twine(p) +
                                   ")");
  Schedule s{kind, p, v, m, {}};
  for (int64_t r = 0; r < p; ++r)
    s.order.push_back(rankOrder(s, computeSteps(s, r)));
  return s;
}

//===----------------------------------------------------------------------===//
// Checking schedules
//===----------------------------------------------------------------------===//

namespace {

/// Where an action sits: rank and index in that rank's order.
struct Position {
  int64_t rank = -1, index = -1;
  bool valid() const { return rank >= 0; }
};

/// Checks one schedule; each check relies on the ones before it.
class Checker {
public:
  explicit Checker(const Schedule &s) : s(s) {}

  llvm::Error run() {
    for (auto check : {&Checker::checkShape, &Checker::checkActions, &Checker::checkComputations,
                       &Checker::checkTransfers, &Checker::checkFifo, &Checker::checkDependencies,
                       &Checker::checkDeadlock})
      if (llvm::Error error = (this->*check)())
        return error;
    return llvm::Error::success();
  }

private:
  const Schedule &s;
  /// The Send and the Recv of every value, by valueIndex().
  std::vector<Position> sendOf, recvOf;
  /// For every communication action, its counterpart on the peer.
  std::vector<std::vector<Position>> partner;

  static llvm::Error fail(int64_t rank, const Twine &message) {
    return llvm::createStringError("rank " + Twine(rank) + ": " + message);
  }
  const Action &at(Position p) const { return s.order[p.rank][p.index]; }
  int64_t values() const { return 2 * s.microBatches * s.stages(); }
  int64_t valueIndex(int64_t microBatch, int64_t stage, bool gradient) const {
    return (gradient * s.microBatches + microBatch) * s.stages() + stage;
  }
  int64_t valueIndex(const Action &a) const {
    return valueIndex(a.microBatch, a.stage, a.gradient);
  }
  /// The stage receiving the value of a Send or Recv (-1: none).
  int64_t consumerOf(const Action &a) const {
    int64_t to = a.gradient ? a.stage - 1 : a.stage + 1;
    return to >= 0 && to < s.stages() ? to : -1;
  }

  llvm::Error checkShape();
  llvm::Error checkActions();
  llvm::Error checkAction(int64_t rank, const Action &a);
  llvm::Error checkComputations();
  llvm::Error checkTransfers();
  llvm::Error checkFifo();
  llvm::Error checkDependencies();
  llvm::Error checkDeadlock();
};

llvm::Error Checker::checkShape() {
  if (s.ranks < 1 || s.virtualStages < 1 || s.microBatches < 1)
    return llvm::createStringError("schedule has " + Twine(s.ranks) + " ranks, " +
                                   Twine(s.virtualStages) + " virtual stages and " +
                                   Twine(s.microBatches) + " micro-batches; each must be >= 1");
  if (static_cast<int64_t>(s.order.size()) != s.ranks)
    return llvm::createStringError("schedule has orders for " + Twine(s.order.size()) +
                                   " ranks, expected " + Twine(s.ranks));
  return llvm::Error::success();
}

llvm::Error Checker::checkActions() {
  for (int64_t r = 0; r < s.ranks; ++r)
    for (const Action &a : s.order[r])
      if (llvm::Error error = checkAction(r, a))
        return error;
  return llvm::Error::success();
}

/// Checks that `a` names an existing micro-batch and stage, runs where its
/// stage lives, and for a transfer that its value crosses to `peer`.
llvm::Error Checker::checkAction(int64_t rank, const Action &a) {
  if (a.microBatch < 0 || a.microBatch >= s.microBatches || a.stage < 0 || a.stage >= s.stages())
    return fail(rank, a.str() + " names a micro-batch or stage outside the schedule");
  if (a.isCompute()) {
    if (s.rankOf(a.stage) != rank)
      return fail(rank, a.str() + " belongs on rank " + Twine(s.rankOf(a.stage)));
    return llvm::Error::success();
  }
  int64_t consumer = consumerOf(a);
  if (consumer < 0)
    return fail(rank, a.str() + " carries a value no stage consumes");
  int64_t producerRank = s.rankOf(a.stage), consumerRank = s.rankOf(consumer);
  int64_t here = a.kind == Action::Send ? producerRank : consumerRank;
  int64_t there = a.kind == Action::Send ? consumerRank : producerRank;
  if (here != rank)
    return fail(rank, a.str() + " belongs on rank " + Twine(here));
  if (there == rank)
    return fail(rank, a.str() + " transfers a value that stays on the rank");
  if (a.peer != there)
    return fail(rank, a.str() + " names the wrong peer, expected r" + Twine(there));
  return llvm::Error::success();
}

llvm::Error Checker::checkComputations() {
  int64_t n = s.microBatches * s.stages();
  std::vector<int> forwards(n), backwards(n);
  for (int64_t r = 0; r < s.ranks; ++r)
    for (const Action &a : s.order[r]) {
      if (!a.isCompute())
        continue;
      int &count = (a.kind == Action::Forward ? forwards : backwards)[valueIndex(a)];
      if (++count > 1)
        return fail(r, a.str() + " runs twice");
    }
  for (int64_t mb = 0; mb < s.microBatches; ++mb)
    for (int64_t st = 0; st < s.stages(); ++st)
      for (Action::Kind kind : {Action::Forward, Action::Backward})
        if (!(kind == Action::Forward ? forwards : backwards)[valueIndex(mb, st, false)])
          return fail(s.rankOf(st), compute(kind, mb, st).str() + " is missing");
  return llvm::Error::success();
}

llvm::Error Checker::checkTransfers() {
  sendOf.assign(values(), {});
  recvOf.assign(values(), {});
  for (int64_t r = 0; r < s.ranks; ++r)
    for (int64_t i = 0, e = s.order[r].size(); i < e; ++i) {
      const Action &a = s.order[r][i];
      if (a.isCompute())
        continue;
      Position &slot = (a.kind == Action::Send ? sendOf : recvOf)[valueIndex(a)];
      if (slot.valid())
        return fail(r, a.str() + " appears twice");
      slot = {r, i};
    }
  for (bool gradient : {false, true})
    for (int64_t mb = 0; mb < s.microBatches; ++mb)
      for (int64_t st = 0; st < s.stages(); ++st) {
        Action send = transfer(Action::Send, mb, st, gradient, -1);
        int64_t consumer = consumerOf(send);
        if (consumer < 0 || s.rankOf(consumer) == s.rankOf(st))
          continue;
        send.peer = s.rankOf(consumer);
        Action recv = transfer(Action::Recv, mb, st, gradient, s.rankOf(st));
        if (!sendOf[valueIndex(send)].valid())
          return fail(s.rankOf(st), "missing " + send.str());
        if (!recvOf[valueIndex(recv)].valid())
          return fail(send.peer, "missing " + recv.str());
      }
  return llvm::Error::success();
}

/// Matches sends and receives per (src, dst) rank pair in FIFO order, as MPI
/// and NCCL do, and records each action's counterpart.
llvm::Error Checker::checkFifo() {
  std::map<std::pair<int64_t, int64_t>, std::vector<Position>> sends, recvs;
  for (int64_t r = 0; r < s.ranks; ++r)
    for (int64_t i = 0, e = s.order[r].size(); i < e; ++i) {
      const Action &a = s.order[r][i];
      if (a.kind == Action::Send)
        sends[{r, a.peer}].push_back({r, i});
      else if (a.kind == Action::Recv)
        recvs[{a.peer, r}].push_back({r, i});
    }
  partner.clear();
  for (const std::vector<Action> &order : s.order)
    partner.emplace_back(order.size());
  for (auto &[channel, channelSends] : sends) {
    const std::vector<Position> &channelRecvs = recvs[channel];
    // checkTransfers() made every value's send and receive unique.
    for (size_t k = 0; k < channelSends.size(); ++k) {
      Position send = channelSends[k], recv = channelRecvs[k];
      if (valueIndex(at(send)) != valueIndex(at(recv)))
        return fail(recv.rank, at(recv).str() + " is out of FIFO order: it matches " +
                                   at(send).str() + " on rank " + Twine(send.rank));
      partner[send.rank][send.index] = recv;
      partner[recv.rank][recv.index] = send;
    }
  }
  return llvm::Error::success();
}

llvm::Error Checker::checkDependencies() {
  for (int64_t r = 0; r < s.ranks; ++r) {
    // Positions in this rank's order of everything that ran here.
    std::vector<int64_t> forwardAt(values(), -1), backwardAt(values(), -1);
    auto ranBefore = [&](int64_t index, const Action &a) {
      int64_t ran = (a.kind == Action::Forward ? forwardAt : backwardAt)[valueIndex(a)];
      return ran >= 0 && ran < index;
    };
    for (int64_t i = 0, e = s.order[r].size(); i < e; ++i) {
      const Action &a = s.order[r][i];
      if (a.isCompute())
        (a.kind == Action::Forward ? forwardAt : backwardAt)[valueIndex(a)] = i;
    }
    for (int64_t i = 0, e = s.order[r].size(); i < e; ++i) {
      const Action &a = s.order[r][i];
      std::vector<Action> needs;
      if (!a.isCompute()) {
        if (a.kind == Action::Send)
          needs.push_back(
              compute(a.gradient ? Action::Backward : Action::Forward, a.microBatch, a.stage));
      } else {
        if (a.kind == Action::Backward)
          needs.push_back(compute(Action::Forward, a.microBatch, a.stage));
        if (int64_t from = producerStage(s, a); from >= 0)
          needs.push_back(s.rankOf(from) == r ? compute(a.kind, a.microBatch, from)
                                              : *remoteInput(s, a));
      }
      for (const Action &need : needs) {
        bool ok = need.isCompute()
                      ? ranBefore(i, need)
                      : recvOf[valueIndex(need)].rank == r && recvOf[valueIndex(need)].index < i;
        if (!ok)
          return fail(r, a.str() + " runs before " + need.str());
      }
    }
  }
  return llvm::Error::success();
}

/// Runs every rank under rendezvous semantics: computations run at once, a
/// group of transfers is posted when the rank reaches it and completes once
/// the counterpart of every transfer in it is posted too.
llvm::Error Checker::checkDeadlock() {
  // For every transfer, the index where its group starts and ends.
  std::vector<std::vector<int64_t>> groupStart, groupEnd;
  for (const std::vector<Action> &order : s.order) {
    int64_t n = order.size();
    groupStart.emplace_back(n, -1);
    groupEnd.emplace_back(n, -1);
    for (int64_t i = 0; i < n;) {
      int64_t end = i + 1;
      if (!order[i].isCompute() && order[i].group >= 0)
        while (end < n && !order[end].isCompute() && order[end].group == order[i].group)
          ++end;
      for (int64_t j = i; j < end; ++j) {
        groupStart.back()[j] = i;
        groupEnd.back()[j] = end;
      }
      i = end;
    }
  }
  std::vector<int64_t> pc(s.ranks, 0);
  std::vector<std::vector<bool>> matched;
  for (const std::vector<Action> &order : s.order)
    matched.emplace_back(order.size(), false);
  auto posted = [&](Position p) { return pc[p.rank] == groupStart[p.rank][p.index]; };

  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t r = 0; r < s.ranks; ++r) {
      const std::vector<Action> &order = s.order[r];
      while (pc[r] < static_cast<int64_t>(order.size())) {
        int64_t start = pc[r];
        if (!order[start].isCompute()) {
          bool done = true;
          for (int64_t i = start; i < groupEnd[r][start]; ++i) {
            Position other = partner[r][i];
            if (!matched[r][i] && posted(other))
              matched[r][i] = matched[other.rank][other.index] = true;
            done = done && matched[r][i];
          }
          if (!done)
            break;
        }
        pc[r] = groupEnd[r][start];
        progress = true;
      }
    }
  }

  std::string blocked;
  for (int64_t r = 0; r < s.ranks; ++r) {
    if (pc[r] == static_cast<int64_t>(s.order[r].size()))
      continue;
    int64_t i = pc[r];
    while (matched[r][i])
      ++i;
    blocked += (blocked.empty() ? "" : ", ") +
               ("rank " + Twine(r) + " waits at " + s.order[r][i].str()).str();
  }
  if (blocked.empty())
    return llvm::Error::success();
  return llvm::createStringError("deadlock under rendezvous semantics: " + blocked);
}

} // namespace

llvm::Error ppc::pipeline::checkSchedule(const Schedule &schedule) {
  return Checker(schedule).run();
}
