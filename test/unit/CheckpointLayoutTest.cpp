//===- CheckpointLayoutTest.cpp - reading a checkpoint on any mesh --------===//
//
// Blocks of a tensor against a direct formula, and a checkpoint split on
// one mesh put together and split again on another, through files.
//
//===----------------------------------------------------------------------===//

#include "runtime/CheckpointLayout.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <numeric>

using namespace ppcrt;

namespace {

/// The global index of every element of a rank's block, element by element
/// (the formula of runtime/Layout.h, written out independently).
std::vector<int64_t> blockByFormula(const MeshLayout &mesh, const BlockLayout &t,
                                    const std::vector<int64_t> &coordinates) {
  int64_t total = 1;
  for (int64_t s : t.shape)
    total *= s;
  std::vector<int64_t> globals;
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat, global = 0, stride = 1;
    std::vector<int64_t> local(t.shape.size());
    for (int d = int(t.shape.size()) - 1; d >= 0; --d) {
      local[d] = rest % t.shape[d];
      rest /= t.shape[d];
    }
    for (int d = int(t.shape.size()) - 1; d >= 0; --d) {
      int64_t perGlobal = t.globalShape[d] / t.blocks[d];
      int64_t perLocal = t.shape[d] / t.blocks[d];
      int64_t index = mesh.blockIndex(coordinates, t.sharding[d]);
      int64_t g = (local[d] / perLocal) * perGlobal + index * perLocal + local[d] % perLocal;
      global += g * stride;
      stride *= t.globalShape[d];
    }
    globals.push_back(global);
  }
  return globals;
}

/// The size of rank `rank`'s shard in step directory `dir`.
int64_t layoutBytes(const std::string &dir, int64_t rank) {
  uint64_t size = 0;
  llvm::sys::fs::file_size(dir + "/" + shardFileName(rank), size);
  return int64_t(size);
}

BlockLayout layoutOn(const MeshLayout &mesh, std::vector<int64_t> global,
                     std::vector<std::string> sharding, std::vector<int64_t> blocks) {
  BlockLayout t;
  t.globalShape = global;
  t.sharding = sharding;
  t.blocks = blocks;
  for (size_t d = 0; d < global.size(); ++d)
    t.shape.push_back(global[d] / mesh.blockCount(sharding[d]));
  return t;
}

TEST(Layout, RunsCoverTheFormula) {
  MeshLayout mesh{{"pp", "dp", "tp"}, {2, 2, 3}};
  std::vector<BlockLayout> layouts = {
      layoutOn(mesh, {12, 6}, {"tp", ""}, {1, 1}),
      layoutOn(mesh, {18, 4}, {"tp", ""}, {3, 1}), // a fused QKV
      layoutOn(mesh, {4, 12}, {"dp", "tp"}, {1, 2}),
      layoutOn(mesh, {24}, {"dp,tp"}, {1}), // ZeRO over dp and tp
      layoutOn(mesh, {2, 3, 6}, {"", "tp", "dp"}, {1, 1, 1}),
      layoutOn(mesh, {}, {}, {}),
  };
  for (const BlockLayout &t : layouts)
    for (int64_t rank = 0; rank < mesh.size(); ++rank) {
      std::vector<int64_t> coordinates = mesh.coordinates(rank);
      EXPECT_EQ(mesh.rankAt(coordinates), rank);
      std::vector<int64_t> byRuns;
      int64_t expectLocal = 0;
      forEachBlockRun(mesh, t, coordinates, [&](int64_t local, int64_t global, int64_t count) {
        EXPECT_EQ(local, expectLocal);
        expectLocal += count;
        for (int64_t i = 0; i < count; ++i)
          byRuns.push_back(global + i);
      });
      EXPECT_EQ(byRuns, blockByFormula(mesh, t, coordinates));
    }
  EXPECT_EQ(mesh.describe(), "pp=2 dp=2 tp=3");
  EXPECT_EQ((MeshLayout{{"dp", "tp"}, {1, 1}}).describe(), "one rank");
}

