// ZeRO stages 0-3 of -ppc-partition over dp=2, one case per stage; each
// needs its own pass options, so each has its own RUN line and check
// prefix, and all run on the two-layer model at the end of the file.

// Each model state is sharded over dp along its first dimension that dp
// divides: w1 (3x4) along dimension 1, w2 (4x2) along dimension 0.

// Tests that without ZeRO the model states are replicated and each
// gradient is all-reduced once, with no reduce-scatter or all-gather.
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0 data-parallel=2" "-ppc-partition=dp=2 zero=0" \
// RUN:   | FileCheck %s --check-prefix=ZERO0 --implicit-check-not=ppc.reduce_scatter --implicit-check-not=ppc.all_gather
// ZERO0-LABEL: func.func @train_step
// ZERO0-SAME:    tensor<3x4xf32> {ppc.param = "w1", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []]>}
// ZERO0-SAME:    tensor<3x4xf32> {ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []]>, ppc.state = "momentum:w1"}
// ZERO0-SAME:    tensor<4x2xf32> {ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []]>, ppc.state = "momentum:w2"}
// ZERO0-SAME:    attributes {ppc.zero = 0 : i64}
// ZERO0:         ppc.all_reduce %{{.*}} on @mesh["dp"] sum {{.*}} : tensor<3x4xf32>
// ZERO0:         ppc.all_reduce %{{.*}} on @mesh["dp"] sum {{.*}} : tensor<4x2xf32>
// ZERO0:         return

// Tests ZeRO stage 1: the optimizer state is sharded; gradients are summed
// whole over the micro-batches, the step's gradient is reduce-scattered
// once per parameter, the update runs on the shards, and the new
// parameters are all-gathered back to whole replicas for the return.
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0 data-parallel=2 micro-batches=2" "-ppc-partition=dp=2 zero=1" \
// RUN:   | FileCheck %s --check-prefix=ZERO1
// ZERO1-LABEL: func.func @train_step
// ZERO1-SAME:    tensor<3x4xf32> {ppc.param = "w1", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []]>}
// ZERO1-SAME:    tensor<4x2xf32> {ppc.param = "w2", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []]>}
// ZERO1-SAME:    tensor<3x2xf32> {ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], [dp]]>, ppc.state = "momentum:w1"}
// ZERO1-SAME:    tensor<2x2xf32> {ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}dp], []]>, ppc.state = "momentum:w2"}
// ZERO1-SAME:    -> (tensor<3x4xf32> {ppc.param = "w1", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []]>}
// ZERO1-SAME:    tensor<3x2xf32> {ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], [dp]]>, ppc.state = "momentum:w1"}
// ZERO1-SAME:    attributes {ppc.zero = 1 : i64}
// ZERO1-NOT:     ppc.reduce_scatter
// ZERO1:         %[[G1:.*]] = ppc.div {{.*}}ppc.step_grad = array<i64: 0>} : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
// ZERO1-NEXT:    %[[G1S:.*]] = ppc.reduce_scatter %[[G1]] on @mesh["dp"] dim = 1 sum {{.*}} : tensor<3x4xf32> -> tensor<3x2xf32>
// ZERO1-NEXT:    %[[G2:.*]] = ppc.div {{.*}}ppc.step_grad = array<i64: 1>} : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
// ZERO1-NEXT:    %[[G2S:.*]] = ppc.reduce_scatter %[[G2]] on @mesh["dp"] dim = 0 sum {{.*}} : tensor<4x2xf32> -> tensor<2x2xf32>
// ZERO1-NOT:     ppc.reduce_scatter
// ZERO1:         ppc.add %{{.*}}, %[[G1S]] {{.*}} -> tensor<3x2xf32>
// ZERO1:         %[[NEW1:.*]] = ppc.sub {{.*}} -> tensor<3x2xf32>
// ZERO1:         %[[NEW2:.*]] = ppc.sub {{.*}} -> tensor<2x2xf32>
// ZERO1:         %[[P1:.*]] = ppc.all_gather %[[NEW1]] on @mesh["dp"] dim = 1 {{.*}} : tensor<3x2xf32> -> tensor<3x4xf32>
// ZERO1-NEXT:    %[[P2:.*]] = ppc.all_gather %[[NEW2]] on @mesh["dp"] dim = 0 {{.*}} : tensor<2x2xf32> -> tensor<4x2xf32>
// ZERO1:         return %[[P1]], %[[P2]],

