//===- OnnxTensorTest.cpp - ONNX TensorProto decoding ---------------------===//

#include "frontend/OnnxTensor.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <gtest/gtest.h>

using namespace ppc;

namespace {
onnx::TensorProto floatProto(std::vector<int64_t> dims) {
  onnx::TensorProto p;
  p.set_name("t");
  p.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims)
    p.add_dims(d);
  return p;
}

std::string errorOf(llvm::Error e) { return llvm::toString(std::move(e)); }
} // namespace

TEST(OnnxTensor, DecodesTypedFields) {
  onnx::TensorProto p = floatProto({2, 2});
  for (float v : {1.5f, -2.0f, 0.25f, 3.0f})
    p.add_float_data(v);
  auto t = decodeTensorProto(p, ".");
  ASSERT_TRUE(static_cast<bool>(t)) << llvm::toString(t.takeError());
  EXPECT_EQ(t->dtype(), DType::F32);
  EXPECT_EQ(t->shape(), (llvm::ArrayRef<int64_t>{2, 2}));
  EXPECT_EQ(t->floats()[1], -2.0);

  onnx::TensorProto b;
  b.set_name("b");
  b.set_data_type(onnx::TensorProto::BOOL);
  b.add_dims(3);
  for (int v : {1, 0, 1})
    b.add_int32_data(v);
  auto bt = decodeTensorProto(b, ".");
  ASSERT_TRUE(static_cast<bool>(bt));
  EXPECT_EQ(bt->ints()[0], 1);
  EXPECT_EQ(bt->ints()[1], 0);
}

TEST(OnnxTensor, DecodesRawDataIncludingHalf) {
  onnx::TensorProto p;
  p.set_name("h");
  p.set_data_type(onnx::TensorProto::FLOAT16);
  p.add_dims(2);
  uint16_t bits[] = {0x3C00, 0xC000}; // 1.0, -2.0
  p.set_raw_data(std::string(reinterpret_cast<char *>(bits), sizeof(bits)));
  auto t = decodeTensorProto(p, ".");
  ASSERT_TRUE(static_cast<bool>(t));
  EXPECT_EQ(t->floats()[0], 1.0);
  EXPECT_EQ(t->floats()[1], -2.0);

  onnx::TensorProto i;
  i.set_name("i");
  i.set_data_type(onnx::TensorProto::INT64);
  i.add_dims(2);
  int64_t values[] = {INT64_MAX, -7};
  i.set_raw_data(std::string(reinterpret_cast<char *>(values), sizeof(values)));
  auto it = decodeTensorProto(i, ".");
  ASSERT_TRUE(static_cast<bool>(it));
  EXPECT_EQ(it->ints()[0], INT64_MAX);
  EXPECT_EQ(it->ints()[1], -7);
}

TEST(OnnxTensor, EncodeDecodeRoundTrips) {
  Tensor t(DType::F32, {3});
  t.setDouble(0, 0.1);
  t.setDouble(1, -1e30);
  t.setDouble(2, 7);
  onnx::TensorProto p;
  encodeTensorProto(t, p);
  auto back = decodeTensorProto(p, ".");
  ASSERT_TRUE(static_cast<bool>(back));
  EXPECT_EQ(back->floats(), t.floats());
}

TEST(OnnxTensor, RejectsSizeMismatches) {
  onnx::TensorProto p = floatProto({2, 3});
  p.add_float_data(1.0f);
  EXPECT_EQ(errorOf(validateTensorProto(p, ".")),
            "tensor 't': holds 1 values, but its shape needs 6");
  p.clear_float_data();
  p.set_raw_data(std::string(20, '\0'));
  EXPECT_EQ(errorOf(validateTensorProto(p, ".")),
            "tensor 't': raw_data has 20 bytes, but 6 elements of f32 need 24");
  p.add_dims(-1);
  EXPECT_EQ(errorOf(validateTensorProto(p, ".")), "tensor 't': negative dimension -1");
  onnx::TensorProto s;
  s.set_name("s");
  s.set_data_type(onnx::TensorProto::STRING);
  EXPECT_EQ(errorOf(validateTensorProto(s, ".")),
            "tensor 's': element type STRING is not supported");
}

TEST(OnnxTensor, ExternalDataStaysInsideTheModelDirectory) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("ppc-onnxtensor", dir));
  llvm::SmallString<128> file(dir);
  llvm::sys::path::append(file, "w.bin");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(file, ec);
    float values[] = {1, 2, 3, 4};
    os.write(reinterpret_cast<char *>(values), sizeof(values));
  }
  auto external = [](const std::string &location, const std::string &offset) {
    onnx::TensorProto p = floatProto({2});
    p.set_data_location(onnx::TensorProto::EXTERNAL);
    auto *e = p.add_external_data();
    e->set_key("location");
    e->set_value(location);
    auto *o = p.add_external_data();
    o->set_key("offset");
    o->set_value(offset);
    auto *l = p.add_external_data();
    l->set_key("length");
    l->set_value("8");
    return p;
  };
  auto t = decodeTensorProto(external("w.bin", "8"), dir);
  ASSERT_TRUE(static_cast<bool>(t)) << llvm::toString(t.takeError());
  EXPECT_EQ(t->floats()[0], 3.0);
  EXPECT_EQ(t->floats()[1], 4.0);

  EXPECT_EQ(errorOf(validateTensorProto(external("sub/../../w.bin", "0"), dir)),
            "tensor 't': external data location 'sub/../../w.bin' escapes the "
            "model's directory");
  EXPECT_NE(errorOf(validateTensorProto(external("w.bin", "12"), dir))
                .find("external data range [12, 20) is past the end"),
            std::string::npos);
  EXPECT_NE(errorOf(validateTensorProto(external("w.bin", "x"), dir))
                .find("offset 'x' is not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(errorOf(validateTensorProto(external("nope.bin", "0"), dir))
                .find("No such file or directory"),
            std::string::npos);
  llvm::sys::fs::remove_directories(dir);
}
