//===- CheckpointLayout.cpp - reading a checkpoint on any mesh ------------===//

#include "runtime/CheckpointLayout.h"
#include "runtime/CheckedSize.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"

#include <cstring>
#include <set>

namespace ppcrt {

namespace {

std::string join(llvm::StringRef dir, llvm::StringRef name) {
  llvm::SmallString<128> path(dir);
  llvm::sys::path::append(path, name);
  return std::string(path);
}

llvm::json::Array integers(const std::vector<int64_t> &values) {
  llvm::json::Array array;
  for (int64_t v : values)
    array.push_back(v);
  return array;
}

/// `value` as a list of integers no smaller than `least`, or none.
std::optional<std::vector<int64_t>> readIntegers(const llvm::json::Value *value, int64_t least) {
  const llvm::json::Array *array = value ? value->getAsArray() : nullptr;
  if (!array)
    return std::nullopt;
  std::vector<int64_t> values;
  for (const llvm::json::Value &v : *array) {
    std::optional<int64_t> i = v.getAsInteger();
    if (!i || *i < least)
      return std::nullopt;
    values.push_back(*i);
  }
  return values;
}

std::optional<std::vector<std::string>> readStrings(const llvm::json::Value *value) {
  const llvm::json::Array *array = value ? value->getAsArray() : nullptr;
  if (!array)
    return std::nullopt;
  std::vector<std::string> values;
  for (const llvm::json::Value &v : *array) {
    std::optional<llvm::StringRef> s = v.getAsString();
    if (!s)
      return std::nullopt;
    values.push_back(s->str());
  }
  return values;
}

/// The bytes of a tensor of `shape` and `dtype`, or none when they
/// overflow an int64 (runtime/CheckedSize.h counts the elements).
std::optional<int64_t> bytesOf(const std::vector<int64_t> &shape, DType dtype) {
  std::optional<int64_t> elements = ppc::checkedElementCount(shape);
  int64_t bytes = 0;
  if (!elements || llvm::MulOverflow(*elements, int64_t(dtypeBytes(dtype)), bytes))
    return std::nullopt;
  return bytes;
}

} // namespace

llvm::json::Object meshToJson(const MeshLayout &mesh) {
  llvm::json::Array axes;
  for (const std::string &axis : mesh.axes)
    axes.push_back(axis);
  return llvm::json::Object{{"axes", std::move(axes)}, {"shape", integers(mesh.shape)}};
}

llvm::json::Object blockToJson(DType dtype, const BlockLayout &layout) {
  llvm::json::Array sharding;
  for (const std::string &axes : layout.sharding)
    sharding.push_back(axes);
  return llvm::json::Object{{"dtype", safetensorsName(dtype)},
                            {"shape", integers(layout.globalShape)},
                            {"sharding", std::move(sharding)},
                            {"blocks", integers(layout.blocks)}};
}

llvm::Expected<CheckpointLayout> readCheckpointLayout(llvm::StringRef checkpoint, int64_t step,
                                                      const llvm::json::Object &index) {
  auto shards = checkpointShards(checkpoint, step, index);
  if (!shards)
    return shards.takeError();
  std::string path = join(checkpoint, "index.json");
  auto bad = [&](const llvm::Twine &message) {
    return llvm::createStringError("checkpoint index '" + path + "': " + message);
  };
  int64_t version = *index.getInteger("version");
  if (version < 3)
    return bad("version " + llvm::Twine(version) +
               " records no tensor layouts (written by an older ppc), so it resumes only on "
               "the mesh and program that saved it");

  CheckpointLayout layout;
  layout.path = checkpoint.str();
  layout.step = step;
  layout.fingerprint = index.getString("fingerprint").value_or("").str();
  layout.model = index.getString("model").value_or("").str();
  layout.untie = index.getBoolean("untie").value_or(false);
  const llvm::json::Object *mesh = index.getObject("mesh");
  auto axes = readStrings(mesh ? mesh->get("axes") : nullptr);
  auto shape = readIntegers(mesh ? mesh->get("shape") : nullptr, 1);
  std::optional<int64_t> ranks = shape ? ppc::checkedElementCount(*shape) : std::nullopt;
  std::set<std::string> distinct;
  if (axes)
    distinct.insert(axes->begin(), axes->end());
  if (!axes || !shape || axes->size() != shape->size() || distinct.size() != axes->size() ||
      distinct.count("") || !ranks || *ranks != int64_t(shards->size()))
    return bad("\"mesh\" is not {\"axes\": [distinct names], \"shape\": [sizes]} of " +
               llvm::Twine(shards->size()) + " ranks");
  layout.mesh = {*axes, *shape};

  const llvm::json::Array &files = *index.getArray("files");
  for (int64_t r = 0; r < int64_t(shards->size()); ++r) {
    const CheckpointShard &shard = (*shards)[size_t(r)];
    layout.files.push_back(shard.file);
    layout.digests.push_back(*shard.digest);
    const llvm::json::Object *tensors = files[size_t(r)].getAsObject()->getObject("tensors");
    if (!tensors)
      return bad("\"files\"[" + llvm::Twine(r) + "] has no \"tensors\" object");
    int64_t shardBytes = 0;
    for (const auto &[key, value] : *tensors) {
      auto field = [&](const llvm::Twine &what) {
        return bad("\"files\"[" + llvm::Twine(r) + "].tensors[\"" + key.str() + "\"]: " + what);
      };
      const llvm::json::Object *entry = value.getAsObject();
      if (!entry)
        return field("not an object");
      SavedBlock block;
      block.rank = r;
      std::optional<llvm::StringRef> dtypeName = entry->getString("dtype");
      std::optional<DType> dtype = dtypeName ? dtypeFromSafetensorsName(*dtypeName) : std::nullopt;
      if (!dtype)
        return field("\"dtype\" is not a safetensors element type");
      block.dtype = *dtype;
      auto global = readIntegers(entry->get("shape"), 0);
      auto sharding = readStrings(entry->get("sharding"));
      auto blocks = readIntegers(entry->get("blocks"), 1);
      if (!global || global->size() > size_t(kMaxRank) || !sharding || !blocks ||
          sharding->size() != global->size() || blocks->size() != global->size())
        return field("\"shape\", \"sharding\" and \"blocks\" are not lists of one length, at "
                     "most " +
                     llvm::Twine(kMaxRank));
      if (!bytesOf(*global, *dtype))
        return field("its size overflows");
      block.layout.globalShape = *global;
      block.layout.sharding = *sharding;
      block.layout.blocks = *blocks;
      // Every axis named must be the mesh's, each once in the whole tensor,
      // so a tensor has at most as many blocks as the mesh has ranks.
      std::set<int> used;
      for (size_t d = 0; d < global->size(); ++d) {
        const std::string &split = (*sharding)[d];
        std::vector<int> indices = layout.mesh.axisIndices(split);
        size_t named = split.empty() ? 0 : size_t(llvm::count(split, ',')) + 1;
        size_t before = used.size();
        used.insert(indices.begin(), indices.end());
        if (indices.size() != named || used.size() != before + named)
          return field("dimension " + llvm::Twine(d) + " is split over '" + split +
                       "', which are not axes of the mesh that no other dimension uses");
        // blocks <= the dimension keeps parts from overflowing and every
        // block part non-empty.
        int64_t parts = 0;
        if ((*blocks)[d] > std::max<int64_t>((*global)[d], 1) ||
            llvm::MulOverflow(layout.mesh.blockCount(split), (*blocks)[d], parts) ||
            (*global)[d] % parts != 0)
          return field("dimension " + llvm::Twine(d) + " (" + llvm::Twine((*global)[d]) +
                       ") does not split into " + llvm::Twine((*blocks)[d]) + " blocks over '" +
                       split + "'");
        block.layout.shape.push_back((*global)[d] / layout.mesh.blockCount(split));
      }
      // A shard holds its blocks in its own bytes: the index cannot claim
      // more (so no global value read later can be absurdly large).
      int64_t localBytes = *bytesOf(block.layout.shape, *dtype);
      if (llvm::AddOverflow(shardBytes, localBytes, shardBytes) || shardBytes > shard.digest->bytes)
        return field("its blocks hold more bytes than the shard (" +
                     llvm::Twine(shard.digest->bytes) + ")");
      std::vector<SavedBlock> &blocksOfKey = layout.tensors[key.str()];
      if (!blocksOfKey.empty() && (blocksOfKey.front().dtype != block.dtype ||
                                   blocksOfKey.front().layout.globalShape != *global))
        return field("its dtype or shape differs from rank " +
                     llvm::Twine(blocksOfKey.front().rank) + "'s");
      blocksOfKey.push_back(std::move(block));
    }
  }
  return layout;
}

llvm::Expected<const SafetensorsFile *> CheckpointReader::shard(int64_t rank) {
  auto found = shards.find(rank);
  if (found != shards.end())
    return found->second.get();
  std::string path = join(layout.path, layout.files[size_t(rank)]);
  if (llvm::Error e = verifyShard(path, layout.digests[size_t(rank)]))
    return std::move(e);
  auto file = SafetensorsFile::open(path);
  if (!file)
    return file.takeError();
  // What the shard says of itself must be what the index says of it.
  for (auto [key, want] :
       {std::pair<const char *, std::string>{"step", std::to_string(layout.step)},
        {"rank", std::to_string(rank)},
        {"fingerprint", layout.fingerprint}}) {
    auto it = file->metadata().find(key);
    if (it == file->metadata().end() || it->second != want)
      return llvm::createStringError("checkpoint shard '" + path + "': its metadata " + key +
                                     " is not the index's (a shard of another " + key +
                                     " put in this checkpoint)");
  }
  auto owned = std::make_unique<SafetensorsFile>(std::move(*file));
  const SafetensorsFile *pointer = owned.get();
  shards[rank] = std::move(owned);
  return pointer;
}

llvm::Expected<GlobalTensor> CheckpointReader::read(llvm::StringRef key) {
  auto found = layout.tensors.find(key.str());
  if (found == layout.tensors.end())
    return llvm::createStringError("checkpoint '" + layout.path + "' holds no tensor '" + key +
                                   "'");
  // Ranks of different pipeline stages may hold one tensor (a tied
  // embedding) in different layouts: the blocks of one layout are put
  // together, from the first layout whose blocks are all there.
  std::vector<std::vector<const SavedBlock *>> layouts;
  for (const SavedBlock &block : found->second) {
    auto same = llvm::find_if(layouts, [&](const std::vector<const SavedBlock *> &group) {
      return group.front()->layout.sharding == block.layout.sharding &&
             group.front()->layout.blocks == block.layout.blocks;
    });
    if (same == layouts.end())
      layouts.push_back({&block});
    else
      same->push_back(&block);
  }
  size_t most = 0, needed = 0;
  for (const std::vector<const SavedBlock *> &group : layouts) {
    // Each distinct block once, from the lowest rank holding it (ranks at
    // the same block hold copies).
    std::map<std::vector<int64_t>, const SavedBlock *> distinct;
    for (const SavedBlock *block : group) {
      std::vector<int64_t> coordinates = layout.mesh.coordinates(block->rank);
      std::vector<int64_t> which;
      for (const std::string &split : block->layout.sharding)
        which.push_back(layout.mesh.blockIndex(coordinates, split));
      distinct.try_emplace(which, block);
    }
    size_t count = 1;
    for (const std::string &split : group.front()->layout.sharding)
      count *= size_t(layout.mesh.blockCount(split));
    if (distinct.size() != count) {
      if (distinct.size() >= most)
        std::tie(most, needed) = std::pair(distinct.size(), count);
      continue;
    }
    GlobalTensor global;
    global.dtype = group.front()->dtype;
    global.shape = group.front()->layout.globalShape;
    size_t bytes = dtypeBytes(global.dtype);
    global.data.assign(size_t(*bytesOf(global.shape, global.dtype)), 0);
    for (const auto &[which, block] : distinct) {
      auto file = shard(block->rank);
      if (!file)
        return file.takeError();
      auto local = (*file)->lookup(key);
      if (!local)
        return local.takeError();
      if (local->dtype != block->dtype || local->shape != block->layout.shape)
        return llvm::createStringError("checkpoint shard '" +
                                       join(layout.path, layout.files[size_t(block->rank)]) +
                                       "': tensor '" + key + "' is not the " +
                                       safetensorsName(block->dtype) + " block the index says");
      const char *from = static_cast<const char *>(local->data);
      char *to = global.data.data();
      forEachBlockRun(layout.mesh, block->layout, layout.mesh.coordinates(block->rank),
                      [&](int64_t l, int64_t g, int64_t count) {
                        std::memcpy(to + g * bytes, from + l * bytes, size_t(count) * bytes);
                      });
    }
    return global;
  }
  return llvm::createStringError(
      llvm::formatv("checkpoint index '{0}': tensor '{1}' is held in {2} of its {3} blocks",
                    join(layout.path, "index.json"), key, most, needed)
          .str());
}

std::vector<char> takeBlock(const GlobalTensor &global, const MeshLayout &mesh,
                            const BlockLayout &layout, const std::vector<int64_t> &coordinates) {
  size_t bytes = dtypeBytes(global.dtype);
  int64_t elements = 1;
  for (int64_t s : layout.shape)
    elements *= s;
  std::vector<char> local(size_t(elements) * bytes);
  forEachBlockRun(mesh, layout, coordinates, [&](int64_t l, int64_t g, int64_t count) {
    std::memcpy(local.data() + l * bytes, global.data.data() + g * bytes, count * bytes);
  });
  return local;
}

} // namespace ppcrt
