//===- CheckpointDir.h - atomic checkpoint directories -----------*- C++
//-*-===//
//
// A checkpoint of step S in directory D is D/step-SSSSSSSS holding one
// safetensors shard per rank and an index.json. It is written as:
//
//   rank 0:     prepareStaging(D, S)             creates D/.staging-step-S
//   all ranks:  barrier; write and fsync shardFileName(rank) into it; barrier
//   rank 0:     commitCheckpoint(D, S, index)    renames it to D/step-S
//
// The rename is the commit point: a crash before it leaves no step-S
// directory, after it a complete one, so readers only ever trust step
// directories with an index.json.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CHECKPOINTDIR_H
#define PPC_RUNTIME_CHECKPOINTDIR_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace ppcrt {

/// D/step-00000123 (8 digits).
std::string checkpointPath(llvm::StringRef dir, int64_t step);

/// D/.staging-step-00000123: where every rank writes step `step` before the
/// commit.
std::string stagingPath(llvm::StringRef dir, int64_t step);

/// Creates (with parents) the staging directory D/.staging-step-00000123 that
/// every rank writes step `step` into before the commit, and returns it. A
/// stale one left by an earlier crash at the same step is removed first, so
/// calling it again starts the step afresh.
llvm::Expected<std::string> prepareStaging(llvm::StringRef dir, int64_t step);

/// "rank-00003.safetensors".
std::string shardFileName(int64_t rank);

/// Commits step `step` once every rank has written and fsynced its shard
/// into the staging directory: writes `index` there as index.json, fsyncs it
/// and the staging directory, renames that to checkpointPath(dir, step)
/// (failing if that exists) and fsyncs `dir`. Rank 0 only.
llvm::Error commitCheckpoint(llvm::StringRef dir, int64_t step,
                             const llvm::json::Object &index);

/// The step and path of the newest complete checkpoint in `dir`: the
/// step-NNNNNNNN directory with the largest step whose index.json parses.
/// None when there is none, also when `dir` does not exist.
llvm::Expected<std::optional<std::pair<int64_t, std::string>>>
findLatestCheckpoint(llvm::StringRef dir);

/// Reads and parses `checkpoint`/index.json.
llvm::Expected<llvm::json::Object>
readCheckpointIndex(llvm::StringRef checkpoint);

/// Keeps the newest `keep` complete checkpoints in `dir` and removes older
/// complete ones; `keep` <= 0 keeps all. Incomplete step directories and
/// staging directories are left alone.
llvm::Error pruneCheckpoints(llvm::StringRef dir, int keep);

} // namespace ppcrt

#endif // PPC_RUNTIME_CHECKPOINTDIR_H
