//===- CheckpointDirTest.cpp - atomic checkpoint directories --------------===//

#include "runtime/CheckpointDir.h"
#include "runtime/Safetensors.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace ppcrt;

namespace {
class CheckpointDir : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("ppc-checkpoints", root));
    // A directory that does not exist yet, as on a run's first checkpoint.
    dir = path("ckpt");
  }
  void TearDown() override { llvm::sys::fs::remove_directories(root); }

  std::string path(llvm::StringRef name) const {
    llvm::SmallString<128> path(root);
    llvm::sys::path::append(path, name);
    return std::string(path);
  }

  /// Writes step `step` as rank 0 of one would, its shard holding the step.
  void commit(int64_t step) {
    auto staging = prepareStaging(dir, step);
    ASSERT_TRUE(static_cast<bool>(staging)) << llvm::toString(staging.takeError());
    writeShard(*staging, step);
    llvm::json::Object index{{"step", step}, {"shards", llvm::json::Array{shardFileName(0)}}};
    ASSERT_EQ(llvm::toString(commitCheckpoint(dir, step, index)), "");
  }

  void writeShard(llvm::StringRef into, int64_t value) {
    llvm::SmallString<128> shard(into);
    llvm::sys::path::append(shard, shardFileName(0));
    ASSERT_EQ(llvm::toString(writeSafetensors(shard, {{"step", DType::I64, {}, &value}}, {})), "");
  }

  void writeFile(llvm::StringRef file, llvm::StringRef text) {
    std::error_code ec;
    llvm::raw_fd_ostream os(file, ec);
    ASSERT_FALSE(ec) << ec.message();
    os << text;
  }

  /// The step of the latest checkpoint, -1 for none.
  int64_t latest() {
    auto found = findLatestCheckpoint(dir);
    EXPECT_TRUE(static_cast<bool>(found)) << llvm::toString(found.takeError());
    if (!found || !*found)
      return -1;
    EXPECT_EQ((*found)->second, checkpointPath(dir, (*found)->first));
    return (*found)->first;
  }

  /// The names in `dir`, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      names.push_back(llvm::sys::path::filename(it->path()).str());
    std::sort(names.begin(), names.end());
    return names;
  }

  llvm::SmallString<128> root;
  std::string dir;
};
} // namespace

TEST_F(CheckpointDir, NamesAreZeroPadded) {
  EXPECT_EQ(checkpointPath("/ckpt", 123), "/ckpt/step-00000123");
  EXPECT_EQ(shardFileName(3), "rank-00003.safetensors");
  auto staging = prepareStaging(dir, 123);
  ASSERT_TRUE(static_cast<bool>(staging)) << llvm::toString(staging.takeError());
  EXPECT_EQ(*staging, path("ckpt/.staging-step-00000123"));
  EXPECT_TRUE(llvm::sys::fs::is_directory(*staging));
}

TEST_F(CheckpointDir, CommitThenFindLatest) {
  ASSERT_NO_FATAL_FAILURE(commit(123));
  EXPECT_EQ(latest(), 123);
  EXPECT_EQ(entries(), std::vector<std::string>{"step-00000123"});

  std::string checkpoint = checkpointPath(dir, 123);
  auto index = readCheckpointIndex(checkpoint);
  ASSERT_TRUE(static_cast<bool>(index)) << llvm::toString(index.takeError());
  EXPECT_EQ(index->getInteger("step"), 123);
  auto shard = SafetensorsFile::open(checkpoint + "/" + shardFileName(0));
  ASSERT_TRUE(static_cast<bool>(shard)) << llvm::toString(shard.takeError());
  EXPECT_EQ(*static_cast<const int64_t *>(shard->tensors()[0].data), 123);
}

