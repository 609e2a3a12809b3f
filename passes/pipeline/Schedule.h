//===- Schedule.h - pipeline schedules and their checker ---------*- C++ -*-===//
//
// A pipeline schedule says, for every pipeline rank, in which order it runs
// the forward and backward passes of its stages over the micro-batches, and
// where it sends and receives the activations and activation gradients that
// cross stage boundaries. buildSchedule() makes GPipe, 1F1B (PipeDream-flush,
// as in Megatron-LM) and Megatron-LM's interleaved 1F1B; checkSchedule()
// proves a schedule complete, causally ordered and deadlock-free when every
// send waits for its receiver (rendezvous), or names the action at fault.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_PASSES_PIPELINE_SCHEDULE_H
#define PPC_PASSES_PIPELINE_SCHEDULE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ppc::pipeline {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved };

/// The kind named `name` ("gpipe", "1f1b", "interleaved"), as --schedule
/// spells it; std::nullopt for any other name.
std::optional<ScheduleKind> parseScheduleKind(llvm::StringRef name);
/// The --schedule spelling of `kind`.
llvm::StringRef scheduleName(ScheduleKind kind);

/// One slot in a pipeline rank's order.
struct Action {
  enum Kind { Forward, Backward, Send, Recv } kind;
  int64_t microBatch = 0;
  /// Virtual stage (0 .. p*v-1) the computation belongs to. For Send/Recv:
  /// the virtual stage that PRODUCED the value (activation: stage s sends to
  /// s+1; activation gradient: stage s sends to s-1).
  int64_t stage = 0;
  /// Send/Recv only: true for an activation gradient (backward direction).
  bool gradient = false;
  /// Send/Recv only: the pipeline rank at the other end.
  int64_t peer = -1;
  /// Send/Recv only: consecutive communication actions of one rank with the
  /// same group id (>= 0) are posted together (like ncclGroupStart/End or
  /// MPI_Sendrecv) and complete together; -1: alone.
  int64_t group = -1;

  bool isCompute() const { return kind == Forward || kind == Backward; }
  /// "F3@s1", "B0@s2", "send act mb2 s1 -> r2", "recv grad mb0 s3 <- r3":
  /// for errors and dumps.
  std::string str() const;
};

struct Schedule {
  ScheduleKind kind;
  /// p: pipeline ranks.
  int64_t ranks;
  /// v: virtual stages (model chunks) per rank; 1 unless interleaved.
  int64_t virtualStages;
  /// m: micro-batches per step.
  int64_t microBatches;
  /// Per pipeline rank, its actions in order.
  std::vector<std::vector<Action>> order;

  int64_t stages() const { return ranks * virtualStages; }
  /// Virtual stage s runs on pipeline rank s % p (Megatron's interleaving:
  /// rank r holds chunks r, r+p, r+2p, ...).
  int64_t rankOf(int64_t stage) const { return stage % ranks; }
  /// Every action of every rank, one line each, for debugging.
  std::string str() const;
};

/// The schedule of `kind` for p ranks, m micro-batches and v virtual stages
/// per rank. v must be 1 unless `kind` is Interleaved, which needs v >= 2
/// and m a multiple of p (as in Megatron-LM); p, m >= 1. An error names the
/// flag values that break these rules.
///
/// GPipe runs every forward, then the backwards in micro-batch order (the
/// order their gradients come back in). 1F1B is PipeDream-flush as in
/// Megatron-LM: p - rank - 1 warm-up forwards, then one forward and one
/// backward in turn, then the remaining backwards. Interleaved is
/// Megatron-LM's interleaved 1F1B: micro-batches go through the model chunks
/// in blocks of p, with (p - rank - 1) * 2 + (v - 1) * p warm-up forwards
/// (all of them when m == p, as Megatron-LM does).
///
/// Each rank's computations come in steps: one computation each for GPipe
/// and 1F1B, and for interleaved Megatron's steps (a warm-up forward, a
/// steady forward-then-backward pair, a cool-down backward). Between two
/// steps the rank posts ONE group: the sends of what the step before
/// produced for other ranks and the receives of what the step after needs
/// from them (Megatron's send_forward_recv_backward,
/// send_backward_recv_forward and send_forward_backward_recv_forward_backward).
/// Posting transfers together never delays them under rendezvous semantics,
/// since each is posted no later than it would be alone. Grouping per step,
/// not per computation, matters for interleaved: rank p-1 feeds rank 0
/// (stage p-1 to p), the ranks form a ring, and groups between every two
/// computations deadlock (e.g. p=2, m=4, v=2) where Megatron's group of two
/// sends and two receives after each steady pair does not. checkSchedule()
/// proves each schedule built deadlock-free.
llvm::Expected<Schedule> buildSchedule(ScheduleKind kind, int64_t p, int64_t m, int64_t v = 1);

/// Proves `schedule` correct and deadlock-free, or returns a one-line error
/// naming the rank and action at fault:
///  - every (micro-batch, virtual stage) has exactly one Forward and one
///    Backward, on rank rankOf(stage);
///  - every value crossing ranks has exactly one Send on its producer and
///    one Recv on its consumer, and per ordered (src, dst) rank pair the
///    sends and receives match in FIFO order;
///  - Forward(mb, s) runs after the activation of (mb, s-1) is there (its
///    Recv, or Forward(mb, s-1) on the same rank); Backward(mb, s) after
///    Forward(mb, s) and the gradient of (mb, s+1); a Send after the
///    computation producing its value;
///  - under rendezvous semantics (a Send completes only once its Recv is
///    posted; a group completes once every action in it has its counterpart
///    posted) all ranks run to the end: a simulation where no rank can move
///    before all finish is a deadlock, reported with each blocked action.
llvm::Error checkSchedule(const Schedule &schedule);

} // namespace ppc::pipeline

#endif // PPC_PASSES_PIPELINE_SCHEDULE_H