class Reshard : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("ppc-reshard", root)); }
  void TearDown() override { llvm::sys::fs::remove_directories(root); }

  /// Saves `values` (global, by key) split per `layouts` on `mesh` as a
  /// step directory of step 3, returning it and its parsed index.
  std::pair<std::string, llvm::json::Object>
  save(const MeshLayout &mesh, const std::map<std::string, BlockLayout> &layouts,
       const std::map<std::string, std::vector<float>> &values) {
    llvm::SmallString<128> dir(root);
    llvm::sys::path::append(dir, "step-00000003");
    EXPECT_FALSE(llvm::sys::fs::create_directories(dir));
    llvm::json::Array files;
    for (int64_t rank = 0; rank < mesh.size(); ++rank) {
      std::vector<std::vector<float>> blocks;
      std::vector<TensorView> views;
      llvm::json::Object tensors;
      blocks.reserve(layouts.size());
      for (const auto &[key, layout] : layouts) {
        const std::vector<float> &global = values.at(key);
        GlobalTensor whole{DType::F32, layout.globalShape,
                           std::vector<char>(reinterpret_cast<const char *>(global.data()),
                                             reinterpret_cast<const char *>(global.data()) +
                                                 global.size() * sizeof(float))};
        std::vector<char> local = takeBlock(whole, mesh, layout, mesh.coordinates(rank));
        blocks.emplace_back(local.size() / sizeof(float));
        std::memcpy(blocks.back().data(), local.data(), local.size());
        views.push_back({key, DType::F32, layout.shape, blocks.back().data()});
        tensors[key] = blockToJson(DType::F32, layout);
      }
      llvm::SmallString<128> file(dir);
      llvm::sys::path::append(file, shardFileName(rank));
      EXPECT_EQ(
          llvm::toString(writeSafetensors(
              file, views, {{"step", "3"}, {"rank", std::to_string(rank)}, {"fingerprint", "f"}})),
          "");
      auto digest = digestFile(file);
      EXPECT_TRUE(static_cast<bool>(digest));
      files.push_back(llvm::json::Object{{"name", shardFileName(rank)},
                                         {"bytes", digest->bytes},
                                         {"blake3", digest->blake3},
                                         {"tensors", std::move(tensors)}});
    }
    llvm::json::Object index{{"format", "ppc-checkpoint"},
                             {"version", 3},
                             {"step", 3},
                             {"fingerprint", "f"},
                             {"world_size", mesh.size()},
                             {"mesh", meshToJson(mesh)},
                             {"files", std::move(files)}};
    return {std::string(dir), std::move(index)};
  }

  llvm::SmallString<128> root;
};

TEST_F(Reshard, SplitOnOneMeshTakenOnAnother) {
  MeshLayout from{{"pp", "dp", "tp"}, {1, 2, 2}};
  std::map<std::string, BlockLayout> layouts{
      {"param:qkv", layoutOn(from, {12, 4}, {"tp", ""}, {3, 1})},
      {"state:m:qkv", layoutOn(from, {12, 4}, {"dp", ""}, {1, 1})},
      {"param:bias", layoutOn(from, {8}, {""}, {1})}};
  std::map<std::string, std::vector<float>> values;
  for (const auto &[key, layout] : layouts) {
    int64_t n = 1;
    for (int64_t d : layout.globalShape)
      n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), float(key.size() * 100));
    values[key] = v;
  }
  auto [dir, index] = save(from, layouts, values);
  auto layout = readCheckpointLayout(dir, 3, index);
  ASSERT_TRUE(static_cast<bool>(layout)) << llvm::toString(layout.takeError());
  EXPECT_EQ(layout->mesh.describe(), "dp=2 tp=2");
  CheckpointReader reader(*layout);
  // Every global value as it was saved, and a block of it on another mesh.
  MeshLayout to{{"dp", "tp"}, {1, 4}};
  for (const auto &[key, want] : values) {
    auto global = reader.read(key);
    ASSERT_TRUE(static_cast<bool>(global)) << llvm::toString(global.takeError());
    ASSERT_EQ(global->data.size(), want.size() * sizeof(float));
    EXPECT_EQ(std::memcmp(global->data.data(), want.data(), global->data.size()), 0) << key;
    BlockLayout there = layoutOn(to, global->shape, {"tp", ""}, {1, 1});
    if (global->shape.size() == 2) {
      std::vector<char> block = takeBlock(*global, to, there, {0, 3});
      float first;
      std::memcpy(&first, block.data(), sizeof(first));
      EXPECT_EQ(first, want[size_t(9 * 4)]) << key; // row 9 of 12 starts tp block 3
    }
  }
  auto missing = reader.read("param:other");
  EXPECT_EQ(llvm::toString(missing.takeError()),
            "checkpoint '" + dir + "' holds no tensor 'param:other'");
}