TEST_F(CheckpointDir, StagingWithoutCommitIsIgnored) {
  ASSERT_NO_FATAL_FAILURE(commit(1));
  auto staging = prepareStaging(dir, 2);
  ASSERT_TRUE(static_cast<bool>(staging)) << llvm::toString(staging.takeError());
  ASSERT_NO_FATAL_FAILURE(writeShard(*staging, 2));
  ASSERT_NO_FATAL_FAILURE(writeFile(*staging + "/index.json", "{}"));
  EXPECT_EQ(latest(), 1);
}

TEST_F(CheckpointDir, StepWithoutIndexIsSkippedAndReported) {
  EXPECT_EQ(latest(), -1);
  ASSERT_NO_FATAL_FAILURE(commit(3));
  ASSERT_FALSE(llvm::sys::fs::create_directories(checkpointPath(dir, 9)));
  ASSERT_NO_FATAL_FAILURE(writeShard(checkpointPath(dir, 9), 9));
  // Only the names checkpointPath makes are checkpoints.
  for (const char *name : {"step-00000010.old", "step-11"}) {
    ASSERT_FALSE(llvm::sys::fs::create_directories(dir + "/" + name));
    ASSERT_NO_FATAL_FAILURE(writeFile(dir + "/" + name + "/index.json", "{}"));
  }
  std::vector<std::string> skipped;
  auto found = findLatestCheckpoint(dir, &skipped);
  ASSERT_TRUE(static_cast<bool>(found)) << llvm::toString(found.takeError());
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->first, 3);
  EXPECT_EQ(skipped, std::vector<std::string>{checkpointPath(dir, 9)});
}

// A step whose index does not parse is the latest checkpoint still: the
// reader fails on it, naming it, instead of resuming from an older step.
TEST_F(CheckpointDir, CorruptIndexIsNotSkipped) {
  ASSERT_NO_FATAL_FAILURE(commit(3));
  ASSERT_FALSE(llvm::sys::fs::create_directories(checkpointPath(dir, 8)));
  ASSERT_NO_FATAL_FAILURE(writeFile(checkpointPath(dir, 8) + "/index.json", "{\"step\": 8,"));
  EXPECT_EQ(latest(), 8);
  auto index = readCheckpointIndex(checkpointPath(dir, 8));
  ASSERT_FALSE(static_cast<bool>(index));
  EXPECT_TRUE(llvm::StringRef(llvm::toString(index.takeError()))
                  .starts_with("checkpoint index '" + checkpointPath(dir, 8) +
                               "/index.json': not valid JSON: "));
}

TEST_F(CheckpointDir, DigestIsBlake3OfTheWholeFile) {
  std::string file = path("abc");
  ASSERT_NO_FATAL_FAILURE(writeFile(file, "abc"));
  auto digest = digestFile(file);
  ASSERT_TRUE(static_cast<bool>(digest)) << llvm::toString(digest.takeError());
  EXPECT_EQ(digest->bytes, 3);
  // BLAKE3's published test value for "abc".
  EXPECT_EQ(digest->blake3, "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85");
}

TEST_F(CheckpointDir, VerifyShardFindsFlipsTruncationAndGrowth) {
  std::string file = path("shard");
  ASSERT_NO_FATAL_FAILURE(writeFile(file, "0123456789abcdef"));
  auto digest = digestFile(file);
  ASSERT_TRUE(static_cast<bool>(digest)) << llvm::toString(digest.takeError());
  EXPECT_EQ(llvm::toString(verifyShard(file, *digest)), "");
  ASSERT_NO_FATAL_FAILURE(writeFile(file, "0123456789abcdeF"));
  EXPECT_EQ(llvm::toString(verifyShard(file, *digest)),
            "checkpoint shard '" + file +
                "': its BLAKE3 digest is not the index's: the file is corrupt or from another "
                "checkpoint");
  ASSERT_NO_FATAL_FAILURE(writeFile(file, "0123456789abcde"));
  EXPECT_EQ(llvm::toString(verifyShard(file, *digest)),
            "checkpoint shard '" + file +
                "': 15 bytes where the index says 16: truncated, extended or replaced");
  ASSERT_NO_FATAL_FAILURE(writeFile(file, "0123456789abcdef!"));
  EXPECT_NE(llvm::toString(verifyShard(file, *digest)), "");
  EXPECT_EQ(llvm::toString(verifyShard(root, *digest)),
            "checkpoint shard '" + std::string(root) + "': not a regular file");
}

