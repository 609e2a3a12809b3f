//===- TokenData.h - the training data contract of DESIGN.md §4 --*- C++ -*-===//
//
// A data file is a flat array of token ids (u8, u16 or i32, little-endian),
// memory-mapped. With n tokens, global batch B and sequence T, global sample
// b of step s starts at o = ((s*B + b) * T) mod (n - T - 1): its inputs are
// tokens [o, o+T) and its labels [o+1, o+T+1).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_TOKENDATA_H
#define PPC_RUNTIME_TOKENDATA_H

#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>

namespace ppc {

class TokenData {
public:
  /// Maps `path` holding tokens of `dtype` ("u8", "u16" or "i32").
  static llvm::Expected<TokenData> open(llvm::StringRef path, llvm::StringRef dtype);

  int64_t size() const { return count; }
  int64_t token(int64_t i) const;

  /// The first token of global sample `sample` of step `step`.
  int64_t offset(int64_t step, int64_t globalBatch, int64_t seq, int64_t sample) const;
  /// Writes the `seq` input tokens and `seq` labels of that sample.
  void window(int64_t step, int64_t globalBatch, int64_t seq, int64_t sample, int64_t *inputs,
              int64_t *labels) const;
  /// Checks that windows of `seq` tokens fit (n >= seq + 2).
  llvm::Error checkSequence(int64_t seq) const;
  /// The file's bytes as mapped (or read), and its path.
  llvm::StringRef bytes() const { return buffer->getBuffer(); }
  const std::string &file() const { return path; }

private:
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  std::string path;
  int width = 1;
  bool isSigned = false;
  int64_t count = 0;
};

} // namespace ppc

#endif // PPC_RUNTIME_TOKENDATA_H
