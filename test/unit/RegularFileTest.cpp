//===- RegularFileTest.cpp - inputs that cannot stall or escape -----------===//
//
// readRegularFile refuses what is not a regular file; readFileBeneath and
// its fallback for kernels without openat2 (openBeneathByComponents) never
// leave the directory or follow a symbolic link, and stop on every path.
//
//===----------------------------------------------------------------------===//

#include "runtime/RegularFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace ppc;

namespace {
class RegularFile : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("ppc-regular-file", root));
    write("inner/data.bin", "0123456789");
    write("outside.bin", "secret");
    ASSERT_EQ(::symlink("inner", path("via").c_str()), 0);
    ASSERT_EQ(::symlink("data.bin", path("inner/link.bin").c_str()), 0);
    ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  }
  void TearDown() override { llvm::sys::fs::remove_directories(root); }

  std::string path(llvm::StringRef name) const {
    llvm::SmallString<128> p(root);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
  void write(llvm::StringRef name, llvm::StringRef text) {
    llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path(name)));
    std::error_code ec;
    llvm::raw_fd_ostream os(path(name), ec);
    ASSERT_FALSE(ec) << ec.message();
    os << text;
  }
  /// What the fallback opens for `relative`: the file's first bytes, or the
  /// errno it failed with, or "directory".
  std::string viaComponents(const std::string &relative) {
    int dir = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    int fd = detail::openBeneathByComponents(dir, relative);
    int error = errno;
    ::close(dir);
    if (fd < 0)
      return std::string("errno ") + std::to_string(error);
    struct stat st;
    ::fstat(fd, &st);
    std::string got = "directory";
    if (S_ISREG(st.st_mode)) {
      char text[4] = {};
      got = std::string(text, size_t(::read(fd, text, 3)));
    }
    ::close(fd);
    return got;
  }

  llvm::SmallString<128> root;
};
} // namespace

TEST_F(RegularFile, SpecialFilesAreRefused) {
  auto fifo = readRegularFile(path("fifo"));
  ASSERT_FALSE(static_cast<bool>(fifo));
  EXPECT_EQ(llvm::toString(fifo.takeError()),
            "not a regular file (a FIFO, device or socket cannot be read as one)");
  auto zero = readRegularFile("/dev/zero");
  ASSERT_FALSE(static_cast<bool>(zero));
  llvm::consumeError(zero.takeError());
  auto dir = readRegularFile(path("inner"));
  ASSERT_FALSE(static_cast<bool>(dir));
  EXPECT_EQ(llvm::toString(dir.takeError()), "is a directory");
  auto slice = readRegularFile(path("inner/data.bin"), std::pair<uint64_t, uint64_t>(8, 4));
  ASSERT_FALSE(static_cast<bool>(slice));
  EXPECT_EQ(llvm::toString(slice.takeError()),
            "offset 8 and length 4 reach past its end (10 bytes)");
  auto good = readRegularFile(path("inner/data.bin"), std::pair<uint64_t, uint64_t>(2, 3));
  ASSERT_TRUE(static_cast<bool>(good)) << llvm::toString(good.takeError());
  EXPECT_EQ((*good)->getBuffer(), "234");
}

TEST_F(RegularFile, BeneathRefusesLinksAndEscapes) {
  auto good = readFileBeneath(root, "inner/data.bin");
  ASSERT_TRUE(static_cast<bool>(good)) << llvm::toString(good.takeError());
  EXPECT_EQ((*good)->getBuffer(), "0123456789");
  for (const char *bad :
       {"via/data.bin", "inner/link.bin", "../outside.bin", "inner/../../outside.bin"}) {
    auto read = readFileBeneath(path("inner"), bad);
    EXPECT_FALSE(static_cast<bool>(read)) << bad;
    llvm::consumeError(read.takeError());
  }
  ASSERT_EQ(::link(path("outside.bin").c_str(), path("inner/hard.bin").c_str()), 0);
  auto hard = readFileBeneath(path("inner"), "hard.bin");
  ASSERT_FALSE(static_cast<bool>(hard));
  EXPECT_EQ(llvm::toString(hard.takeError()),
            "has 2 hard links; one could be a file outside the model's directory");
}

// The fallback stops on every path (an empty or "." last component once
// made it start over forever) and opens what openat2 would.
TEST_F(RegularFile, FallbackWalksComponentByComponent) {
  EXPECT_EQ(viaComponents("inner/data.bin"), "012");
  EXPECT_EQ(viaComponents("./inner//data.bin"), "012");
  EXPECT_EQ(viaComponents(""), "directory");
  EXPECT_EQ(viaComponents("."), "directory");
  EXPECT_EQ(viaComponents("./"), "directory");
  EXPECT_EQ(viaComponents("inner/"), "directory");
  EXPECT_EQ(viaComponents("inner/."), "directory");
  EXPECT_EQ(viaComponents("via/data.bin"), "errno " + std::to_string(ELOOP));
  EXPECT_EQ(viaComponents("inner/link.bin"), "errno " + std::to_string(ELOOP));
  EXPECT_EQ(viaComponents("../outside.bin"), "errno " + std::to_string(EXDEV));
  EXPECT_EQ(viaComponents("inner/../outside.bin"), "errno " + std::to_string(EXDEV));
  EXPECT_EQ(viaComponents("missing/x"), "errno " + std::to_string(ENOENT));
}
