// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 data-parallel=2" "-ppc-partition=dp=2 tp=2" | FileCheck %s
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 data-parallel=2" "-ppc-partition=dp=2 tp=2" | grep -c ppc.all_reduce | FileCheck %s --check-prefix=COUNT

// Tests data-parallel partitioning of a training step: the mesh is declared
// (axes major to minor in rank order), the batch is split over dp and the
// parameters replicated, every op records its layout, the forward and
// backward run on local shards without communication, each gradient is
// all-reduced once (for the gradient norm, and reused by the optimizer), and
// the loss (a mean: each rank's mean scaled by its share) is all-reduced
// before it is returned.
// CHECK:       ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 2]
// CHECK-LABEL: func.func @train_step
// CHECK-SAME:    %[[W:arg[0-9]+]]: tensor<3x5xf32> {ppc.param = "w", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []]>}
// CHECK-SAME:    %[[X:arg[0-9]+]]: tensor<2x3xf32> {ppc.input = "x", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}dp], []]>}
// CHECK-SAME:    tensor<f32> {ppc.output = "loss", ppc.sharding = #ppc.sharding<@mesh, []>}
// CHECK:         %[[H:.*]] = ppc.matmul %[[X]], %[[W]] {ppc.fwd = 0 : i64, ppc.mb = 0 : i64, ppc.shardings = [#ppc.sharding<@mesh, {{\[\[}}dp], []]>]} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
// CHECK:         %[[MEAN:.*]] = ppc.reduce_mean
// CHECK:         %[[SHARE:.*]] = ppc.constant dense<5.000000e-01>
// CHECK:         %[[LOCAL_LOSS:.*]] = ppc.mul %[[MEAN]], %[[SHARE]] {{.*}}partial = [dp]
// CHECK-NOT:     ppc.all_reduce
// CHECK:         %[[DW_PART:.*]] = ppc.matmul {{.*}}partial = [dp]{{.*}} -> tensor<3x5xf32>
// CHECK:         %[[DW:.*]] = ppc.all_reduce %[[DW_PART]] on @mesh["dp"] sum {ppc.value = "{{.*}}"} : tensor<3x5xf32>
// CHECK:         ppc.mul %[[DW]], %[[DW]]
// CHECK:         ppc.all_reduce %{{.*}} on @mesh["dp"] sum {{.*}} : tensor<5xf32>
// CHECK:         %[[STEP:.*]] = ppc.mul %[[DW]],
// CHECK:         ppc.sub %[[W]], %[[STEP]]
// CHECK:         %[[LOSS:.*]] = ppc.all_reduce %[[LOCAL_LOSS]] on @mesh["dp"] sum
// CHECK:         return {{.*}}, %[[LOSS]],
// Exactly the three reductions: two gradients and the loss.
// COUNT: 3
func.func @forward(%x: tensor<4x3xf32> {ppc.input = "x"}, %w: tensor<3x5xf32> {ppc.param = "w"},
                   %b: tensor<5xf32> {ppc.param = "b"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %h = ppc.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %y = ppc.add %h, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %t = ppc.tanh %y : tensor<4x5xf32>
  %l = ppc.reduce_mean %t axes = [0, 1] keepdims = false : (tensor<4x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