TEST_F(CheckpointDir, IndexIsValidatedFieldByField) {
  std::string hex(64, 'a');
  auto entry = [&](int64_t rank) {
    return llvm::json::Object{{"name", shardFileName(rank)}, {"bytes", 10}, {"blake3", hex}};
  };
  llvm::json::Object good{{"format", "ppc-checkpoint"},
                          {"version", 2},
                          {"step", 4},
                          {"world_size", 2},
                          {"files", llvm::json::Array{entry(0), entry(1)}}};
  auto shards = checkpointShards("/c", 4, good);
  ASSERT_TRUE(static_cast<bool>(shards)) << llvm::toString(shards.takeError());
  ASSERT_EQ(shards->size(), 2u);
  EXPECT_EQ((*shards)[1].file, shardFileName(1));
  ASSERT_TRUE((*shards)[1].digest.has_value());
  EXPECT_EQ((*shards)[1].digest->bytes, 10);
  auto error = [&](llvm::json::Object index, int64_t step = 4) {
    return llvm::toString(checkpointShards("/c", step, index).takeError());
  };
  const std::string at = "checkpoint index '/c/index.json': ";
  EXPECT_EQ(error(good, 5), at + "\"step\" is not 5, the step its directory is named for");
  llvm::json::Object bad = good;
  bad["version"] = 4;
  EXPECT_EQ(error(bad), at + "\"version\" is not 1, 2 or 3 (this ppc reads versions 1 to 3)");
  bad = good;
  bad["format"] = "other";
  EXPECT_EQ(error(bad), at + "\"format\" is not \"ppc-checkpoint\"");
  bad = good;
  bad["files"] = llvm::json::Array{entry(0)};
  EXPECT_EQ(error(bad), at + "\"files\" does not list one shard per rank (2)");
  bad = good;
  bad["files"] = llvm::json::Array{entry(0), entry(0)};
  EXPECT_EQ(error(bad), at + "\"files\"[1] is not {\"name\": \"rank-00001.safetensors\", "
                             "\"bytes\": N, \"blake3\": 64 hex digits}");
  bad = good;
  llvm::json::Object shortDigest = entry(1);
  shortDigest["blake3"] = "abc";
  bad["files"] = llvm::json::Array{entry(0), std::move(shortDigest)};
  EXPECT_NE(error(bad), "");
  // Version 1 indexes listed names only: accepted, with nothing to verify.
  llvm::json::Object v1{{"format", "ppc-checkpoint"},
                        {"version", 1},
                        {"step", 4},
                        {"world_size", 2},
                        {"files", llvm::json::Array{shardFileName(0), shardFileName(1)}}};
  shards = checkpointShards("/c", 4, v1);
  ASSERT_TRUE(static_cast<bool>(shards)) << llvm::toString(shards.takeError());
  EXPECT_FALSE((*shards)[1].digest.has_value());
}

TEST_F(CheckpointDir, LatestPicksTheLargestStep) {
  for (int64_t step : {2, 10, 7})
    ASSERT_NO_FATAL_FAILURE(commit(step));
  EXPECT_EQ(latest(), 10);
}

TEST_F(CheckpointDir, CommittingAnExistingStepFails) {
  ASSERT_NO_FATAL_FAILURE(commit(5));
  auto staging = prepareStaging(dir, 5);
  ASSERT_TRUE(static_cast<bool>(staging)) << llvm::toString(staging.takeError());
  EXPECT_EQ(llvm::toString(commitCheckpoint(dir, 5, llvm::json::Object{{"step", 55}})),
            "checkpoint '" + checkpointPath(dir, 5) + "': already exists");
  auto index = readCheckpointIndex(checkpointPath(dir, 5));
  ASSERT_TRUE(static_cast<bool>(index)) << llvm::toString(index.takeError());
  EXPECT_EQ(index->getInteger("step"), 5);
}

