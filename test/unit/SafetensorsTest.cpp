//===- SafetensorsTest.cpp - the safetensors file format ------------------===//

#include "runtime/Safetensors.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace ppcrt;

namespace {
class Safetensors : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("ppc-safetensors", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string path(llvm::StringRef name) const {
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, name);
    return std::string(path);
  }

  std::string writeBytes(llvm::StringRef name, llvm::StringRef bytes) const {
    std::string file = path(name);
    std::error_code ec;
    llvm::raw_fd_ostream os(file, ec);
    EXPECT_FALSE(ec) << ec.message();
    os << bytes;
    return file;
  }

  llvm::SmallString<128> dir;
};

/// A file laid out by hand as the format describes it: the header length in
/// 8 little-endian bytes, the header padded with spaces to a multiple of 8,
/// then the data.
std::string fileBytes(std::string header, llvm::StringRef data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes;
  for (int i = 0; i < 8; ++i)
    bytes.push_back(static_cast<char>(header.size() >> (8 * i)));
  return bytes + header + data.str();
}

/// The file the format description's example spells: an I32 vector {7, -2}
/// and an F32 scalar 1.5, listed in the header in the opposite order of
/// their data.
const char *kHandWrittenHeader = R"({"__metadata__":{"format":"pt"},)"
                                 R"("b":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},)"
                                 R"("a":{"dtype":"F32","shape":[],"data_offsets":[8,12]}})";
const llvm::StringRef kHandWrittenData("\x07\0\0\0\xfe\xff\xff\xff"
                                       "\0\0\xc0\x3f",
                                       12);

template <typename T> T element(const TensorView &view, int64_t i) {
  T value;
  std::memcpy(&value, static_cast<const char *>(view.data) + i * sizeof(T), sizeof(T));
  return value;
}
} // namespace

TEST_F(Safetensors, RoundTripsDtypesShapesAndMetadata) {
  std::vector<float> weight = {1, 2, 3, 4, 5, 6};
  double scale = 3.25;
  std::vector<uint16_t> embedding = {0x3f80, 0xc000, 0x0000, 0x7f80};
  std::vector<int64_t> ids = {-1, 0, int64_t(1) << 40, 7};
  std::vector<uint8_t> mask = {1, 0, 1};
  // "empty" and "ids" start at the same offset; their write order must hold.
  std::vector<TensorView> tensors = {{"layer.weight", DType::F32, {2, 3}, weight.data()},
                                     {"scale", DType::F64, {}, &scale},
                                     {"embedding", DType::BF16, {4}, embedding.data()},
                                     {"empty", DType::I32, {0, 5}, nullptr},
                                     {"ids", DType::I64, {2, 2}, ids.data()},
                                     {"mask", DType::I1, {3}, mask.data()}};
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "12"}};
  std::string file = path("model.safetensors");
  ASSERT_EQ(llvm::toString(writeSafetensors(file, tensors, metadata)), "");

  auto read = SafetensorsFile::open(file);
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->metadata(), metadata);
  ASSERT_EQ(read->tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView &got = read->tensors()[i];
    EXPECT_EQ(got.name, tensors[i].name);
    EXPECT_EQ(got.dtype, tensors[i].dtype) << got.name;
    EXPECT_EQ(got.shape, tensors[i].shape) << got.name;
  }
  EXPECT_EQ(element<float>(read->tensors()[0], 5), 6.0f);
  EXPECT_EQ(element<double>(read->tensors()[1], 0), 3.25);
  EXPECT_EQ(element<uint16_t>(read->tensors()[2], 3), 0x7f80);
  EXPECT_EQ(element<uint8_t>(read->tensors()[5], 0), 1);
  EXPECT_EQ(element<uint8_t>(read->tensors()[5], 1), 0);

  auto found = read->lookup("ids");
  ASSERT_TRUE(static_cast<bool>(found)) << llvm::toString(found.takeError());
  EXPECT_EQ(found->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(element<int64_t>(*found, 0), -1);
  EXPECT_EQ(element<int64_t>(*found, 2), int64_t(1) << 40);
  auto missing = read->lookup("bias");
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_EQ(llvm::toString(missing.takeError()),
            "safetensors file '" + file + "': no tensor 'bias'");
}

