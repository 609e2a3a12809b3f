//===- Timeline.h - predicted timelines of pipeline schedules -----*- C++ -*-===//
//
// Given what each virtual stage costs, predictTimeline() plays a schedule
// out in time: when every computation and transfer starts and ends, how long
// the step takes, and how much of it the busiest rank idles (the pipeline
// bubble, which DESIGN.md §6 puts at (p-1)/m for 1F1B and (p-1)/(v*m)
// interleaved). The result can be written as a Chrome trace for Perfetto or
// as a self-contained SVG picture.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_PIPELINE_TIMELINE_H
#define PPC_PASSES_PIPELINE_TIMELINE_H

#include "passes/pipeline/Schedule.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace ppc::pipeline {

/// Seconds per virtual stage (index 0 .. p*v-1) for one micro-batch.
struct StageCosts {
  std::vector<double> forward, backward;
  /// Seconds per transfer across a stage boundary.
  double sendSeconds = 0;

  /// The same costs for each of `stages` stages.
  static StageCosts uniform(int64_t stages, double forward, double backward,
                            double sendSeconds = 0);
};

/// When one action runs. A Send's slot is its transfer on the sender's
/// communication lane; the matching Recv gets the same interval on the
/// receiver, ending when the value arrives.
struct Slot {
  int64_t rank;
  Action action;
  double start, end;
};

struct Timeline {
  /// Every action of every rank, rank by rank in schedule order.
  std::vector<Slot> slots;
  double makespan;
  /// (makespan - ideal) / ideal, ideal = the busiest rank's compute time:
  /// Megatron's bubble time fraction, (p-1)/m for 1F1B with equal stages and
  /// free communication, (p-1)/(v*m) interleaved.
  double bubbleFraction;
};

/// Megatron-LM's bubble fraction for the schedule's shape: (p-1)/(v*m), which
/// is (p-1)/m when v = 1.
double formulaBubbleFraction(const Schedule &schedule);

/// Predicts the start and end of every action: each rank runs its
/// computations in order, each as soon as the rank is free and its inputs
/// have arrived; a transfer starts once its value is computed and the
/// sender's communication lane is free, and takes costs.sendSeconds on that
/// lane, so transfers overlap compute. `schedule` must pass checkSchedule()
/// and `costs` must have one entry per virtual stage.
Timeline predictTimeline(const Schedule &schedule, const StageCosts &costs);

/// Writes `t` as Chrome trace JSON (Perfetto and chrome://tracing open it):
/// one "X" event per computation (tid 0) and per send (tid 1, the
/// communication lane) with times in microseconds, and one process per
/// pipeline rank named by `rowNames` (for example "pp1 (ranks 8-15)").
void writeChromeTrace(const Timeline &t, const Schedule &s, llvm::ArrayRef<std::string> rowNames,
                      llvm::raw_ostream &os);

/// Writes `t` as a self-contained SVG picture: one row per pipeline rank
/// named by `rowNames`, a box per computation (forwards blue, backwards
/// orange, darker for later virtual stages) with its micro-batch number,
/// sends as thin bars on a communication lane below, a time axis, and a
/// title line with `title`, the schedule's shape and its bubble fraction
/// beside Megatron's formula.
void writeSvgTimeline(const Timeline &t, const Schedule &s, llvm::ArrayRef<std::string> rowNames,
                      llvm::StringRef title, llvm::raw_ostream &os);

} // namespace ppc::pipeline

#endif // PPC_PASSES_PIPELINE_TIMELINE_H
