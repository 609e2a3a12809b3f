//===- Export.cpp - trained weights back into the ONNX model --------------===//
//
// Each rank holds blocks of its stage's parameters; the full value of a
// parameter is put together from the blocks of every rank that holds one
// (ranks at the same block hold copies), then runtime/TrainedModel.h writes
// it over the model's initializer of that name.
//
//===----------------------------------------------------------------------===//

#include "runtime/ppcrt/Export.h"
#include "runtime/CheckpointDir.h"
#include "runtime/Safetensors.h"
#include "runtime/TrainedModel.h"
#include "runtime/ppcrt/Blocks.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Path.h"

#include <cstring>
#include <map>
#include <vector>

namespace ppcrt {

llvm::Error exportOnnx(const Program &program, const std::string &shardDir, int worldSize,
                       const std::string &path) {
  // Every parameter's full value, in the program's element type.
  std::map<std::string, GlobalTensor> params;
  for (int r = 0; r < worldSize; ++r) {
    std::vector<int64_t> coords = meshCoordinates(program, r);
    int64_t pp = coordinateOn(program, coords, "pp");
    const RankProgram &rp = program.programs[program.numPrograms == 1 ? 0 : pp];
    llvm::SmallString<256> file(shardDir);
    llvm::sys::path::append(file, shardFileName(r));
    auto shard = SafetensorsFile::open(file);
    if (!shard)
      return shard.takeError();
    for (int i = 0; i < rp.numArgs; ++i) {
      const TensorInfo &t = rp.args[i];
      llvm::StringRef key = t.key;
      if (!key.starts_with(kParamKey))
        continue;
      auto local = shard->lookup(key);
      if (!local)
        return local.takeError();
      GlobalTensor &full = params[key.drop_front(kParamKey.size()).str()];
      if (full.data.empty()) {
        int64_t elements = 1;
        for (int d = 0; d < t.rank; ++d)
          elements *= t.globalShape[d];
        full.dtype = t.dtype;
        full.shape.assign(t.globalShape, t.globalShape + t.rank);
        full.data.assign(elements * dtypeBytes(t.dtype), 0);
      }
      size_t bytes = dtypeBytes(t.dtype);
      const char *from = static_cast<const char *>(local->data);
      char *to = full.data.data();
      forEachBlockElement(program, t, coords, [&](int64_t l, int64_t g) {
        std::memcpy(to + g * bytes, from + l * bytes, bytes);
      });
    }
  }

  return writeTrainedModel(program.model, program.untie, params, path, "--export");
}

} // namespace ppcrt
