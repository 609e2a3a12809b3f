//===- ShapeRulesTest.cpp - shape arithmetic ------------------------------===//

#include "ir/ShapeRules.h"

#include <gtest/gtest.h>

using namespace ppc;

namespace {
/// Collects the error a rule reports (passed as the rule's ErrorFn).
struct Errors {
  std::string last;
  void operator()(const llvm::Twine &m) { last = m.str(); }
};
} // namespace

TEST(ShapeRules, BroadcastFollowsNumpy) {
  Errors e;
  auto s = broadcastShapes({{2, 1, 4}, {3, 1}}, e);
  ASSERT_TRUE(succeeded(s));
  EXPECT_EQ(*s, (Shape{2, 3, 4}));
  EXPECT_TRUE(succeeded(broadcastShapes({{}, {5}}, e)));
  EXPECT_TRUE(failed(broadcastShapes({{2, 3}, {4, 3}}, e)));
  EXPECT_EQ(e.last, "shapes [2,3] and [4,3] do not broadcast");
}

TEST(ShapeRules, BroadcastsToIsUnidirectional) {
  EXPECT_TRUE(broadcastsTo({1, 16}, {2, 16}));
  EXPECT_FALSE(broadcastsTo({2, 16}, {1, 16}));
  EXPECT_FALSE(broadcastsTo({1, 2, 16}, {2, 16}));
}

TEST(ShapeRules, MatmulBroadcastsBatch) {
  Errors e;
  auto s = matmulShape({2, 1, 8, 4}, {3, 4, 5}, e);
  ASSERT_TRUE(succeeded(s));
  EXPECT_EQ(*s, (Shape{2, 3, 8, 5}));
  EXPECT_TRUE(failed(matmulShape({8, 4}, {5, 4}, e)));
  EXPECT_NE(e.last.find("contraction sizes differ"), std::string::npos);
  EXPECT_TRUE(failed(matmulShape({4}, {4, 5}, e)));
}

TEST(ShapeRules, ReduceKeepsOrDropsAxes) {
  Errors e;
  EXPECT_EQ(*reduceShape({2, 3, 4}, {0, 2}, true, e), (Shape{1, 3, 1}));
  EXPECT_EQ(*reduceShape({2, 3, 4}, {0, 2}, false, e), (Shape{3}));
  EXPECT_EQ(*reduceShape({2, 3}, {}, false, e), (Shape{2, 3}));
  EXPECT_TRUE(failed(reduceShape({2, 3}, {1, 0}, false, e)));
  EXPECT_TRUE(failed(reduceShape({2, 3}, {2}, false, e)));
}

TEST(ShapeRules, SliceSizes) {
  Errors e;
  EXPECT_EQ(*sliceSize(10, 0, 10, 3, e), 4);
  EXPECT_EQ(*sliceSize(10, 9, -1, -1, e), 10);
  EXPECT_EQ(*sliceSize(10, 8, 2, -3, e), 2);
  EXPECT_EQ(*sliceSize(10, 4, 4, 1, e), 0);
  EXPECT_TRUE(failed(sliceSize(10, 0, 11, 1, e)));
  EXPECT_TRUE(failed(sliceSize(10, 0, 5, 0, e)));
  // Found by fuzz/onnx-import: steps too large to round up by or to negate.
  EXPECT_EQ(*sliceSize(10, 4, 10, INT64_MAX, e), 1);
  EXPECT_EQ(*sliceSize(10, 9, -1, INT64_MIN, e), 1);
}

TEST(ShapeRules, EinsumParsesAndInfers) {
  Errors e;
  auto spec = parseEinsum("bij,bjk->bik", e);
  ASSERT_TRUE(succeeded(spec));
  auto s = einsumShape(*spec, {{2, 3, 4}, {2, 4, 5}}, e);
  ASSERT_TRUE(succeeded(s));
  EXPECT_EQ(*s, (Shape{2, 3, 5}));
  EXPECT_TRUE(failed(einsumShape(*spec, {{2, 3, 4}, {2, 3, 5}}, e)));
  EXPECT_NE(e.last.find("label 'j'"), std::string::npos);
  EXPECT_TRUE(failed(parseEinsum("ij,jk", e)));
  EXPECT_TRUE(failed(parseEinsum("i...,jk->ik", e)));
  EXPECT_TRUE(failed(parseEinsum("ij->ii", e)));
}
