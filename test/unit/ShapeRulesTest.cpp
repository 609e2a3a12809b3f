//===- ShapeRulesTest.cpp - shape arithmetic ------------------------------===//

#include "ir/ShapeRules.h"

#include <gtest/gtest.h>

using namespace ppc;

namespace {
/// Collects the error a rule reports.
struct Errors {
  std::string last;
  ErrorFn fn() {
    return [this](const llvm::Twine &m) { last = m.str(); };
  }
};
} // namespace

TEST(ShapeRules, BroadcastFollowsNumpy) {
  Errors e;
  auto s = broadcastShapes({{2, 1, 4}, {3, 1}}, e.fn());
  ASSERT_TRUE(succeeded(s));
  EXPECT_EQ(*s, (Shape{2, 3, 4}));
  EXPECT_TRUE(succeeded(broadcastShapes({{}, {5}}, e.fn())));
  EXPECT_TRUE(failed(broadcastShapes({{2, 3}, {4, 3}}, e.fn())));
  EXPECT_EQ(e.last, "shapes [2,3] and [4,3] do not broadcast");
}

TEST(ShapeRules, BroadcastsToIsUnidirectional) {
  EXPECT_TRUE(broadcastsTo({1, 16}, {2, 16}));
  EXPECT_FALSE(broadcastsTo({2, 16}, {1, 16}));
  EXPECT_FALSE(broadcastsTo({1, 2, 16}, {2, 16}));
}

TEST(ShapeRules, MatmulBroadcastsBatch) {
  Errors e;
  auto s = matmulShape({2, 1, 8, 4}, {3, 4, 5}, e.fn());
  ASSERT_TRUE(succeeded(s));
  EXPECT_EQ(*s, (Shape{2, 3, 8, 5}));
  EXPECT_TRUE(failed(matmulShape({8, 4}, {5, 4}, e.fn())));
  EXPECT_NE(e.last.find("contraction sizes differ"), std::string::npos);
  EXPECT_TRUE(failed(matmulShape({4}, {4, 5}, e.fn())));
}

TEST(ShapeRules, ReduceKeepsOrDropsAxes) {
  Errors e;
  EXPECT_EQ(*reduceShape({2, 3, 4}, {0, 2}, true, e.fn()), (Shape{1, 3, 1}));
  EXPECT_EQ(*reduceShape({2, 3, 4}, {0, 2}, false, e.fn()), (Shape{3}));
  EXPECT_EQ(*reduceShape({2, 3}, {}, false, e.fn()), (Shape{2, 3}));
  EXPECT_TRUE(failed(reduceShape({2, 3}, {1, 0}, false, e.fn())));
  EXPECT_TRUE(failed(reduceShape({2, 3}, {2}, false, e.fn())));
}

TEST(ShapeRules, SliceSizes) {
  Errors e;
  EXPECT_EQ(*sliceSize(10, 0, 10, 3, e.fn()), 4);
  EXPECT_EQ(*sliceSize(10, 9, -1, -1, e.fn()), 10);
  EXPECT_EQ(*sliceSize(10, 8, 2, -3, e.fn()), 2);
  EXPECT_EQ(*sliceSize(10, 4, 4, 1, e.fn()), 0);
  EXPECT_TRUE(failed(sliceSize(10, 0, 11, 1, e.fn())));
  EXPECT_TRUE(failed(sliceSize(10, 0, 5, 0, e.fn())));
}

TEST(ShapeRules, EinsumParsesAndInfers) {
  Errors e;
  auto spec = parseEinsum("bij,bjk->bik", e.fn());
  ASSERT_TRUE(succeeded(spec));
  auto s = einsumShape(*spec, {{2, 3, 4}, {2, 4, 5}}, e.fn());
  ASSERT_TRUE(succeeded(s));
  EXPECT_EQ(*s, (Shape{2, 3, 5}));
  EXPECT_TRUE(failed(einsumShape(*spec, {{2, 3, 4}, {2, 3, 5}}, e.fn())));
  EXPECT_NE(e.last.find("label 'j'"), std::string::npos);
  EXPECT_TRUE(failed(parseEinsum("ij,jk", e.fn())));
  EXPECT_TRUE(failed(parseEinsum("i...,jk->ik", e.fn())));
  EXPECT_TRUE(failed(parseEinsum("ij->ii", e.fn())));
}
