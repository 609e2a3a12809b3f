//===- ScheduleTest.cpp - pipeline schedules and their checker ------------===//
//
// Every schedule buildSchedule() makes must pass checkSchedule() (complete,
// causal, FIFO-matched, deadlock-free under rendezvous) for p in 1..8 and m
// in 1..16; 1F1B must bound the micro-batches in flight by p - rank (its
// memory property) where GPipe holds all m; the orders must be Megatron-LM's
// (written out by hand here); and the checker must reject broken schedules
// with a message naming the rank and action at fault.
//
//===----------------------------------------------------------------------===//

#include "passes/pipeline/Schedule.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace ppc::pipeline;

namespace {

Schedule build(ScheduleKind kind, int64_t p, int64_t m, int64_t v = 1) {
  llvm::Expected<Schedule> s = buildSchedule(kind, p, m, v);
  if (!s) {
    ADD_FAILURE() << llvm::toString(s.takeError());
    return Schedule{kind, p, v, m, {}};
  }
  return std::move(*s);
}

/// The checker's message, or "ok".
std::string check(const Schedule &s) {
  llvm::Error error = checkSchedule(s);
  return error ? llvm::toString(std::move(error)) : "ok";
}

/// The message of a failed build, or "ok".
std::string buildError(ScheduleKind kind, int64_t p, int64_t m, int64_t v) {
  llvm::Expected<Schedule> s = buildSchedule(kind, p, m, v);
  return s ? "ok" : llvm::toString(s.takeError());
}

/// The computations of `rank`, space-separated.
std::string computations(const Schedule &s, int64_t rank) {
  std::string out;
  for (const Action &a : s.order[rank])
    if (a.isCompute())
      out += (out.empty() ? "" : " ") + a.str();
  return out;
}

/// The index of the first action of `rank` that prints as `text`.
size_t find(const Schedule &s, int64_t rank, const std::string &text) {
  const std::vector<Action> &order = s.order[rank];
  auto it =
      std::find_if(order.begin(), order.end(), [&](const Action &a) { return a.str() == text; });
  EXPECT_NE(it, order.end()) << text << " not on rank " << rank << "\n" << s.str();
  return it - order.begin();
}

/// The most micro-batches `rank` holds activations of at once: forwards run
/// minus backwards run.
int64_t peakInFlight(const Schedule &s, int64_t rank) {
  int64_t live = 0, peak = 0;
  for (const Action &a : s.order[rank]) {
    live += a.kind == Action::Forward ? 1 : a.kind == Action::Backward ? -1 : 0;
    peak = std::max(peak, live);
  }
  return peak;
}

TEST(Schedule, NamesRoundTrip) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved})
    EXPECT_EQ(parseScheduleKind(scheduleName(kind)), kind);
  EXPECT_EQ(scheduleName(ScheduleKind::OneFOneB), "1f1b");
  EXPECT_FALSE(parseScheduleKind("zero-bubble").has_value());
}

TEST(Schedule, ActionsPrintForErrors) {
  Schedule s = build(ScheduleKind::OneFOneB, 3, 4);
  EXPECT_EQ(computations(s, 2).substr(0, 17), "F0@s2 B0@s2 F1@s2");
  find(s, 1, "send act mb0 s1 -> r2");
  find(s, 1, "recv grad mb0 s2 <- r2");
  find(s, 0, "recv grad mb3 s1 <- r1");
}

/// Every schedule the tests sweep: GPipe and 1F1B for p in 1..8 and m in
/// 1..16, interleaved for v in {2, 3, 4} and the m in 1..16 that p divides.
std::vector<Schedule> sweep() {
  std::vector<Schedule> all;
  for (int64_t p = 1; p <= 8; ++p)
    for (int64_t m = 1; m <= 16; ++m) {
      all.push_back(build(ScheduleKind::GPipe, p, m));
      all.push_back(build(ScheduleKind::OneFOneB, p, m));
      for (int64_t v : {2, 3, 4})
        if (m % p == 0)
          all.push_back(build(ScheduleKind::Interleaved, p, m, v));
    }
  return all;
}

std::string describe(const Schedule &s) {
  return scheduleName(s.kind).str() + " p=" + std::to_string(s.ranks) +
         " m=" + std::to_string(s.microBatches) + " v=" + std::to_string(s.virtualStages);
}

