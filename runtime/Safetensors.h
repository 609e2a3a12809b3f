//===- Safetensors.h - the safetensors file format ---------------*- C++
//-*-===//
//
// A safetensors file (https://github.com/huggingface/safetensors) is an
// 8-byte little-endian header length N, N bytes of JSON padded with spaces to
// a multiple of 8, then the tensor data:
//
//   {"__metadata__": {"key": "value"},
//    "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}
//
// with data offsets relative to the start of the data. Checkpoint shards and
// initial weights are both written in it so that PyTorch can read them.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_SAFETENSORS_H
#define PPC_RUNTIME_SAFETENSORS_H

#include "runtime/ppcrt/Program.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ppcrt {

/// A named tensor whose bytes live elsewhere (row-major, little-endian).
struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  /// Not owned. In a file it is not necessarily aligned for `dtype` (the
  /// format packs tensors without padding), so read it with memcpy.
  const void *data;
};

/// Writes `tensors` (in that order) and `metadata` to `path`, then fsyncs
/// the file. Fails with an error naming `path`.
llvm::Error writeSafetensors(llvm::StringRef path, llvm::ArrayRef<TensorView> tensors,
                             const std::map<std::string, std::string> &metadata);

/// A validated, memory-mapped safetensors file whose views point into the
/// mapping.
class SafetensorsFile {
public:
  /// Maps `path` and checks its header: every tensor's dtype is known, its
  /// shape non-negative, and its data offsets span exactly its bytes within
  /// the file.
  static llvm::Expected<SafetensorsFile> open(llvm::StringRef path);
  /// Checks `buffer` as open does the file's bytes; `path` names it in
  /// errors.
  static llvm::Expected<SafetensorsFile> parse(std::unique_ptr<llvm::MemoryBuffer> buffer,
                                               llvm::StringRef path);

  /// The tensor `name`, or an error naming the file and the tensor.
  llvm::Expected<TensorView> lookup(llvm::StringRef name) const;
  /// All tensors in file order (by data offset).
  llvm::ArrayRef<TensorView> tensors() const { return views; }
  /// The header's "__metadata__" strings.
  const std::map<std::string, std::string> &metadata() const { return meta; }

private:
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  std::string path;
  std::vector<TensorView> views;
  llvm::StringMap<size_t> byName;
  std::map<std::string, std::string> meta;
};

} // namespace ppcrt

#endif // PPC_RUNTIME_SAFETENSORS_H
