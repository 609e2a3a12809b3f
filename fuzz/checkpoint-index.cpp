//===- checkpoint-index.cpp - fuzz target: a checkpoint's index.json ------===//
//
// Parses the input as a checkpoint's index.json and validates it as a
// resuming rank does (checkpointShards, then readCheckpointLayout's mesh
// and tensor layouts). For each tensor a valid index describes, every
// block's runs are then copied between buffers of the sizes the reader
// allocates (CheckpointReader::read, takeBlock), so a layout that passes
// validation but maps an element outside its tensor is reported by ASan.
//
//===----------------------------------------------------------------------===//

#include "runtime/CheckpointLayout.h"

#include <cstdint>
#include <cstring>
#include <vector>

/// Global values larger than this are not materialized (the fuzzer's
/// memory limit, not ppc's).
static constexpr int64_t kMaxGlobalBytes = int64_t(1) << 20;

static int64_t product(const std::vector<int64_t> &values) {
  int64_t p = 1;
  for (int64_t v : values)
    p *= v;
  return p;
}

/// Copies every block of every tensor of `layout` out of its global value.
static void copyBlocks(const ppcrt::CheckpointLayout &layout) {
  for (const auto &[key, blocks] : layout.tensors) {
    for (const ppcrt::SavedBlock &block : blocks) {
      int64_t bytes = ppcrt::dtypeBytes(block.dtype);
      // Validation checked that the global size does not overflow.
      if (product(block.layout.globalShape) * bytes > kMaxGlobalBytes)
        continue;
      std::vector<char> global(size_t(product(block.layout.globalShape) * bytes));
      std::vector<char> local(size_t(product(block.layout.shape) * bytes));
      ppcrt::forEachBlockRun(layout.mesh, block.layout, layout.mesh.coordinates(block.rank),
                             [&](int64_t l, int64_t g, int64_t count) {
                               std::memcpy(local.data() + l * bytes, global.data() + g * bytes,
                                           size_t(count * bytes));
                             });
    }
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  auto value = llvm::json::parse(bytes);
  if (!value) {
    llvm::consumeError(value.takeError());
    return 0;
  }
  const llvm::json::Object *index = value->getAsObject();
  if (!index)
    return 0;
  // The directory is named for the index's own step, so that inputs get past
  // that comparison to the rest.
  int64_t step = index->getInteger("step").value_or(0);
  std::string checkpoint = ppcrt::checkpointPath("fuzz", step);
  auto shards = ppcrt::checkpointShards(checkpoint, step, *index);
  if (!shards) {
    llvm::consumeError(shards.takeError());
    return 0;
  }
  auto layout = ppcrt::readCheckpointLayout(checkpoint, step, *index);
  if (!layout) {
    llvm::consumeError(layout.takeError());
    return 0;
  }
  copyBlocks(*layout);
  return 0;
}