// Tests ZeRO stage 2: each micro-batch's gradient is reduce-scattered as
// soon as it is computed (two per parameter here), and the shards are
// accumulated; the parameters are still all-gathered at the end.
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0 data-parallel=2 micro-batches=2" "-ppc-partition=dp=2 zero=2" \
// RUN:   | FileCheck %s --check-prefix=ZERO2
// ZERO2-LABEL: func.func @train_step
// ZERO2-SAME:    attributes {ppc.zero = 2 : i64}
// ZERO2-NOT:     ppc.reduce_scatter
// ZERO2:         %[[D2:.*]] = ppc.matmul {{.*}}ppc.mb = 0 : i64, ppc.mb_grad = array<i64: 1>{{.*}} -> tensor<4x2xf32>
// ZERO2-NEXT:    ppc.reduce_scatter %[[D2]] on @mesh["dp"] dim = 0 sum {{.*}} : tensor<4x2xf32> -> tensor<2x2xf32>
// ZERO2:         %[[D1:.*]] = ppc.matmul {{.*}}ppc.mb = 0 : i64, ppc.mb_grad = array<i64: 0>{{.*}} -> tensor<3x4xf32>
// ZERO2-NEXT:    ppc.reduce_scatter %[[D1]] on @mesh["dp"] dim = 1 sum {{.*}} : tensor<3x4xf32> -> tensor<3x2xf32>
// ZERO2:         %[[D2:.*]] = ppc.matmul {{.*}}ppc.mb = 1 : i64, ppc.mb_grad = array<i64: 1>{{.*}} -> tensor<4x2xf32>
// ZERO2-NEXT:    ppc.reduce_scatter %[[D2]] on @mesh["dp"] dim = 0 sum {{.*}} : tensor<4x2xf32> -> tensor<2x2xf32>
// ZERO2:         %[[D1:.*]] = ppc.matmul {{.*}}ppc.mb = 1 : i64, ppc.mb_grad = array<i64: 0>{{.*}} -> tensor<3x4xf32>
// ZERO2-NEXT:    ppc.reduce_scatter %[[D1]] on @mesh["dp"] dim = 1 sum {{.*}} : tensor<3x4xf32> -> tensor<3x2xf32>
// ZERO2-NOT:     ppc.reduce_scatter
// ZERO2:         ppc.div {{.*}}ppc.step_grad = array<i64: 0>} : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
// ZERO2:         ppc.div {{.*}}ppc.step_grad = array<i64: 1>} : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
// ZERO2-NOT:     ppc.reduce_scatter
// ZERO2:         ppc.all_gather {{.*}} on @mesh["dp"] dim = 1 {{.*}} : tensor<3x2xf32> -> tensor<3x4xf32>
// ZERO2-NEXT:    ppc.all_gather {{.*}} on @mesh["dp"] dim = 0 {{.*}} : tensor<2x2xf32> -> tensor<4x2xf32>
// ZERO2:         return

