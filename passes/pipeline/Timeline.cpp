//===- Timeline.cpp - predicted timelines of pipeline schedules -----------===//

#include "passes/pipeline/Timeline.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <optional>

using namespace ppc::pipeline;

StageCosts StageCosts::uniform(int64_t stages, double forward, double backward,
                               double sendSeconds) {
  return StageCosts{std::vector<double>(stages, forward), std::vector<double>(stages, backward),
                    sendSeconds};
}

double ppc::pipeline::formulaBubbleFraction(const Schedule &schedule) {
  return static_cast<double>(schedule.ranks - 1) /
         static_cast<double>(schedule.virtualStages * schedule.microBatches);
}

//===----------------------------------------------------------------------===//
// Prediction
//===----------------------------------------------------------------------===//

namespace {

/// Plays a schedule out in time, one rank at a time as far as the values it
/// waits for allow.
class Predictor {
public:
  Predictor(const Schedule &s, const StageCosts &costs)
      : s(s), costs(costs), computed(2 * s.microBatches * s.stages()), sent(computed.size()),
        arrived(computed.size(), 0), computeFree(s.ranks, 0), commFree(s.ranks, 0) {
    assert(static_cast<int64_t>(costs.forward.size()) == s.stages() &&
           static_cast<int64_t>(costs.backward.size()) == s.stages() &&
           "one cost per virtual stage");
  }

  Timeline run();

private:
  /// The interval of a computation or a transfer.
  struct Interval {
    double start, end;
  };

  const Schedule &s;
  const StageCosts &costs;
  /// By value (forward: activation, backward: gradient): when its
  /// computation ran, and when its transfer ran.
  std::vector<std::optional<Interval>> computed, sent;
  /// When each value is available on the rank that consumes it.
  std::vector<double> arrived;
  /// When each rank's compute and communication lanes are next free.
  std::vector<double> computeFree, commFree;

  int64_t valueIndex(int64_t microBatch, int64_t stage, bool gradient) const {
    return (gradient * s.microBatches + microBatch) * s.stages() + stage;
  }
  /// When the inputs of computation `a` are all there.
  double inputsReady(const Action &a) const;
  /// The slot of `a` on `rank` once it can be timed; std::nullopt while it
  /// waits for a transfer another rank has not yet timed.
  std::optional<Slot> time(int64_t rank, const Action &a);
};

double Predictor::inputsReady(const Action &a) const {
  bool backward = a.kind == Action::Backward;
  double ready = 0;
  if (backward)
    ready = computed[valueIndex(a.microBatch, a.stage, false)]->end;
  int64_t from = backward ? a.stage + 1 : a.stage - 1;
  if (from >= 0 && from < s.stages())
    ready = std::max(ready, arrived[valueIndex(a.microBatch, from, backward)]);
  return ready;
}

std::optional<Slot> Predictor::time(int64_t rank, const Action &a) {
  int64_t value = valueIndex(a.microBatch, a.stage, a.kind == Action::Backward || a.gradient);
  Interval interval;
  switch (a.kind) {
  case Action::Forward:
  case Action::Backward: {
    double start = std::max(computeFree[rank], inputsReady(a));
    double cost = (a.kind == Action::Forward ? costs.forward : costs.backward)[a.stage];
    interval = {start, start + cost};
    computed[value] = interval;
    computeFree[rank] = interval.end;
    // A consumer on this rank reads the value as soon as it is computed; one
    // elsewhere gets it from the Recv.
    arrived[value] = interval.end;
    break;
  }
  case Action::Send: {
    double start = std::max(commFree[rank], computed[value]->end);
    interval = {start, start + costs.sendSeconds};
    sent[value] = interval;
    commFree[rank] = interval.end;
    break;
  }
  case Action::Recv:
    if (!sent[value])
      return std::nullopt;
    interval = *sent[value];
    arrived[value] = interval.end;
    break;
  }
  return Slot{rank, a, interval.start, interval.end};
}

Timeline Predictor::run() {
  std::vector<std::vector<Slot>> slots(s.ranks);
  std::vector<size_t> pc(s.ranks, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t r = 0; r < s.ranks; ++r)
      for (; pc[r] < s.order[r].size(); ++pc[r], progress = true) {
        std::optional<Slot> slot = time(r, s.order[r][pc[r]]);
        if (!slot)
          break;
        slots[r].push_back(*slot);
      }
  }
  Timeline t{{}, 0, 0};
  double busiest = 0;
  for (int64_t r = 0; r < s.ranks; ++r) {
    assert(pc[r] == s.order[r].size() && "schedule deadlocks; run checkSchedule first");
    double busy = 0;
    for (const Slot &slot : slots[r]) {
      t.makespan = std::max(t.makespan, slot.end);
      if (slot.action.isCompute())
        busy += slot.end - slot.start;
      t.slots.push_back(slot);
    }
    busiest = std::max(busiest, busy);
  }
  t.bubbleFraction = busiest > 0 ? (t.makespan - busiest) / busiest : 0;
  return t;
}

} // namespace

