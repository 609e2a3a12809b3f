// RUN: ppc-opt %s -split-input-file -ppc-bucket-all-reduces | FileCheck %s
// RUN: ppc-opt %s -split-input-file "-ppc-bucket-all-reduces=bucket-bytes=64" | FileCheck %s --check-prefix=SMALL

// Tests that sum all-reduces over the same axes are packed, in the order
// their operands are ready, into one all-reduce placed right after the last
// operand, and unpacked with slices and reshapes for their uses.
// CHECK-LABEL: func.func @two_gradients
// CHECK:         %[[B:.*]] = ppc.reshape %{{.*}} : tensor<1x5xf32> -> tensor<5xf32>
// CHECK:         %[[A:.*]] = ppc.matmul
// CHECK:         %[[FA:.*]] = ppc.reshape %[[A]] : tensor<3x5xf32> -> tensor<15xf32>
// CHECK:         %[[P:.*]] = ppc.concat %[[B]], %[[FA]] axis = 0
// CHECK:         %[[R:.*]] = ppc.all_reduce %[[P]] on @mesh["dp"] sum {ppc.value = "bucket of 2 values"} : tensor<20xf32>
// CHECK:         ppc.slice %[[R]] starts = [0] limits = [5] steps = [1]
// CHECK:         %[[SA:.*]] = ppc.slice %[[R]] starts = [5] limits = [20] steps = [1]
// CHECK:         %[[RA:.*]] = ppc.reshape %[[SA]] : tensor<15xf32> -> tensor<3x5xf32>
// CHECK:         return %[[RA]],
// CHECK-NOT:     ppc.all_reduce
// The bucket of at most 64 bytes holds one of them: no packing.
// SMALL-LABEL: func.func @two_gradients
// SMALL-COUNT-2: ppc.all_reduce
// SMALL-NOT:     ppc.concat
ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 1]
func.func @two_gradients(%x: tensor<2x3xf32>, %y: tensor<2x5xf32>, %v: tensor<1x2xf32>) -> (tensor<3x5xf32>, tensor<5xf32>) {
  %xt = ppc.transpose %x perm = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %vy = ppc.matmul %v, %y : (tensor<1x2xf32>, tensor<2x5xf32>) -> tensor<1x5xf32>
  %b = ppc.reshape %vy : tensor<1x5xf32> -> tensor<5xf32>
  %a = ppc.matmul %xt, %y : (tensor<3x2xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
  %ra = ppc.all_reduce %a on @mesh["dp"] sum : tensor<3x5xf32>
  %rb = ppc.all_reduce %b on @mesh["dp"] sum : tensor<5xf32>
  return %ra, %rb : tensor<3x5xf32>, tensor<5xf32>
}

// -----

// Tests that an all-reduce whose result is needed before a later operand is
// ready stays as it is.
// CHECK-LABEL: func.func @needed_early
// CHECK:         ppc.all_reduce %{{.*}} : tensor<4xf32>
// CHECK:         ppc.all_reduce %{{.*}} : tensor<4xf32>
// CHECK-NOT:     ppc.concat
ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 1]
func.func @needed_early(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r1 = ppc.all_reduce %x on @mesh["dp"] sum : tensor<4xf32>
  %t = ppc.tanh %r1 : tensor<4xf32>
  %r2 = ppc.all_reduce %t on @mesh["dp"] sum : tensor<4xf32>
  return %r2 : tensor<4xf32>
}

// -----

// Tests that a bucket is built right after its last operand even when the
// next op is one of the all-reduces it replaces (a regression: the builder
// kept an iterator to an erased op), and that a rank-0 value packs too.
// CHECK-LABEL: func.func @adjacent
// SMALL-LABEL: func.func @adjacent
// CHECK:         %[[S:.*]] = ppc.tanh
// CHECK:         %[[F:.*]] = ppc.reshape %{{.*}} : tensor<f32> -> tensor<1xf32>
// CHECK:         %[[P:.*]] = ppc.concat %[[F]], %[[S]] axis = 0
// CHECK:         %[[R:.*]] = ppc.all_reduce %[[P]]
// CHECK-NOT:     ppc.all_reduce
ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 1]
func.func @adjacent(%x: tensor<f32>, %y: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) {
  %t = ppc.tanh %y : tensor<4xf32>
  %r1 = ppc.all_reduce %x on @mesh["dp"] sum : tensor<f32>
  %r2 = ppc.all_reduce %t on @mesh["dp"] sum : tensor<4xf32>
  return %r1, %r2 : tensor<f32>, tensor<4xf32>
}