TEST_F(CheckpointDir, CommitNeedsAStagingDirectory) {
  EXPECT_EQ(llvm::toString(commitCheckpoint(dir, 4, {})), "checkpoint staging directory '" +
                                                              path("ckpt/.staging-step-00000004") +
                                                              "': does not exist");
  EXPECT_EQ(latest(), -1);
}

TEST_F(CheckpointDir, PrepareStagingRemovesAStaleOne) {
  auto staging = prepareStaging(dir, 6);
  ASSERT_TRUE(static_cast<bool>(staging)) << llvm::toString(staging.takeError());
  ASSERT_NO_FATAL_FAILURE(writeShard(*staging, 6));
  staging = prepareStaging(dir, 6);
  ASSERT_TRUE(static_cast<bool>(staging)) << llvm::toString(staging.takeError());
  EXPECT_TRUE(llvm::sys::fs::is_directory(*staging));
  EXPECT_FALSE(llvm::sys::fs::exists(*staging + "/" + shardFileName(0)));
}

TEST_F(CheckpointDir, PruneKeepsTheNewest) {
  for (int64_t step = 1; step <= 5; ++step)
    ASSERT_NO_FATAL_FAILURE(commit(step));
  ASSERT_FALSE(llvm::sys::fs::create_directories(checkpointPath(dir, 0)));
  auto staging = prepareStaging(dir, 6);
  ASSERT_TRUE(static_cast<bool>(staging)) << llvm::toString(staging.takeError());

  ASSERT_EQ(llvm::toString(pruneCheckpoints(dir, 0)), "");
  EXPECT_EQ(entries().size(), 7u);
  ASSERT_EQ(llvm::toString(pruneCheckpoints(dir, 2)), "");
  // The incomplete step 0 (what a prune stopped midway leaves) goes too; the
  // staging directory is not prune's to take.
  EXPECT_EQ(entries(),
            (std::vector<std::string>{".staging-step-00000006", "step-00000004", "step-00000005"}));
  EXPECT_EQ(latest(), 5);
  ASSERT_EQ(llvm::toString(pruneCheckpoints(dir, 10)), "");
  EXPECT_EQ(entries().size(), 3u);
  // One newer than every complete checkpoint is not known to be a remnant.
  ASSERT_FALSE(llvm::sys::fs::create_directories(checkpointPath(dir, 9)));
  ASSERT_EQ(llvm::toString(pruneCheckpoints(dir, 1)), "");
  EXPECT_EQ(entries(),
            (std::vector<std::string>{".staging-step-00000006", "step-00000005", "step-00000009"}));
}

TEST_F(CheckpointDir, CommitReplacesAnIncompleteStep) {
  // A prune stopped midway left step 4 without its index; the run resumed
  // from an older step reaches step 4 again.
  ASSERT_FALSE(llvm::sys::fs::create_directories(checkpointPath(dir, 4)));
  ASSERT_NO_FATAL_FAILURE(writeFile(checkpointPath(dir, 4) + "/" + shardFileName(0), "old"));
  ASSERT_NO_FATAL_FAILURE(commit(4));
  EXPECT_EQ(latest(), 4);
  auto index = readCheckpointIndex(checkpointPath(dir, 4));
  ASSERT_TRUE(static_cast<bool>(index)) << llvm::toString(index.takeError());
  EXPECT_EQ(index->getInteger("step"), 4);
}

TEST_F(CheckpointDir, MissingDirectoryHasNoCheckpoint) {
  auto found = findLatestCheckpoint(path("nowhere"));
  ASSERT_TRUE(static_cast<bool>(found)) << llvm::toString(found.takeError());
  EXPECT_FALSE(found->has_value());
  EXPECT_EQ(llvm::toString(pruneCheckpoints(path("nowhere"), 1)), "");
}