TEST(Schedule, EveryBuiltScheduleChecks) {
  std::vector<Schedule> all = sweep();
  EXPECT_EQ(all.size(), 2u * 8 * 16 + 3 * (16 + 8 + 5 + 4 + 3 + 2 + 2 + 2));
  for (const Schedule &s : all)
    EXPECT_EQ(check(s), "ok") << describe(s) << "\n" << s.str();
}

TEST(Schedule, EveryRankRunsEachChunkOnEveryMicroBatch) {
  for (const Schedule &s : sweep())
    for (int64_t r = 0; r < s.ranks; ++r) {
      int64_t forwards = 0, backwards = 0;
      for (const Action &a : s.order[r]) {
        forwards += a.kind == Action::Forward;
        backwards += a.kind == Action::Backward;
      }
      EXPECT_EQ(forwards, s.microBatches * s.virtualStages) << describe(s) << " rank " << r;
      EXPECT_EQ(backwards, s.microBatches * s.virtualStages) << describe(s) << " rank " << r;
    }
}

TEST(Schedule, OneRankNeedsNoTransfers) {
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved}) {
    Schedule s = build(kind, 1, 4, kind == ScheduleKind::Interleaved ? 2 : 1);
    for (const Action &a : s.order[0])
      EXPECT_TRUE(a.isCompute()) << a.str();
  }
}

TEST(Schedule, OneFOneBBoundsMicroBatchesInFlight) {
  // PipeDream-flush keeps at most p - rank activations alive: its memory
  // advantage over GPipe, which holds all m.
  for (int64_t p = 1; p <= 8; ++p)
    for (int64_t m = 1; m <= 16; ++m) {
      Schedule oneFOneB = build(ScheduleKind::OneFOneB, p, m);
      Schedule gpipe = build(ScheduleKind::GPipe, p, m);
      for (int64_t r = 0; r < p; ++r) {
        EXPECT_EQ(peakInFlight(oneFOneB, r), std::min(p - r, m)) << "p=" << p << " m=" << m;
        EXPECT_EQ(peakInFlight(gpipe, r), m) << "p=" << p << " m=" << m;
      }
    }
}

TEST(Schedule, OrdersFollowMegatron) {
  // GPipe: every forward, then the backwards in micro-batch order.
  EXPECT_EQ(computations(build(ScheduleKind::GPipe, 2, 3), 1),
            "F0@s1 F1@s1 F2@s1 B0@s1 B1@s1 B2@s1");
  // 1F1B on rank 0 of 4: three warm-up forwards, alternate, cool down.
  EXPECT_EQ(computations(build(ScheduleKind::OneFOneB, 4, 6), 0),
            "F0@s0 F1@s0 F2@s0 F3@s0 B0@s0 F4@s0 B1@s0 F5@s0 B2@s0 B3@s0 B4@s0 B5@s0");
  // Interleaved, p=2 v=2 m=4: rank 0 holds stages 0 and 2; micro-batches
  // go through a chunk in blocks of p; warm-up (2-0-1)*2 + (2-1)*2 = 4.
  EXPECT_EQ(computations(build(ScheduleKind::Interleaved, 2, 4, 2), 0),
            "F0@s0 F1@s0 F0@s2 F1@s2 F2@s0 B0@s2 F3@s0 B1@s2 F2@s2 B0@s0 F3@s2 B1@s0 "
            "B2@s2 B3@s2 B2@s0 B3@s0");
  // Rank 1 warms up with (2-1-1)*2 + 2 = 2 forwards.
  EXPECT_EQ(computations(build(ScheduleKind::Interleaved, 2, 4, 2), 1),
            "F0@s1 F1@s1 F0@s3 B0@s3 F1@s3 B1@s3 F2@s1 B0@s1 F3@s1 B1@s1 F2@s3 B2@s3 "
            "F3@s3 B3@s3 B2@s1 B3@s1");
}

/// Whether `texts` are consecutive actions of `rank` posted as one group.
bool postedTogether(const Schedule &s, int64_t rank, std::vector<std::string> texts) {
  size_t first = find(s, rank, texts[0]);
  const std::vector<Action> &order = s.order[rank];
  for (size_t k = 0; k < texts.size(); ++k)
    if (first + k >= order.size() || order[first + k].str() != texts[k] ||
        order[first + k].group < 0 || order[first + k].group != order[first].group)
      return false;
  return true;
}

