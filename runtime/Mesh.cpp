//===- Mesh.cpp - the data x tensor x pipeline mesh of DESIGN.md §3 -------===//

#include "runtime/Mesh.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace ppc {

llvm::Expected<Mesh> parseMesh(llvm::StringRef text) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "--mesh '" + text + "': " + why);
  };
  Mesh mesh;
  auto parseSize = [](llvm::StringRef s, int64_t &out) {
    return !s.trim().getAsInteger(10, out) && out >= 1;
  };
  if (text.contains('=')) {
    llvm::SmallVector<llvm::StringRef> parts;
    text.split(parts, ',');
    bool seen[3] = {false, false, false};
    for (llvm::StringRef part : parts) {
      auto [axis, size] = part.split('=');
      axis = axis.trim();
      int index = axis == "dp" ? 0 : axis == "tp" ? 1 : axis == "pp" ? 2 : -1;
      if (index < 0)
        return fail("unknown axis '" + axis + "' (expected dp, tp or pp)");
      if (seen[index])
        return fail("axis '" + axis + "' given twice");
      seen[index] = true;
      int64_t *target = index == 0 ? &mesh.dp : index == 1 ? &mesh.tp : &mesh.pp;
      if (!parseSize(size, *target))
        return fail("size of '" + axis + "' must be a positive integer");
    }
    return mesh;
  }
  llvm::SmallVector<llvm::StringRef> sizes;
  text.split(sizes, 'x');
  if (sizes.empty() || sizes.size() > 3)
    return fail("expected AxBxC (data x tensor x pipeline) or dp=A,tp=B,pp=C");
  int64_t *targets[] = {&mesh.dp, &mesh.tp, &mesh.pp};
  for (auto [i, size] : llvm::enumerate(sizes))
    if (!parseSize(size, *targets[i]))
      return fail("'" + size + "' is not a positive integer");
  return mesh;
}

} // namespace ppc