TEST_F(Safetensors, HeaderIsPaddedToEightBytes) {
  float value = 2.0f;
  // Names of every length modulo 8 move the end of the header around.
  for (std::string name = "x"; name.size() <= 8; name += "y") {
    std::string file = path(name + ".safetensors");
    ASSERT_EQ(llvm::toString(writeSafetensors(file, {{name, DType::F32, {1}, &value}}, {})), "");
    auto buffer = llvm::MemoryBuffer::getFile(file);
    ASSERT_TRUE(static_cast<bool>(buffer));
    llvm::StringRef bytes = (*buffer)->getBuffer();
    uint64_t headerBytes = llvm::support::endian::read64le(bytes.data());
    EXPECT_EQ(headerBytes % 8, 0u) << name;
    EXPECT_EQ(bytes.size(), 8 + headerBytes + 4) << name;
    llvm::StringRef header = bytes.substr(8, headerBytes);
    EXPECT_EQ(header.rtrim(' ').size(), header.find_last_of('}') + 1) << name;
    auto json = llvm::json::parse(header);
    ASSERT_TRUE(static_cast<bool>(json)) << llvm::toString(json.takeError());
    EXPECT_EQ(*json, llvm::json::Value(llvm::json::Object{
                         {name, llvm::json::Object{{"dtype", "F32"},
                                                   {"shape", llvm::json::Array{1}},
                                                   {"data_offsets", llvm::json::Array{0, 4}}}}}));
  }
}

TEST_F(Safetensors, ReadsAHandWrittenFile) {
  std::string file =
      writeBytes("hand.safetensors", fileBytes(kHandWrittenHeader, kHandWrittenData));
  auto read = SafetensorsFile::open(file);
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(read->tensors().size(), 2u);
  const TensorView &b = read->tensors()[0];
  EXPECT_EQ(b.name, "b");
  EXPECT_EQ(b.dtype, DType::I32);
  EXPECT_EQ(b.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(element<int32_t>(b, 0), 7);
  EXPECT_EQ(element<int32_t>(b, 1), -2);
  const TensorView &a = read->tensors()[1];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(element<float>(a, 0), 1.5f);
}

TEST_F(Safetensors, WritesTheBytesTheFormatDescribes) {
  int32_t b[] = {7, -2};
  float a = 1.5f;
  std::string file = path("written.safetensors");
  ASSERT_EQ(llvm::toString(writeSafetensors(
                file, {{"b", DType::I32, {2}, b}, {"a", DType::F32, {}, &a}}, {{"format", "pt"}})),
            "");
  auto buffer = llvm::MemoryBuffer::getFile(file);
  ASSERT_TRUE(static_cast<bool>(buffer));
  EXPECT_EQ((*buffer)->getBuffer(), fileBytes(kHandWrittenHeader, kHandWrittenData));
}

TEST_F(Safetensors, RejectsCorruptFilesByName) {
  std::string w3 = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  std::string tooLong = fileBytes("{}", "");
  tooLong[0] = static_cast<char>(200);
  struct Case {
    const char *name;
    std::string bytes;
    std::string message;
  } cases[] = {
      {"short", std::string("\x08\0\0", 3), "3 bytes is too short for a header length"},
      {"past-eof", tooLong, "header length 200 runs past the end of the file (16 bytes)"},
      {"truncated", fileBytes(w3, std::string(8, '\0')),
       "tensor 'w' ends at byte 12 of only 8 bytes of data"},
      {"wrong-count",
       fileBytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                 std::string(12, '\0')),
       "tensor 'w' has 8 bytes, expected 12"},
      {"unknown-dtype",
       fileBytes(R"({"w":{"dtype":"Q7","shape":[3],"data_offsets":[0,12]}})",
                 std::string(12, '\0')),
       "tensor 'w' has unknown dtype 'Q7'"},
      {"negative-shape",
       fileBytes(R"({"w":{"dtype":"F32","shape":[-3],"data_offsets":[0,0]}})", ""),
       "tensor 'w' has a shape that is not non-negative integers"},
      {"bad-json", fileBytes(R"({"w":{"dtype":"F32",)", ""), "header is not valid JSON: "},
  };
  for (const Case &c : cases) {
    std::string file = writeBytes(c.name, c.bytes);
    auto read = SafetensorsFile::open(file);
    ASSERT_FALSE(static_cast<bool>(read)) << c.name;
    std::string message = llvm::toString(read.takeError());
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    std::string expected = "safetensors file '" + file + "': " + c.message;
    // The JSON parser words the rest of its message itself.
    if (llvm::StringRef(c.name) == "bad-json")
      EXPECT_TRUE(llvm::StringRef(message).starts_with(expected)) << message;
    else
      EXPECT_EQ(message, expected);
  }
}

TEST_F(Safetensors, WriteFailuresNameTheFile) {
  float value = 0;
  std::string file = path("missing/model.safetensors");
  std::string message = llvm::toString(writeSafetensors(file, {{"w", DType::F32, {}, &value}}, {}));
  EXPECT_TRUE(llvm::StringRef(message).starts_with("safetensors file '" + file + "': ")) << message;
  file = path("twice.safetensors");
  EXPECT_EQ(llvm::toString(writeSafetensors(
                file, {{"w", DType::F32, {}, &value}, {"w", DType::F32, {}, &value}}, {})),
            "safetensors file '" + file + "': tensor name 'w' is reserved or repeated");
}