TEST(Schedule, SteadyTransfersArePostedTogether) {
  // Megatron's send_forward_recv_backward: rank 0 of two posts the
  // activation it sends and the gradient it waits for as one group.
  Schedule oneFOneB = build(ScheduleKind::OneFOneB, 2, 3);
  EXPECT_TRUE(postedTogether(oneFOneB, 0, {"send act mb1 s0 -> r1", "recv grad mb0 s1 <- r1"}))
      << oneFOneB.str();
  // Interleaved: after each steady forward-backward pair, both sends and
  // both receives go in one group (send_forward_backward_recv_forward_backward).
  // Grouping per computation instead deadlocks this very schedule.
  Schedule interleaved = build(ScheduleKind::Interleaved, 2, 4, 2);
  EXPECT_TRUE(postedTogether(interleaved, 0,
                             {"send act mb3 s0 -> r1", "send grad mb1 s2 -> r1",
                              "recv act mb2 s1 <- r1", "recv grad mb0 s1 <- r1"}))
      << interleaved.str();
}

TEST(Schedule, BuildRejectsBadFlags) {
  EXPECT_EQ(buildError(ScheduleKind::Interleaved, 4, 6, 2),
            "--schedule interleaved needs --micro-batches (6) to be a multiple of the pipeline "
            "ranks (pp=4)");
  EXPECT_EQ(buildError(ScheduleKind::Interleaved, 2, 4, 1),
            "--schedule interleaved needs at least 2 virtual stages per rank, got 1");
  EXPECT_EQ(buildError(ScheduleKind::OneFOneB, 2, 4, 2),
            "--schedule 1f1b runs 1 virtual stage per rank, got 2");
  EXPECT_EQ(buildError(ScheduleKind::GPipe, 2, 0, 1), "--micro-batches must be at least 1, got 0");
  EXPECT_EQ(buildError(ScheduleKind::GPipe, 0, 2, 1),
            "pipeline ranks (pp) must be at least 1, got 0");
}

/// `s` with its transfers regrouped per computation: the receives a
/// computation needs right before it, its sends right after, and every run
/// of transfers between two computations posted as one group.
Schedule groupedPerComputation(const Schedule &s) {
  Schedule regrouped = s;
  for (int64_t r = 0; r < s.ranks; ++r) {
    auto feeds = [](const Action &recv, const Action &c) {
      return recv.kind == Action::Recv && c.microBatch == recv.microBatch &&
             c.kind == (recv.gradient ? Action::Backward : Action::Forward) &&
             c.stage == recv.stage + (recv.gradient ? -1 : 1);
    };
    auto fedBy = [](const Action &c, const Action &send) {
      return send.kind == Action::Send && c.microBatch == send.microBatch &&
             c.stage == send.stage &&
             c.kind == (send.gradient ? Action::Backward : Action::Forward);
    };
    std::vector<Action> &order = regrouped.order[r];
    order.clear();
    for (const Action &c : s.order[r]) {
      if (!c.isCompute())
        continue;
      for (const Action &a : s.order[r])
        if (feeds(a, c))
          order.push_back(a);
      order.push_back(c);
      for (const Action &a : s.order[r])
        if (fedBy(c, a))
          order.push_back(a);
    }
    int64_t group = 0;
    for (size_t i = 0; i < order.size(); ++i)
      if (!order[i].isCompute())
        order[i].group = i > 0 && !order[i - 1].isCompute() ? order[i - 1].group : group++;
  }
  return regrouped;
}

TEST(ScheduleChecker, RejectsInterleavedTransfersGroupedPerComputation) {
  // Interleaving makes rank p-1 feed rank 0 (stage p-1 to p), so the ranks
  // form a ring. Posting one group between each pair of computations, as
  // 1F1B can, lets two ranks each wait on a send the other posts only later.
  Schedule oneFOneB = build(ScheduleKind::OneFOneB, 4, 8);
  EXPECT_EQ(check(groupedPerComputation(oneFOneB)), "ok");
  Schedule interleaved = build(ScheduleKind::Interleaved, 2, 4, 2);
  EXPECT_EQ(check(groupedPerComputation(interleaved)),
            "deadlock under rendezvous semantics: rank 0 waits at send grad mb0 s2 -> r1, rank 1 "
            "waits at send grad mb1 s3 -> r0");
}

