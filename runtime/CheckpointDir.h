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
// The index (version 2 and later) names every shard with its size and BLAKE3 digest
// (the whole file: header and data), so a reader detects a flipped bit, a
// truncated or extended file and a shard from another step or rank before it
// trusts a byte. BLAKE3 because it is a cryptographic hash (no crafted
// collision is known) that runs at memory speed, in LLVM's Support library
// already; SHA-256 would have cost ~5 s per GB of optimizer state on one core.
// A step directory with an index.json that does not parse or validate is an
// error naming it, never skipped: falling back silently would resume from an
// older step. Only one with no index.json (a prune stopped midway) is
// skipped, and the reader is told.
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
#include <vector>

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
/// (failing if a complete one exists; an incomplete one is replaced) and
/// fsyncs `dir`. Rank 0 only.
llvm::Error commitCheckpoint(llvm::StringRef dir, int64_t step, const llvm::json::Object &index);

/// The step and path of the newest complete checkpoint in `dir`: the
/// step-NNNNNNNN directory with the largest step that has an index.json.
/// None when there is none, also when `dir` does not exist. Newer step
/// directories without one are appended to `skipped` when given.
llvm::Expected<std::optional<std::pair<int64_t, std::string>>>
findLatestCheckpoint(llvm::StringRef dir, std::vector<std::string> *skipped = nullptr);

/// Reads and parses `checkpoint`/index.json.
llvm::Expected<llvm::json::Object> readCheckpointIndex(llvm::StringRef checkpoint);

/// A file's size and BLAKE3 digest (64 lowercase hex digits).
struct FileDigest {
  int64_t bytes = 0;
  std::string blake3;
};

/// Digests the file at `path` (a regular file), or an error naming it.
llvm::Expected<FileDigest> digestFile(llvm::StringRef path);

/// What a rank needs from a validated index: the step, the ranks, and its
/// shard's name and digest (none for a version 1 index, which had none).
struct CheckpointShard {
  int64_t step = 0;
  int64_t worldSize = 0;
  std::string file;
  std::optional<FileDigest> digest;
};

/// The index version this ppc writes (3: with the mesh and every tensor's
/// layout, runtime/CheckpointLayout.h); it reads 1 to 3.
constexpr int64_t kCheckpointVersion = 3;

/// Validates `checkpoint`/index.json (format, version, its step against the
/// directory's name `step`, one file entry per rank with size and digest)
/// and returns every rank's shard, or an error naming the index and field.
llvm::Expected<std::vector<CheckpointShard>>
checkpointShards(llvm::StringRef checkpoint, int64_t step, const llvm::json::Object &index);

/// Checks the shard file `path` against `digest`: its size, then its
/// BLAKE3 digest; the error names the file.
llvm::Error verifyShard(llvm::StringRef path, const FileDigest &digest);

/// Keeps the newest `keep` complete checkpoints in `dir` and removes older
/// complete ones, and the incomplete step directories (no index.json: left by
/// a prune that stopped midway) older than the newest complete one; `keep`
/// <= 0 keeps all. Staging directories are left alone.
llvm::Error pruneCheckpoints(llvm::StringRef dir, int keep);

} // namespace ppcrt

#endif // PPC_RUNTIME_CHECKPOINTDIR_H
