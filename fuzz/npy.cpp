//===- npy.cpp - fuzz target: the .npy reader -----------------------------===//
//
// Parses the input as a .npy file. What parses must write back out and
// parse again to the same dtype and shape (numpy has no bfloat16, which is
// written as f32).
//
//===----------------------------------------------------------------------===//

#include "executor/Npy.h"

#include "llvm/Support/ErrorHandling.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  auto tensor = ppc::parseNpy(bytes, "fuzz.npy");
  if (!tensor) {
    llvm::consumeError(tensor.takeError());
    return 0;
  }
  auto again = ppc::parseNpy(ppc::formatNpy(*tensor), "formatted.npy");
  if (!again)
    llvm::report_fatal_error("fuzz-npy: formatNpy's output does not parse: " +
                             llvm::Twine(llvm::toString(again.takeError())));
  if (again->shape() != tensor->shape())
    llvm::report_fatal_error("fuzz-npy: formatNpy changed the shape");
  return 0;
}
