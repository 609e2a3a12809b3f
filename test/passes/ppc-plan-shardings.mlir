// Sharding plans -ppc-plan-shardings chooses for a two-layer MLP over tp=4.
// The cases need different pass options, so each has its own RUN line and
// check prefix; all run on the MLP at the end of the file.

// Tests that the planner splits an MLP as Megatron does when the replicated
// plan does not fit: the first weight by columns, the second by rows, so
// that the step needs a single all-reduce of the output. The chosen plan's
// cost and the budget are recorded on the step.
// RUN: ppc-opt %s "-ppc-plan-shardings=tp=4 memory-per-rank=60000" | FileCheck %s --check-prefix=PLAN
// PLAN: ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 1, 4]
// PLAN-LABEL: func.func @train_step
// PLAN-SAME: ppc.input = "x", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []]>
// PLAN-SAME: ppc.param = "w1", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], [tp]]>
// PLAN-SAME: ppc.param = "w2", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}tp], []]>
// PLAN: ppc.plan = {comm_seconds = {{.*}}, compute_seconds = {{.*}}, host_bytes = 0.000000e+00 : f64, memory_per_rank = 6.000000e+04 : f64, offload = "none", offload_seconds = 0.000000e+00 : f64, peak_bytes = {{.*}}, plans_priced = {{[0-9]+}} : i64, pricer_runs = {{[0-9]+}} : i64, recompute = "none"}

// Tests that -ppc-partition carries out that plan: each rank holds a
// 32x32 block of w1 (columns) and of w2 (rows), the first matmul runs on
// the column shards, the second yields partial sums over tp, and their
// all-reduce is the last collective and gives the returned output.
// RUN: ppc-opt %s "-ppc-plan-shardings=tp=4 memory-per-rank=60000" -ppc-partition=tp=4 | FileCheck %s --check-prefix=SPMD
// SPMD-LABEL: func.func @train_step
// SPMD-SAME: %arg1: tensor<32x32xf32>
// SPMD-SAME: %arg2: tensor<32x32xf32>
// SPMD: ppc.matmul %arg0, %arg1 {ppc.shardings = [#ppc.sharding<@mesh, {{\[\[}}], [tp]]>]}
// SPMD: ppc.relu
// SPMD: %[[PART:.*]] = ppc.matmul {{.*}} {ppc.shardings = [#ppc.sharding<@mesh, {{\[\[}}], []], partial = [tp]>]}
// SPMD: %[[FULL:.*]] = ppc.all_reduce %[[PART]] on @mesh["tp"] sum
// SPMD-NOT: ppc.all_
// SPMD: return %[[FULL]]

// Tests that with memory to spare (no memory-per-rank), splitting does not
// pay at this size and both weights stay whole.
// RUN: ppc-opt %s -ppc-plan-shardings=tp=4 | FileCheck %s --check-prefix=ROOMY
// ROOMY: ppc.param = "w1", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []]>
// ROOMY-SAME: ppc.param = "w2", ppc.sharding = #ppc.sharding<@mesh, {{\[\[}}], []]>

// Tests that a pinned row split of w2 (tp-shard=w2:0) is kept, whatever the
// cost.
// RUN: ppc-opt %s "-ppc-plan-shardings=tp=4 tp-shard=w2:0" | FileCheck %s --check-prefix=PINNED
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
