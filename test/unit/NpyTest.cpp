//===- NpyTest.cpp - .npy reading and writing -----------------------------===//

#include "executor/Npy.h"

#include <gtest/gtest.h>

using namespace ppc;

TEST(Npy, RoundTripsEveryShapeAndDtype) {
  for (DType dtype :
       {DType::F32, DType::F64, DType::F16, DType::I64, DType::I32, DType::U8, DType::I1}) {
    for (Shape shape : {Shape{}, Shape{3}, Shape{2, 3}, Shape{2, 0, 4}}) {
      Tensor t(dtype, shape);
      for (int64_t i = 0; i < t.numElements(); ++i)
        t.setDouble(i, (i % 2 ? 1.0 : 0.0) * (i + 1));
      auto back = parseNpy(formatNpy(t), "t.npy");
      ASSERT_TRUE(static_cast<bool>(back)) << llvm::toString(back.takeError());
      EXPECT_EQ(back->dtype(), dtype);
      EXPECT_EQ(back->shape(), t.shape());
      for (int64_t i = 0; i < t.numElements(); ++i)
        EXPECT_EQ(back->getDouble(i), t.getDouble(i));
    }
  }
}

TEST(Npy, HeaderIsPaddedToSixtyFourBytes) {
  std::string bytes = formatNpy(Tensor(DType::F32, {5}));
  size_t headerLen = uint8_t(bytes[8]) | (uint8_t(bytes[9]) << 8);
  EXPECT_EQ((10 + headerLen) % 64, 0u);
  EXPECT_EQ(bytes[10 + headerLen - 1], '\n');
  EXPECT_NE(bytes.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(bytes.find("'shape': (5,)"), std::string::npos);
}

TEST(Npy, ReadsVersionTwoHeaders) {
  std::string header = "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }\n";
  std::string bytes = "\x93NUMPY";
  bytes += char(2);
  bytes += char(0);
  uint32_t len = header.size();
  bytes.append(reinterpret_cast<const char *>(&len), 4);
  bytes += header;
  int64_t values[] = {-5, 9};
  bytes.append(reinterpret_cast<const char *>(values), sizeof(values));
  auto t = parseNpy(bytes, "v2.npy");
  ASSERT_TRUE(static_cast<bool>(t)) << llvm::toString(t.takeError());
  EXPECT_EQ(t->ints()[0], -5);
  EXPECT_EQ(t->ints()[1], 9);
}

TEST(Npy, MalformedHeadersNameTheFile) {
  auto error = [](llvm::StringRef bytes) {
    auto t = parseNpy(bytes, "bad.npy");
    return t ? std::string("no error") : llvm::toString(t.takeError());
  };
  EXPECT_EQ(error("hello"), "file 'bad.npy': not a .npy file (bad magic)");
  std::string v9 = formatNpy(Tensor(DType::F32, {1}));
  v9[6] = 9;
  EXPECT_EQ(error(v9), "file 'bad.npy': unsupported .npy version 9");
  std::string noShape = formatNpy(Tensor(DType::F32, {1}));
  noShape.replace(noShape.find("'shape'"), 7, "'shope'");
  EXPECT_NE(error(noShape).find("malformed .npy header"), std::string::npos);
  std::string negative = formatNpy(Tensor(DType::F32, {1}));
  negative.replace(negative.find("(1,)"), 4, "(-1,)");
  EXPECT_NE(error(negative).find("malformed shape"), std::string::npos);
}