Timeline ppc::pipeline::predictTimeline(const Schedule &schedule, const StageCosts &costs) {
  return Predictor(schedule, costs).run();
}

//===----------------------------------------------------------------------===//
// Chrome trace
//===----------------------------------------------------------------------===//

namespace {

/// The name of pipeline rank `rank`'s row: the caller's, or "pp<rank>".
std::string rowName(llvm::ArrayRef<std::string> rowNames, int64_t rank) {
  return rank < static_cast<int64_t>(rowNames.size()) ? rowNames[rank]
                                                      : "pp" + std::to_string(rank);
}

llvm::StringRef kindName(Action::Kind kind) {
  switch (kind) {
  case Action::Forward:
    return "forward";
  case Action::Backward:
    return "backward";
  case Action::Send:
    return "send";
  case Action::Recv:
    return "recv";
  }
  llvm_unreachable("unknown action kind");
}

/// "F3 s1" for a computation; a transfer's own description otherwise.
std::string eventName(const Action &a) {
  if (!a.isCompute())
    return a.str();
  return (a.kind == Action::Forward ? "F" : "B") + std::to_string(a.microBatch) + " s" +
         std::to_string(a.stage);
}

void writeMetadata(llvm::json::OStream &j, llvm::StringRef name, int64_t pid,
                   std::optional<int64_t> tid, llvm::StringRef key, llvm::json::Value value) {
  j.object([&] {
    j.attribute("name", name);
    j.attribute("ph", "M");
    j.attribute("pid", pid);
    if (tid)
      j.attribute("tid", *tid);
    j.attributeObject("args", [&] { j.attribute(key, std::move(value)); });
  });
}

void writeEvent(llvm::json::OStream &j, const Slot &slot) {
  const Action &a = slot.action;
  j.object([&] {
    j.attribute("name", eventName(a));
    j.attribute("cat", kindName(a.kind));
    j.attribute("ph", "X");
    j.attribute("pid", slot.rank);
    j.attribute("tid", a.isCompute() ? 0 : 1);
    j.attribute("ts", slot.start * 1e6);
    j.attribute("dur", (slot.end - slot.start) * 1e6);
    j.attributeObject("args", [&] {
      j.attribute("micro_batch", a.microBatch);
      j.attribute("stage", a.stage);
      j.attribute("kind", kindName(a.kind));
      if (!a.isCompute()) {
        j.attribute("value", a.gradient ? "activation gradient" : "activation");
        j.attribute("peer", a.peer);
      }
    });
  });
}

} // namespace

void ppc::pipeline::writeChromeTrace(const Timeline &t, const Schedule &s,
                                     llvm::ArrayRef<std::string> rowNames, llvm::raw_ostream &os) {
  llvm::json::OStream j(os);
  j.object([&] {
    j.attributeArray("traceEvents", [&] {
      for (int64_t r = 0; r < s.ranks; ++r) {
        writeMetadata(j, "process_name", r, std::nullopt, "name", rowName(rowNames, r));
        writeMetadata(j, "process_sort_index", r, std::nullopt, "sort_index", r);
        writeMetadata(j, "thread_name", r, 0, "name", "compute");
        writeMetadata(j, "thread_name", r, 1, "name", "communication");
      }
      // A Recv repeats its Send's interval on the receiver; the trace shows
      // each transfer once, on the sender's lane.
      for (const Slot &slot : t.slots)
        if (slot.action.kind != Action::Recv)
          writeEvent(j, slot);
    });
    j.attribute("displayTimeUnit", "ms");
    j.attributeObject("otherData", [&] {
      j.attribute("schedule", scheduleName(s.kind));
      j.attribute("pipeline_ranks", s.ranks);
      j.attribute("micro_batches", s.microBatches);
      j.attribute("virtual_stages", s.virtualStages);
      j.attribute("makespan_s", t.makespan);
      j.attribute("bubble_fraction", t.bubbleFraction);
    });
  });
  os << "\n";
}

//===----------------------------------------------------------------------===//
// SVG
//===----------------------------------------------------------------------===//

namespace {

/// The SVG picture's geometry, in pixels.
struct SvgLayout {
  static constexpr double left = 160, plotWidth = 960, right = 30, top = 56;
  static constexpr double rowHeight = 48, boxHeight = 28, laneOffset = 34;
  static constexpr double axisHeight = 40;
  double makespan;

