//===- CheckpointLayout.h - reading a checkpoint on any mesh ------*- C++ -*-===//
//
// A version 3 checkpoint index says, besides each shard's digest, the mesh
// it was saved on and, per shard, the layout of every tensor it holds
// (runtime/Layout.h):
//
//   "mesh": {"axes": ["dp", "tp"], "shape": [2, 2]},
//   "files": [{"name": "rank-00000.safetensors", "bytes": N, "blake3": "...",
//              "tensors": {"state:exp_avg:wte.weight": {"dtype": "F32",
//                          "shape": [256, 32], "sharding": ["dp", ""],
//                          "blocks": [1, 1]}, ...}}, ...]
//
// with global shapes. That is all it takes to put any tensor's global value
// back together without the program that saved it, so a checkpoint resumes
// on another mesh, tensor-parallel layout, ZeRO stage or pipeline cut (the
// executable takes its own blocks of each global value), and `ppc
// checkpoint` consolidates or inspects one. As PyTorch's distributed
// checkpoints do, tensors are matched by name and global shape; the
// program's optimizer state is element-wise, so a global value means the
// same on every mesh.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CHECKPOINTLAYOUT_H
#define PPC_RUNTIME_CHECKPOINTLAYOUT_H

#include "runtime/CheckpointDir.h"
#include "runtime/Layout.h"
#include "runtime/Safetensors.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ppcrt {

/// The index's "mesh" and a "tensors" entry.
llvm::json::Object meshToJson(const MeshLayout &mesh);
llvm::json::Object blockToJson(DType dtype, const BlockLayout &layout);

/// One shard's block of a tensor.
struct SavedBlock {
  int64_t rank = 0;
  DType dtype = DType::F32;
  BlockLayout layout;
};

/// What a validated version 3 index says.
struct CheckpointLayout {
  /// The step directory.
  std::string path;
  int64_t step = 0;
  MeshLayout mesh;
  std::string fingerprint;
  std::string model;
  bool untie = false;
  /// Per rank, its shard's name and digest.
  std::vector<std::string> files;
  std::vector<FileDigest> digests;
  /// Every tensor's blocks, by key ("param:NAME", "state:KIND:NAME"), in
  /// rank order.
  std::map<std::string, std::vector<SavedBlock>> tensors;

  int64_t worldSize() const { return int64_t(files.size()); }
};

/// Validates `checkpoint`/index.json (already parsed as `index`) as
/// checkpointShard does, then its mesh and every tensor layout: axes the
/// mesh has, blocks that divide each dimension, element counts that fit,
/// one dtype and global shape per tensor. A version 1 or 2 index is an
/// error saying it records no layout.
llvm::Expected<CheckpointLayout> readCheckpointLayout(llvm::StringRef checkpoint, int64_t step,
                                                      const llvm::json::Object &index);

/// A tensor's whole value.
struct GlobalTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<char> data;
};

/// Puts global values together from a checkpoint's shards. Each shard is
/// verified against its digest, and its metadata (step, rank, fingerprint)
/// against the index, the first time a tensor needs it; shards holding only
/// copies of blocks already read are not opened.
class CheckpointReader {
public:
  explicit CheckpointReader(const CheckpointLayout &layout) : layout(layout) {}

  /// The global value of tensor `key`, or an error naming the shard or
  /// index at fault.
  llvm::Expected<GlobalTensor> read(llvm::StringRef key);

private:
  llvm::Expected<const SafetensorsFile *> shard(int64_t rank);

  const CheckpointLayout &layout;
  std::map<int64_t, std::unique_ptr<SafetensorsFile>> shards;
};

/// The block of `global` that the rank at `coordinates` holds under
/// `layout` on `mesh` (`layout.globalShape` must be `global.shape`).
std::vector<char> takeBlock(const GlobalTensor &global, const MeshLayout &mesh,
                            const BlockLayout &layout, const std::vector<int64_t> &coordinates);

} // namespace ppcrt

#endif // PPC_RUNTIME_CHECKPOINTLAYOUT_H
