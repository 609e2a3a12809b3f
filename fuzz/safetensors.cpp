//===- safetensors.cpp - fuzz target: the safetensors reader --------------===//
//
// Checks the input as a safetensors file (SafetensorsFile::parse, what
// `open` runs on a file's bytes), then copies every tensor's bytes out of
// it as the weight and checkpoint loaders do: ASan sees the input's exact
// extent, so a view reaching past it is reported.
//
//===----------------------------------------------------------------------===//

#include "runtime/Safetensors.h"

#include <cstdint>
#include <cstring>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  auto file = ppcrt::SafetensorsFile::parse(
      llvm::MemoryBuffer::getMemBuffer(bytes, "fuzz.safetensors",
                                       /*RequiresNullTerminator=*/false),
      "fuzz.safetensors");
  if (!file) {
    llvm::consumeError(file.takeError());
    return 0;
  }
  for (const ppcrt::TensorView &tensor : file->tensors()) {
    auto view = file->lookup(tensor.name);
    if (!view) {
      llvm::consumeError(view.takeError());
      continue;
    }
    size_t elements = 1;
    for (int64_t dim : view->shape)
      elements *= size_t(dim);
    std::vector<char> copy(elements * ppcrt::dtypeBytes(view->dtype));
    if (!copy.empty())
      std::memcpy(copy.data(), view->data, copy.size());
  }
  return 0;
}