  double x(double seconds) const {
    return left + (makespan > 0 ? seconds / makespan * plotWidth : 0);
  }
  double rowTop(int64_t rank) const { return top + rank * rowHeight; }
};

std::string escapeXml(llvm::StringRef text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

/// Forwards in blues, backwards in oranges, darker for later model chunks.
std::string fill(const Schedule &s, const Action &a) {
  int64_t chunk = a.stage / s.ranks;
  int lightness = 68 - static_cast<int>(36 * chunk / std::max<int64_t>(s.virtualStages, 2));
  return a.kind == Action::Forward ? "hsl(212,65%," + std::to_string(lightness) + "%)"
                                   : "hsl(28,85%," + std::to_string(lightness) + "%)";
}

/// A tick spacing of 1, 2 or 5 times a power of ten giving about 8 ticks.
double tickStep(double span) {
  double raw = span / 8, power = std::pow(10, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0})
    if (factor * power >= raw)
      return factor * power;
  return 10 * power;
}

void writeTitle(const Timeline &t, const Schedule &s, llvm::StringRef title,
                llvm::raw_ostream &os) {
  os << llvm::format("<text x=\"%g\" y=\"22\" font-size=\"15\" font-weight=\"bold\">",
                     SvgLayout::left)
     << escapeXml(title) << "</text>\n";
  os << llvm::format("<text x=\"%g\" y=\"42\" font-size=\"12\">", SvgLayout::left)
     << escapeXml(scheduleName(s.kind)) << "  p=" << s.ranks << " m=" << s.microBatches
     << " v=" << s.virtualStages
     << llvm::format("  bubble %.2f%% (formula %s = %.2f%%)", 100 * t.bubbleFraction,
                     s.virtualStages > 1 ? "(p-1)/(v*m)" : "(p-1)/m",
                     100 * formulaBubbleFraction(s))
     << "  <tspan fill=\"hsl(212,65%,50%)\">forward</tspan>"
     << " <tspan fill=\"hsl(28,85%,50%)\">backward</tspan></text>\n";
}

void writeSlot(const SvgLayout &layout, const Schedule &s, const Slot &slot,
               llvm::raw_ostream &os) {
  double x0 = layout.x(slot.start), x1 = layout.x(slot.end);
  double y = layout.rowTop(slot.rank);
  if (slot.action.kind == Action::Send) {
    double lane = y + SvgLayout::laneOffset + 3;
    os << llvm::format("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
                       "stroke-width=\"4\"><title>",
                       x0, lane, std::max(x1, x0 + 1), lane,
                       slot.action.gradient ? "hsl(28,60%,40%)" : "hsl(212,45%,40%)")
       << escapeXml(slot.action.str()) << "</title></line>\n";
    return;
  }
  os << llvm::format("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%g\" fill=\"%s\" "
                     "stroke=\"white\" stroke-width=\"0.5\"><title>",
                     x0, y, x1 - x0, SvgLayout::boxHeight, fill(s, slot.action).c_str())
     << escapeXml(slot.action.str()) << "</title></rect>\n";
  os << llvm::format("<text x=\"%.2f\" y=\"%.2f\" font-size=\"10\" text-anchor=\"middle\">%lld"
                     "</text>\n",
                     (x0 + x1) / 2, y + SvgLayout::boxHeight / 2 + 3.5,
                     static_cast<long long>(slot.action.microBatch));
}

void writeAxis(const SvgLayout &layout, int64_t rows, llvm::raw_ostream &os) {
  double y = layout.rowTop(rows) + 4;
  os << llvm::format("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n",
                     layout.x(0), y, layout.x(layout.makespan), y);
  if (layout.makespan <= 0)
    return;
  // Label in the unit that keeps the numbers short.
  double scale = layout.makespan < 1e-3 ? 1e6 : layout.makespan < 1 ? 1e3 : 1;
  const char *unit = scale == 1e6 ? "us" : scale == 1e3 ? "ms" : "s";
  double step = tickStep(layout.makespan);
  int digits = std::max(0, static_cast<int>(-std::floor(std::log10(step * scale))));
  for (int64_t k = 0; k * step <= layout.makespan * (1 + 1e-9); ++k) {
    double x = layout.x(k * step);
    os << llvm::format("<line x1=\"%.2f\" y1=\"%g\" x2=\"%.2f\" y2=\"%g\" stroke=\"black\"/>", x, y,
                       x, y + 5)
       << llvm::format("<text x=\"%.2f\" y=\"%g\" font-size=\"10\" text-anchor=\"middle\">"
                       "%.*f %s</text>\n",
                       x, y + 17, digits, k * step * scale, unit);
  }
}

} // namespace

void ppc::pipeline::writeSvgTimeline(const Timeline &t, const Schedule &s,
                                     llvm::ArrayRef<std::string> rowNames, llvm::StringRef title,
                                     llvm::raw_ostream &os) {
  SvgLayout layout{t.makespan};
  double width = SvgLayout::left + SvgLayout::plotWidth + SvgLayout::right;
  double height = layout.rowTop(s.ranks) + SvgLayout::axisHeight;
  os << llvm::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
                     "viewBox=\"0 0 %g %g\" font-family=\"sans-serif\" "
                     "style=\"background:white\">\n",
                     width, height, width, height);
  writeTitle(t, s, title, os);
  for (int64_t r = 0; r < s.ranks; ++r)
    os << llvm::format("<text x=\"8\" y=\"%.2f\" font-size=\"12\">",
                       layout.rowTop(r) + SvgLayout::boxHeight / 2 + 4)
       << escapeXml(rowName(rowNames, r)) << "</text>\n";
  for (const Slot &slot : t.slots)
    if (slot.action.kind != Action::Recv)
      writeSlot(layout, s, slot, os);
  writeAxis(layout, s.ranks, os);
  os << "</svg>\n";
}
