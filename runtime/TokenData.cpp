//===- TokenData.cpp - the training data contract of DESIGN.md §4 ---------===//

#include "runtime/TokenData.h"
#include "runtime/RegularFile.h"

#include <cstring>

namespace ppc {

static llvm::Error dataError(llvm::StringRef path, const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "data file '" + path + "': " + message);
}

llvm::Expected<TokenData> TokenData::open(llvm::StringRef path, llvm::StringRef dtype) {
  TokenData data;
  if (dtype == "u8")
    data.width = 1;
  else if (dtype == "u16")
    data.width = 2;
  else if (dtype == "i32")
    data.width = 4, data.isSigned = true;
  else
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--data-dtype '" + dtype + "': expected u8, u16 or i32");
  auto buffer = readRegularFile(path);
  if (!buffer)
    return dataError(path, llvm::toString(buffer.takeError()));
  size_t bytes = (*buffer)->getBufferSize();
  if (bytes % data.width != 0)
    return dataError(path,
                     llvm::Twine(bytes) + " bytes is not a whole number of " + dtype + " tokens");
  data.buffer = std::move(*buffer);
  data.path = path.str();
  data.count = bytes / data.width;
  return data;
}

int64_t TokenData::token(int64_t i) const {
  const char *p = buffer->getBufferStart() + i * width;
  switch (width) {
  case 1:
    return static_cast<uint8_t>(*p);
  case 2: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  default: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  }
}

llvm::Error TokenData::checkSequence(int64_t seq) const {
  if (count < seq + 2)
    return dataError(path, "holds " + llvm::Twine(count) + " tokens; windows of " +
                               llvm::Twine(seq) + " need at least " + llvm::Twine(seq + 2));
  return llvm::Error::success();
}

int64_t TokenData::offset(int64_t step, int64_t globalBatch, int64_t seq, int64_t sample) const {
  // Unsigned arithmetic: (s*B + b) * T grows past 2^63 only after ~1e18 tokens.
  uint64_t start = (static_cast<uint64_t>(step) * globalBatch + sample) * seq;
  return static_cast<int64_t>(start % static_cast<uint64_t>(count - seq - 1));
}

void TokenData::window(int64_t step, int64_t globalBatch, int64_t seq, int64_t sample,
                       int64_t *inputs, int64_t *labels) const {
  int64_t o = offset(step, globalBatch, seq, sample);
  for (int64_t i = 0; i < seq; ++i) {
    inputs[i] = token(o + i);
    labels[i] = token(o + i + 1);
  }
}

} // namespace ppc