// Tests ZeRO stage 3: the parameters themselves are stored and returned as
// shards; each micro-batch all-gathers w1 and w2 right before their forward
// uses and w2 again for its backward (w1's backward needs only the data),
// and the update runs on the shards with no all-gather at the end.
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0 data-parallel=2 micro-batches=2" "-ppc-partition=dp=2 zero=3" \
// RUN:   | FileCheck %s --check-prefix=ZERO3
// ZERO3-LABEL: func.func @train_step
// ZERO3-SAME:    %[[W1:arg[0-9]+]]: tensor<3x2xf32> {ppc.param = "w1", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], [dp]]>}
// ZERO3-SAME:    %[[W2:arg[0-9]+]]: tensor<2x2xf32> {ppc.param = "w2", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}dp], []]>}
// ZERO3-SAME:    -> (tensor<3x2xf32> {ppc.param = "w1", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], [dp]]>}, tensor<2x2xf32> {ppc.param = "w2", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}dp], []]>}
// ZERO3-SAME:    attributes {ppc.zero = 3 : i64}
// ZERO3:         %[[F1:.*]] = ppc.all_gather %[[W1]] on @mesh["dp"] dim = 1 {ppc.value = "w1", ppc.why = "ZeRO 3: the parameter, gathered for micro-batch 0's forward: {{\[\[}}], [dp]] -> {{\[\[}}], []]"} : tensor<3x2xf32> -> tensor<3x4xf32>
// ZERO3-NEXT:    ppc.matmul %{{.*}}, %[[F1]] {ppc.fwd = 0 : i64, ppc.mb = 0 : i64
// ZERO3:         %[[F2:.*]] = ppc.all_gather %[[W2]] on @mesh["dp"] dim = 0 {ppc.value = "w2", ppc.why = "{{[^"]*}}"} : tensor<2x2xf32> -> tensor<4x2xf32>
// ZERO3-NEXT:    ppc.matmul %{{.*}}, %[[F2]] {ppc.fwd = 2 : i64, ppc.mb = 0 : i64
// ZERO3:         %[[B2:.*]] = ppc.all_gather %[[W2]] on @mesh["dp"] dim = 0 {ppc.value = "w2", ppc.why = "{{[^"]*}}"} : tensor<2x2xf32> -> tensor<4x2xf32>
// ZERO3-NEXT:    ppc.transpose %[[B2]] perm = [1, 0] {ppc.bwd = 2 : i64, ppc.mb = 0 : i64
// ZERO3:         %[[F1B:.*]] = ppc.all_gather %[[W1]] on @mesh["dp"] dim = 1 {ppc.value = "w1", ppc.why = "{{[^"]*}}"} : tensor<3x2xf32> -> tensor<3x4xf32>
// ZERO3-NEXT:    ppc.matmul %{{.*}}, %[[F1B]] {ppc.fwd = 0 : i64, ppc.mb = 1 : i64
// ZERO3:         ppc.all_gather %[[W2]] on @mesh["dp"] dim = 0
// ZERO3-NEXT:    ppc.matmul {{.*}}ppc.fwd = 2 : i64, ppc.mb = 1 : i64
// ZERO3:         ppc.all_gather %[[W2]] on @mesh["dp"] dim = 0
// ZERO3-NEXT:    ppc.transpose {{.*}}ppc.bwd = 2 : i64, ppc.mb = 1 : i64
// ZERO3-NOT:     ppc.all_gather
// ZERO3:         %[[NEW1:.*]] = ppc.sub %[[W1]], {{.*}} -> tensor<3x2xf32>
// ZERO3:         %[[NEW2:.*]] = ppc.sub %[[W2]], {{.*}} -> tensor<2x2xf32>
// ZERO3-NOT:     ppc.all_gather
// ZERO3:         return %[[NEW1]], %[[NEW2]],
func.func @forward(%x: tensor<4x3xf32> {ppc.input = "x"}, %w1: tensor<3x4xf32> {ppc.param = "w1"},
                   %w2: tensor<4x2xf32> {ppc.param = "w2"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %h = ppc.matmul %x, %w1 : (tensor<4x3xf32>, tensor<3x4xf32>) -> tensor<4x4xf32>
  %a = ppc.tanh %h : tensor<4x4xf32>
  %y = ppc.matmul %a, %w2 : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %l = ppc.reduce_mean %y axes = [0, 1] keepdims = false : (tensor<4x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