// Found by fuzz/checkpoint-index: an empty tensor whose other dimension is
// huge is 0 bytes, so it passes validation; the block map then reserved
// room for every index of that dimension (std::bad_alloc).
TEST_F(Reshard, EmptyTensorWithAHugeDimension) {
  MeshLayout mesh{{"dp"}, {2}};
  std::vector<int64_t> shape = {0, int64_t(1) << 59};
  std::map<std::string, BlockLayout> layouts{
      {"param:empty", layoutOn(mesh, shape, {"dp", ""}, {1, 1})}};
  auto [dir, index] = save(mesh, layouts, {{"param:empty", {}}});
  auto layout = readCheckpointLayout(dir, 3, index);
  ASSERT_TRUE(static_cast<bool>(layout)) << llvm::toString(layout.takeError());
  CheckpointReader reader(*layout);
  auto global = reader.read("param:empty");
  ASSERT_TRUE(static_cast<bool>(global)) << llvm::toString(global.takeError());
  EXPECT_EQ(global->shape, shape);
  EXPECT_TRUE(global->data.empty());
}

TEST_F(Reshard, IndexLayoutsAreValidated) {
  MeshLayout mesh{{"dp"}, {2}};
  std::map<std::string, BlockLayout> layouts{
      {"param:w", layoutOn(mesh, {4, 2}, {"dp", ""}, {1, 1})}};
  auto [dir, good] = save(mesh, layouts, {{"param:w", std::vector<float>(8, 1.0f)}});
  const std::string at = "checkpoint index '" + dir + "/index.json': ";
  auto error = [&](llvm::json::Object index) {
    return llvm::toString(readCheckpointLayout(dir, 3, index).takeError());
  };
  auto tensor = [](llvm::json::Object &index, int rank) {
    return index.getArray("files")
        ->operator[](size_t(rank))
        .getAsObject()
        ->getObject("tensors")
        ->getObject("param:w");
  };
  llvm::json::Object bad = good;
  bad["version"] = 2;
  EXPECT_EQ(error(bad), at + "version 2 records no tensor layouts (written by an older ppc), "
                             "so it resumes only on the mesh and program that saved it");
  bad = good;
  bad["mesh"] =
      llvm::json::Object{{"axes", llvm::json::Array{"dp"}}, {"shape", llvm::json::Array{3}}};
  EXPECT_EQ(error(bad), at + "\"mesh\" is not {\"axes\": [distinct names], \"shape\": [sizes]} "
                             "of 2 ranks");
  bad = good;
  (*tensor(bad, 1))["sharding"] = llvm::json::Array{"tp", ""};
  EXPECT_EQ(error(bad), at + "\"files\"[1].tensors[\"param:w\"]: dimension 0 is split over "
                             "'tp', which are not axes of the mesh that no other dimension "
                             "uses");
  bad = good;
  (*tensor(bad, 1))["sharding"] = llvm::json::Array{"dp", "dp"};
  EXPECT_EQ(error(bad), at + "\"files\"[1].tensors[\"param:w\"]: dimension 1 is split over "
                             "'dp', which are not axes of the mesh that no other dimension "
                             "uses");
  bad = good;
  (*tensor(bad, 1))["sharding"] = llvm::json::Array{"dp,", ""};
  EXPECT_NE(error(bad), "");
  // 2 * 2^62 wraps to 0: a division by zero unless refused.
  bad = good;
  (*tensor(bad, 1))["blocks"] = llvm::json::Array{int64_t(1) << 62, 1};
  EXPECT_EQ(error(bad), at + "\"files\"[1].tensors[\"param:w\"]: dimension 0 (4) does not "
                             "split into 4611686018427387904 blocks over 'dp'");
  // A global value larger than the shard could hold is refused before any
  // reader allocates it.
  bad = good;
  (*tensor(bad, 1))["shape"] = llvm::json::Array{int64_t(1) << 40, 2};
  EXPECT_EQ(error(bad), at +
                            "\"files\"[1].tensors[\"param:w\"]: its blocks hold more bytes "
                            "than the shard (" +
                            std::to_string(layoutBytes(dir, 1)) + ")");
  bad = good;
  (*tensor(bad, 1))["shape"] = llvm::json::Array{5, 2};
  EXPECT_EQ(error(bad), at + "\"files\"[1].tensors[\"param:w\"]: dimension 0 (5) does not "
                             "split into 1 blocks over 'dp'");
  bad = good;
  (*tensor(bad, 1))["shape"] = llvm::json::Array{int64_t(1) << 40, int64_t(1) << 40};
  EXPECT_EQ(error(bad), at + "\"files\"[1].tensors[\"param:w\"]: its size overflows");
  bad = good;
  (*tensor(bad, 1))["dtype"] = "F33";
  EXPECT_EQ(error(bad), at + "\"files\"[1].tensors[\"param:w\"]: \"dtype\" is not a "
                             "safetensors element type");
  bad = good;
  (*tensor(bad, 1))["dtype"] = "F64";
  EXPECT_EQ(error(bad), at + "\"files\"[1].tensors[\"param:w\"]: its dtype or shape differs "
                             "from rank 0's");
  // Found by fuzz/checkpoint-index: blocks whose product with the ranks
  // overflows (to 0 here, which the remainder then divided by).
  {
    llvm::json::Object fourRanks = good;
    fourRanks["world_size"] = 4;
    fourRanks["mesh"] = meshToJson({{"dp", "tp"}, {2, 2}});
    llvm::json::Array &files = *fourRanks.getArray("files");
    llvm::json::Value copy = files[1];
    files.push_back(copy);
    files.push_back(copy);
    for (int rank = 0; rank < 4; ++rank) {
      (*files[size_t(rank)].getAsObject())["name"] = shardFileName(rank);
      (*tensor(fourRanks, rank))["sharding"] = llvm::json::Array{"dp,tp", ""};
    }
    (*tensor(fourRanks, 1))["blocks"] = llvm::json::Array{int64_t(1) << 62, 1};
    EXPECT_EQ(error(fourRanks), at + "\"files\"[1].tensors[\"param:w\"]: dimension 0 (4) "
                                     "does not split into 4611686018427387904 blocks over 'dp,tp'");
  }
  // A block no shard holds is found when the tensor is read.
  bad = good;
  bad.getArray("files")->operator[](1).getAsObject()->getObject("tensors")->erase("param:w");
  auto layout = readCheckpointLayout(dir, 3, bad);
  ASSERT_TRUE(static_cast<bool>(layout)) << llvm::toString(layout.takeError());
  CheckpointReader reader(*layout);
  EXPECT_EQ(llvm::toString(reader.read("param:w").takeError()),
            at + "tensor 'param:w' is held in 1 of its 2 blocks");
}

} // namespace
