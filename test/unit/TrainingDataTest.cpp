//===- TrainingDataTest.cpp - the data contract and the mesh --------------===//

#include "runtime/Mesh.h"
#include "runtime/TokenData.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace ppc;

namespace {
std::string writeTokens(llvm::ArrayRef<uint16_t> tokens) {
  llvm::SmallString<128> path;
  int fd;
  EXPECT_FALSE(llvm::sys::fs::createTemporaryFile("ppc-tokens", "bin", fd, path));
  llvm::raw_fd_ostream os(fd, true);
  os.write(reinterpret_cast<const char *>(tokens.data()), tokens.size() * 2);
  return std::string(path);
}
} // namespace

TEST(TokenData, WindowsFollowTheDesignFormula) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 50; ++i)
    tokens.push_back(1000 + i);
  std::string path = writeTokens(tokens);
  auto data = TokenData::open(path, "u16");
  ASSERT_TRUE(static_cast<bool>(data)) << llvm::toString(data.takeError());
  EXPECT_EQ(data->size(), 50);
  // B = 3, T = 8: o = ((s*3 + b) * 8) mod (50 - 8 - 1) = ... mod 41.
  EXPECT_EQ(data->offset(0, 3, 8, 0), 0);
  EXPECT_EQ(data->offset(0, 3, 8, 2), 16);
  EXPECT_EQ(data->offset(1, 3, 8, 1), (4 * 8) % 41);
  EXPECT_EQ(data->offset(2, 3, 8, 0), (6 * 8) % 41);
  int64_t inputs[8], labels[8];
  data->window(2, 3, 8, 0, inputs, labels);
  EXPECT_EQ(inputs[0], 1000 + 7);
  EXPECT_EQ(labels[0], 1000 + 8);
  EXPECT_EQ(labels[7], 1000 + 15);
  llvm::sys::fs::remove(path);
}

TEST(TokenData, RejectsBadFilesByName) {
  std::string path = writeTokens({1, 2, 3});
  auto u8 = TokenData::open(path, "u8");
  ASSERT_TRUE(static_cast<bool>(u8));
  EXPECT_EQ(u8->size(), 6);
  EXPECT_EQ(llvm::toString(u8->checkSequence(8)),
            "data file '" + path + "': holds 6 tokens; windows of 8 need at least 10");
  auto i32 = TokenData::open(path, "i32");
  ASSERT_FALSE(static_cast<bool>(i32));
  EXPECT_EQ(llvm::toString(i32.takeError()),
            "data file '" + path + "': 6 bytes is not a whole number of i32 tokens");
  auto bad = TokenData::open(path, "f32");
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()), "--data-dtype 'f32': expected u8, u16 or i32");
  auto missing = TokenData::open("/nonexistent/tokens.bin", "u8");
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("/nonexistent/tokens.bin"), std::string::npos);
  llvm::sys::fs::remove(path);
}

TEST(Mesh, ParsesEverySpelling) {
  auto m = parseMesh("2x4x2");
  ASSERT_TRUE(static_cast<bool>(m));
  EXPECT_EQ(m->dp, 2);
  EXPECT_EQ(m->tp, 4);
  EXPECT_EQ(m->pp, 2);
  auto named = parseMesh("pp=2,dp=2,tp=4");
  ASSERT_TRUE(static_cast<bool>(named));
  EXPECT_EQ(named->size(), 16);
  auto single = parseMesh("8");
  ASSERT_TRUE(static_cast<bool>(single));
  EXPECT_EQ(single->dp, 8);
  EXPECT_EQ(single->tp, 1);
  auto partial = parseMesh("tp=4");
  ASSERT_TRUE(static_cast<bool>(partial));
  EXPECT_EQ(partial->dp, 1);
  EXPECT_EQ(partial->tp, 4);
}

TEST(Mesh, RankLayoutPutsTensorParallelRanksTogether) {
  Mesh mesh{2, 4, 2};
  EXPECT_EQ(mesh.rank(0, 0, 0), 0);
  EXPECT_EQ(mesh.rank(0, 3, 0), 3);
  EXPECT_EQ(mesh.rank(1, 0, 0), 4);
  EXPECT_EQ(mesh.rank(1, 3, 1), 15);
}

TEST(Mesh, RejectsMalformedMeshes) {
  auto error = [](llvm::StringRef text) {
    auto m = parseMesh(text);
    return m ? std::string("no error") : llvm::toString(m.takeError());
  };
  EXPECT_EQ(error("2x0"), "--mesh '2x0': '0' is not a positive integer");
  EXPECT_EQ(error("1x2x3x4"),
            "--mesh '1x2x3x4': expected AxBxC (data x tensor x pipeline) or dp=A,tp=B,pp=C");
  EXPECT_EQ(error("dp=2,ep=2"), "--mesh 'dp=2,ep=2': unknown axis 'ep' (expected dp, tp or pp)");
  EXPECT_EQ(error("dp=2,dp=4"), "--mesh 'dp=2,dp=4': axis 'dp' given twice");
}