TEST(ScheduleChecker, RejectsReceivesOutOfFifoOrder) {
  Schedule s = build(ScheduleKind::OneFOneB, 2, 4);
  Action &first = s.order[1][find(s, 1, "recv act mb0 s0 <- r0")];
  Action &second = s.order[1][find(s, 1, "recv act mb1 s0 <- r0")];
  std::swap(first.microBatch, second.microBatch);
  EXPECT_EQ(check(s), "rank 1: recv act mb1 s0 <- r0 is out of FIFO order: it matches send act "
                      "mb0 s0 -> r1 on rank 0");
}

TEST(ScheduleChecker, RejectsMissingSend) {
  Schedule s = build(ScheduleKind::GPipe, 3, 2);
  s.order[1].erase(s.order[1].begin() + find(s, 1, "send grad mb1 s1 -> r0"));
  EXPECT_EQ(check(s), "rank 1: missing send grad mb1 s1 -> r0");
}

TEST(ScheduleChecker, RejectsBackwardBeforeItsForward) {
  Schedule s = build(ScheduleKind::OneFOneB, 2, 2);
  std::swap(s.order[1][find(s, 1, "F0@s1")], s.order[1][find(s, 1, "B0@s1")]);
  EXPECT_EQ(check(s), "rank 1: B0@s1 runs before F0@s1");
}

TEST(ScheduleChecker, RejectsComputationBeforeItsReceive) {
  Schedule s = build(ScheduleKind::OneFOneB, 2, 1);
  std::swap(s.order[1][find(s, 1, "F0@s1")], s.order[1][find(s, 1, "recv act mb0 s0 <- r0")]);
  EXPECT_EQ(check(s), "rank 1: F0@s1 runs before recv act mb0 s0 <- r0");
}

TEST(ScheduleChecker, RejectsMisplacedAndDuplicatedWork) {
  Schedule s = build(ScheduleKind::OneFOneB, 2, 2);
  s.order[0].push_back(s.order[1][find(s, 1, "B1@s1")]);
  EXPECT_EQ(check(s), "rank 0: B1@s1 belongs on rank 1");
  s = build(ScheduleKind::OneFOneB, 2, 2);
  s.order[0].push_back(s.order[0][find(s, 0, "F1@s0")]);
  EXPECT_EQ(check(s), "rank 0: F1@s0 runs twice");
  s = build(ScheduleKind::OneFOneB, 2, 2);
  s.order[0][find(s, 0, "send act mb0 s0 -> r1")].peer = 0;
  EXPECT_EQ(check(s), "rank 0: send act mb0 s0 -> r0 names the wrong peer, expected r1");
}

TEST(ScheduleChecker, RejectsCyclicWait) {
  // Each rank receives before it sends what the other waits for.
  Action f0{Action::Forward}, b0{Action::Backward}, f1{Action::Forward}, b1{Action::Backward};
  f1.stage = b1.stage = 1;
  Action sendAct{Action::Send}, recvAct{Action::Recv}, sendGrad{Action::Send},
      recvGrad{Action::Recv};
  sendAct.peer = 1;
  recvAct.peer = 0;
  sendGrad.stage = recvGrad.stage = 1;
  sendGrad.gradient = recvGrad.gradient = true;
  sendGrad.peer = 0;
  recvGrad.peer = 1;
  Schedule s{
      ScheduleKind::OneFOneB, 2, 1, 1, {{f0, recvGrad, sendAct, b0}, {recvAct, f1, b1, sendGrad}}};
  EXPECT_EQ(check(s), "deadlock under rendezvous semantics: rank 0 waits at recv grad mb0 s1 "
                      "<- r1, rank 1 waits at recv act mb0 s0 <- r0");
}

TEST(ScheduleChecker, RejectsSendsThatOnlyBufferingWouldComplete) {
  // In the steady state of 1F1B on two ranks, each rank sends to the other
  // and then receives from it. Posted one after the other, both sends wait
  // for a receive that is never posted; posted as one group (Megatron's
  // send_forward_recv_backward), they complete.
  Schedule s = build(ScheduleKind::OneFOneB, 2, 2);
  EXPECT_EQ(check(s), "ok");
  for (std::vector<Action> &order : s.order)
    for (Action &a : order)
      a.group = -1;
  EXPECT_EQ(check(s), "deadlock under rendezvous semantics: rank 0 waits at send act mb1 s0 -> "
                      "r1, rank 1 waits at send grad mb0 s1 -> r0");
}

} // namespace
