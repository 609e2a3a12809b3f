// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=4" "-ppc-partition=pp=2" "-ppc-pipeline=schedule=1f1b" | FileCheck %s

// Tests that with 2 pipeline ranks the step is split into one program per
// rank: rank 0 holds the first two layers (w1, w2) and the data, rank 1 the
// last two (w3, w4), the loss and the other outputs. Micro-batch 0's
// activation leaves rank 0 right after its forward slot and arrives first
// on rank 1; its gradient comes back in rank 0's backward slot. The
// gradient norm's partial sum from rank 0 reaches rank 1 in the step slot.
// CHECK:       module attributes {ppc.schedule = {kind = "1f1b", micro_batches = 4 : i64, ranks = 2 : i64, virtual_stages = 1 : i64}}
// CHECK:       ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [2, 1, 1]
// CHECK-LABEL: func.func @train_step_pp0
// CHECK-SAME:    (%[[W1:arg[0-9]+]]: tensor<4x8xf32> {ppc.param = "w1"
// CHECK-SAME:     %[[W2:arg[0-9]+]]: tensor<8x8xf32> {ppc.param = "w2"
// CHECK-SAME:     tensor<32x4xf32> {ppc.input = "x"
// CHECK-SAME:    -> (tensor<4x8xf32> {ppc.param = "w1", ppc.sharding = {{[^}]*}}}, tensor<8x8xf32> {ppc.param = "w2", ppc.sharding = {{[^}]*}}})
// CHECK-SAME:    attributes {ppc.pipeline_rank = 0 : i64, ppc.stages = array<i64: 0>
// CHECK:         %[[H0:.*]] = ppc.matmul %{{.*}}, %[[W1]] {ppc.fwd = 0 : i64, ppc.mb = 0 : i64, {{.*}}ppc.slot = "F0@s0"}
// CHECK:         %[[A0:.*]] = ppc.matmul %{{.*}}, %[[W2]] {ppc.fwd = 2 : i64, ppc.mb = 0 : i64, {{.*}}ppc.slot = "F0@s0"}
// CHECK-NEXT:    ppc.send %[[A0]] to @mesh["pp"] 1 {ppc.slot = "F0@s0"} : tensor<8x8xf32>
// CHECK:         ppc.recv from @mesh["pp"] 1 {ppc.slot = "B0@s0"} : tensor<8x8xf32>
// CHECK:         ppc.send %{{.*}} to @mesh["pp"] 1 {ppc.slot = "step", ppc.value = "train_step"} : tensor<f32>
// CHECK:         return
// CHECK-LABEL: func.func @train_step_pp1
// CHECK-SAME:    (%[[W3:arg[0-9]+]]: tensor<8x8xf32> {ppc.param = "w3"
// CHECK-SAME:     %[[W4:arg[0-9]+]]: tensor<8x2xf32> {ppc.param = "w4"
// CHECK-SAME:    tensor<f32> {ppc.output = "loss"
// CHECK-SAME:    attributes {ppc.pipeline_rank = 1 : i64, ppc.stages = array<i64: 1>
// CHECK-NEXT:    %[[R0:.*]] = ppc.recv from @mesh["pp"] 0 {ppc.slot = "F0@s1"} : tensor<8x8xf32>
// CHECK-NEXT:    ppc.tanh %[[R0]] {ppc.fwd = 3 : i64, ppc.mb = 0 : i64, {{.*}}ppc.slot = "F0@s1"}
// CHECK-NEXT:    ppc.matmul %{{.*}}, %[[W3]] {ppc.fwd = 4 : i64, ppc.mb = 0 : i64, {{.*}}ppc.slot = "F0@s1"}
// CHECK:         ppc.matmul %{{.*}}, %[[W4]] {ppc.fwd = 6 : i64, ppc.mb = 0 : i64, {{.*}}ppc.slot = "F0@s1"}
// CHECK-NEXT:    ppc.reduce_mean {{.*}}ppc.fwd = 7 : i64, ppc.mb = 0 : i64, {{.*}}ppc.slot = "F0@s1"
// CHECK:         ppc.send %{{.*}} to @mesh["pp"] 0 {ppc.slot = "B0@s1"} : tensor<8x8xf32>
// CHECK:         ppc.recv from @mesh["pp"] 0 {ppc.slot = "step", ppc.value = "train_step"} : tensor<f32>
// CHECK:         return

func.func @forward(%x: tensor<8x4xf32> {ppc.input = "x"}, %w1: tensor<4x8xf32> {ppc.param = "w1"},
                   %w2: tensor<8x8xf32> {ppc.param = "w2"}, %w3: tensor<8x8xf32> {ppc.param = "w3"},
                   %w4: tensor<8x2xf32> {ppc.param = "w4"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %h1 = ppc.matmul %x, %w1 : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %a1 = ppc.tanh %h1 : tensor<8x8xf32>
  %h2 = ppc.matmul %a1, %w2 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %a2 = ppc.tanh %h2 : tensor<8x8xf32>
  %h3 = ppc.matmul %a2, %w3 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %a3 = ppc.tanh %h3 : tensor<8x8xf32>
  %h4 = ppc.matmul %a3, %w4 : (tensor<8x8xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>
  %l = ppc.reduce_mean %h4 axes = [0, 1] keepdims = false : (tensor<8x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
