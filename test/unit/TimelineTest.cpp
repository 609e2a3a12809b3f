//===- TimelineTest.cpp - predicted timelines of pipeline schedules -------===//
//
// With equal stages and free communication the predicted bubble must be the
// textbook one (DESIGN.md §6): (p-1)/m for GPipe and 1F1B, (p-1)/(v*m) for
// the interleaved schedule. The Chrome trace must be JSON that llvm::json
// parses, with one complete event per computation, and the SVG one box per
// computation.
//
//===----------------------------------------------------------------------===//

#include "passes/pipeline/Timeline.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

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

/// Forward 1 s and backward 2 s on every virtual stage, free transfers.
Timeline equalStages(const Schedule &s, double sendSeconds = 0) {
  return predictTimeline(s, StageCosts::uniform(s.stages(), 1, 2, sendSeconds));
}

int64_t computations(const Schedule &s) {
  int64_t n = 0;
  for (const std::vector<Action> &order : s.order)
    for (const Action &a : order)
      n += a.isCompute();
  return n;
}

int64_t count(llvm::StringRef text, llvm::StringRef pattern) {
  int64_t n = 0;
  for (size_t at = text.find(pattern); at != llvm::StringRef::npos; at = text.find(pattern, at + 1))
    ++n;
  return n;
}

TEST(Timeline, BubbleMatchesMegatronsFormula) {
  for (auto [p, m] : {std::pair{1, 1}, {2, 4}, {4, 4}, {4, 8}, {3, 7}, {8, 16}, {6, 2}}) {
    for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
      Schedule s = build(kind, p, m);
      Timeline t = equalStages(s);
      EXPECT_NEAR(t.bubbleFraction, double(p - 1) / m, 1e-9)
          << scheduleName(kind).str() << " p=" << p << " m=" << m;
      // Every rank computes m * (1 + 2) seconds and idles (p - 1) * 3.
      EXPECT_NEAR(t.makespan, 3.0 * (m + p - 1), 1e-9);
    }
  }
  for (auto [p, m, v] :
       {std::tuple{2, 2, 2}, {2, 4, 2}, {4, 8, 2}, {4, 4, 3}, {3, 9, 4}, {8, 16, 2}}) {
    Schedule s = build(ScheduleKind::Interleaved, p, m, v);
    EXPECT_NEAR(equalStages(s).bubbleFraction, double(p - 1) / (v * m), 1e-9)
        << "interleaved p=" << p << " m=" << m << " v=" << v;
    EXPECT_NEAR(formulaBubbleFraction(s), double(p - 1) / (v * m), 1e-12);
  }
}

TEST(Timeline, ComputationsWaitForTheirInputs) {
  // On two stages with 0.5 s transfers, stage 1 starts F0 once the
  // activation has crossed, and stage 0 starts B0 once the gradient has.
  Schedule s = build(ScheduleKind::OneFOneB, 2, 1);
  Timeline t = equalStages(s, 0.5);
  auto slot = [&](int64_t rank, llvm::StringRef text) {
    for (const Slot &slot : t.slots)
      if (slot.rank == rank && slot.action.str() == text)
        return slot;
    ADD_FAILURE() << text.str() << " not on rank " << rank;
    return Slot{};
  };
  EXPECT_DOUBLE_EQ(slot(0, "send act mb0 s0 -> r1").start, 1);
  EXPECT_DOUBLE_EQ(slot(1, "recv act mb0 s0 <- r0").end, 1.5);
  EXPECT_DOUBLE_EQ(slot(1, "F0@s1").start, 1.5);
  EXPECT_DOUBLE_EQ(slot(1, "B0@s1").end, 4.5);
  EXPECT_DOUBLE_EQ(slot(0, "B0@s0").start, 5);
  EXPECT_DOUBLE_EQ(t.makespan, 7);
  EXPECT_EQ(t.slots.size(), s.order[0].size() + s.order[1].size());
}

TEST(Timeline, TransfersOverlapCompute) {
  // In GPipe only the first activation and the first gradient crossing each
  // boundary delay the step; the other transfers run while the sender
  // computes: makespan (m+p-1)(f+b) + 2(p-1)c.
  for (auto [p, m] : {std::pair{4, 8}, {3, 5}, {2, 1}})
    for (double c : {0.25, 0.5, 1.0})
      EXPECT_NEAR(equalStages(build(ScheduleKind::GPipe, p, m), c).makespan,
                  3.0 * (m + p - 1) + 2 * (p - 1) * c, 1e-9)
          << "p=" << p << " m=" << m << " c=" << c;
}

TEST(Timeline, ChromeTraceIsJsonWithOneEventPerComputation) {
  Schedule s = build(ScheduleKind::Interleaved, 2, 4, 2);
  Timeline t = equalStages(s, 0.25);
  std::string text;
  llvm::raw_string_ostream os(text);
  writeChromeTrace(t, s, {"pp0 (ranks 0-3)", "pp1 (ranks 4-7)"}, os);
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
  ASSERT_TRUE(static_cast<bool>(json)) << llvm::toString(json.takeError());
  const llvm::json::Array *events = json->getAsObject()->getArray("traceEvents");
  ASSERT_NE(events, nullptr);
  int64_t compute = 0, sends = 0, names = 0;
  for (const llvm::json::Value &value : *events) {
    const llvm::json::Object &event = *value.getAsObject();
    llvm::StringRef phase = *event.getString("ph");
    if (phase == "M" && *event.getString("name") == "process_name") {
      ++names;
      EXPECT_EQ(*event.getObject("args")->getString("name"),
                *event.getInteger("pid") ? "pp1 (ranks 4-7)" : "pp0 (ranks 0-3)");
    }
    if (phase != "X")
      continue;
    llvm::StringRef kind = *event.getObject("args")->getString("kind");
    int64_t tid = *event.getInteger("tid");
    if (kind == "forward" || kind == "backward") {
      ++compute;
      EXPECT_EQ(tid, 0);
      EXPECT_NEAR(*event.getNumber("dur"), kind == "forward" ? 1e6 : 2e6, 1e-6);
    } else {
      ++sends;
      EXPECT_EQ(tid, 1);
    }
  }
  EXPECT_EQ(names, 2);
  EXPECT_EQ(compute, computations(s));
  EXPECT_EQ(compute, 2 * 2 * 4 * 2);
  // Every boundary but the last stage's is crossed both ways per micro-batch.
  EXPECT_EQ(sends, 2 * 4 * (s.stages() - 1));
  EXPECT_TRUE(text.find("\"name\":\"F3 s1\"") != std::string::npos) << text;
}

TEST(Timeline, SvgHasOneBoxPerComputation) {
  for (auto [kind, v] : {std::pair{ScheduleKind::OneFOneB, 1}, {ScheduleKind::Interleaved, 2}}) {
    Schedule s = build(kind, 4, 8, v);
    Timeline t = equalStages(s, 0.1);
    std::string svg;
    llvm::raw_string_ostream os(svg);
    writeSvgTimeline(t, s, {"pp0", "pp1", "pp2", "pp3 <last>"}, "GPT-2 on 4x1x4", os);
    EXPECT_EQ(llvm::StringRef(svg).substr(0, 4), "<svg");
    EXPECT_EQ(count(svg, "<rect"), computations(s));
    EXPECT_EQ(count(svg, "</svg>"), 1);
    EXPECT_NE(svg.find("pp3 &lt;last&gt;"), std::string::npos);
    EXPECT_NE(svg.find(v == 1 ? "(p-1)/m = 37.50%" : "(p-1)/(v*m) = 18.75%"), std::string::npos)
        << svg.substr(0, 800);
  }
}

} // namespace
