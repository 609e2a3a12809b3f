// RUN: ppc-opt %s "-ppc-plan-shardings=tp=4 memory-per-rank=60000" | FileCheck %s --check-prefix=PLAN
// RUN: ppc-opt %s "-ppc-plan-shardings=tp=4 memory-per-rank=60000" -ppc-partition=tp=4 | FileCheck %s --check-prefix=SPMD
// RUN: ppc-opt %s -ppc-plan-shardings=tp=4 | FileCheck %s --check-prefix=ROOMY
// RUN: ppc-opt %s "-ppc-plan-shardings=tp=4 tp-shard=w2:0" | FileCheck %s --check-prefix=PINNED

// Tests that the planner splits an MLP as Megatron does when the replicated
// plan does not fit: the first weight by columns, the second by rows, so
// that the step needs a single all-reduce of the output. With memory to
// spare, splitting does not pay at this size and everything stays whole.

// PLAN: ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 1, 4]
// PLAN-LABEL: func.func @train_step
// PLAN-SAME: ppc.input = "x", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []]>
// PLAN-SAME: ppc.param = "w1", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], [tp]]>
// PLAN-SAME: ppc.param = "w2", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}tp], []]>
// PLAN: ppc.plan = {comm_seconds = {{.*}}, compute_seconds = {{.*}}, memory_per_rank = 6.000000e+04 : f64, peak_bytes = {{.*}}, plans_priced = {{[0-9]+}} : i64}

// SPMD-LABEL: func.func @train_step
// SPMD-SAME: %arg1: tensor<32x32xf32>
// SPMD-SAME: %arg2: tensor<32x32xf32>
// SPMD: ppc.matmul %arg0, %arg1 {ppc.shardings = [#ppc.sharding<@mesh, {{\[\[}}], [tp]]>]}
// SPMD: ppc.relu
// SPMD: %[[PART:.*]] = ppc.matmul {{.*}} {ppc.shardings = [#ppc.sharding<@mesh, {{\[\[}}], []], partial = [tp]>]}
// SPMD: %[[FULL:.*]] = ppc.all_reduce %[[PART]] on @mesh["tp"] sum
// SPMD-NOT: ppc.all_
// SPMD: return %[[FULL]]

// ROOMY: ppc.param = "w1", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []]>
// ROOMY-SAME: ppc.param = "w2", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []]>

// A pinned row split of w2 is kept, whatever the cost.
// PINNED: ppc.param = "w2", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}tp], []]>

func.func @train_step(%x: tensor<64x32xf32> {ppc.input = "x"},
                      %w1: tensor<32x128xf32> {ppc.param = "w1"},
                      %w2: tensor<128x32xf32> {ppc.param = "w2"})
    -> (tensor<64x32xf32> {ppc.output = "y"}) {
  %h = ppc.matmul %x, %w1 : (tensor<64x32xf32>, tensor<32x128xf32>) -> tensor<64x128xf32>
  %a = ppc.relu %h : tensor<64x128xf32>
  %y = ppc.matmul %a, %w2 : (tensor<64x128xf32>, tensor<128x32xf32>) -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}
