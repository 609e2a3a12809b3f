//===- TrainedModelTest.cpp - the ONNX writer of trained models -----------===//
//
// runtime/TrainedModel.h is the one writer of trained models (`--export`
// of the executables and of `ppc simulate`, `ppc checkpoint consolidate`):
// values of another float type than their initializer's are rounded to it
// (nearest even, as a cast), --untie's copies are made again, and a bad
// value leaves the destination untouched.
//
//===----------------------------------------------------------------------===//

#include "runtime/TrainedModel.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>

namespace {

using ppcrt::DType;
using ppcrt::GlobalTensor;

class TrainedModelTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("trained-model", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string file(const char *name) const {
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, name);
    return std::string(path);
  }

  /// A model with f32, f16 and bf16 initializers of two elements, an i64
  /// one, and an Identity of the f32 one named as a merged parameter.
  std::string writeModel() {
    onnx::ModelProto model;
    onnx::GraphProto &graph = *model.mutable_graph();
    auto add = [&](const char *name, int type) {
      onnx::TensorProto &init = *graph.add_initializer();
      init.set_name(name);
      init.set_data_type(type);
      init.add_dims(2);
      std::string zeros(2 * (type == onnx::TensorProto::FLOAT   ? 4
                             : type == onnx::TensorProto::INT64 ? 8
                                                                : 2),
                        '\0');
      init.set_raw_data(zeros);
    };
    add("w32", onnx::TensorProto::FLOAT);
    add("w16", onnx::TensorProto::FLOAT16);
    add("wbf", onnx::TensorProto::BFLOAT16);
    add("ids", onnx::TensorProto::INT64);
    onnx::NodeProto &identity = *graph.add_node();
    identity.set_op_type("Identity");
    identity.add_input("w32");
    identity.add_output("head.weight");
    std::string path = file("model.onnx");
    std::ofstream(path, std::ios::binary) << model.SerializeAsString();
    return path;
  }

  static GlobalTensor f64(std::vector<double> values) {
    GlobalTensor t;
    t.dtype = DType::F64;
    t.shape = {int64_t(values.size())};
    t.data.resize(values.size() * 8);
    std::memcpy(t.data.data(), values.data(), t.data.size());
    return t;
  }

  static onnx::ModelProto read(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    onnx::ModelProto model;
    EXPECT_TRUE(model.ParseFromString(bytes));
    return model;
  }

  static const onnx::TensorProto *find(const onnx::ModelProto &model, const char *name) {
    for (const onnx::TensorProto &init : model.graph().initializer())
      if (init.name() == name)
        return &init;
    return nullptr;
  }

  /// Element i of a 16-bit initializer as a double.
  static double element16(const onnx::TensorProto &init, int i,
                          const llvm::fltSemantics &semantics) {
    uint16_t bits;
    std::memcpy(&bits, init.raw_data().data() + 2 * i, 2);
    return llvm::APFloat(semantics, llvm::APInt(16, bits)).convertToDouble();
  }

  llvm::SmallString<128> dir;
};

TEST_F(TrainedModelTest, RoundsEachValueToItsInitializersType) {
  std::string model = writeModel(), out = file("out.onnx");
  // 1 + 2^-11 + 2^-20 is past the tie between f16's 1 and 1 + 2^-10 (up);
  // 1 + 2^-8 is bf16's exact tie between 1 and 1 + 2^-7 (to even: 1).
  double up = 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -20);
  std::map<std::string, GlobalTensor> params = {{"w32", f64({0.1, -3.0})},
                                                {"w16", f64({up, 65504.0})},
                                                {"wbf", f64({1 + std::ldexp(1.0, -8), -2.5})}};
  ASSERT_FALSE(bool(ppcrt::writeTrainedModel(model, false, params, out, "--export")));
  onnx::ModelProto written = read(out);
  const onnx::TensorProto *w32 = find(written, "w32"), *w16 = find(written, "w16"),
                          *wbf = find(written, "wbf");
  ASSERT_TRUE(w32 && w16 && wbf);
  float f[2];
  std::memcpy(f, w32->raw_data().data(), 8);
  EXPECT_EQ(f[0], 0.1f);
  EXPECT_EQ(f[1], -3.0f);
  EXPECT_EQ(element16(*w16, 0, llvm::APFloat::IEEEhalf()), 1 + std::ldexp(1.0, -10));
  EXPECT_EQ(element16(*w16, 1, llvm::APFloat::IEEEhalf()), 65504.0);
  EXPECT_EQ(element16(*wbf, 0, llvm::APFloat::BFloat()), 1.0);
  EXPECT_EQ(element16(*wbf, 1, llvm::APFloat::BFloat()), -2.5);
}

TEST_F(TrainedModelTest, UntieGivesAMergedParameterItsOwnInitializer) {
  std::string model = writeModel(), out = file("out.onnx");
  std::map<std::string, GlobalTensor> params = {{"w32", f64({1, 2})}, {"head.weight", f64({3, 4})}};
  ASSERT_FALSE(bool(ppcrt::writeTrainedModel(model, true, params, out, "--export")));
  onnx::ModelProto written = read(out);
  const onnx::TensorProto *head = find(written, "head.weight");
  ASSERT_TRUE(head);
  float f[2];
  std::memcpy(f, head->raw_data().data(), 8);
  EXPECT_EQ(f[0], 3.0f);
  EXPECT_EQ(f[1], 4.0f);
  for (const onnx::NodeProto &node : written.graph().node())
    EXPECT_NE(node.op_type(), "Identity") << "the merged parameter's Identity stays";
  // Without --untie the model has no initializer for it.
  llvm::Error e = ppcrt::writeTrainedModel(model, false, params, file("tied.onnx"), "--export");
  ASSERT_TRUE(bool(e));
  EXPECT_EQ(llvm::toString(std::move(e)), "--export: the model '" + model +
                                              "' has no initializer 'head.weight' for the "
                                              "trained parameter");
}

TEST_F(TrainedModelTest, RefusesAValueItCannotWriteAndKeepsTheDestination) {
  std::string model = writeModel(), out = file("out.onnx");
  std::ofstream(out) << "before";
  std::map<std::string, GlobalTensor> params = {{"ids", f64({1, 2})}};
  llvm::Error e = ppcrt::writeTrainedModel(model, false, params, out, "--export");
  ASSERT_TRUE(bool(e));
  EXPECT_EQ(llvm::toString(std::move(e)),
            "--export: initializer 'ids' has an element type the trained value cannot be "
            "written as");
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "before");
}

} // namespace
