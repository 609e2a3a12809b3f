// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=4" "-ppc-partition=pp=2" "-ppc-pipeline=schedule=1f1b" | FileCheck %s
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=4" "-ppc-partition=pp=2" "-ppc-pipeline=schedule=1f1b" \
// RUN:   | grep -o 'func.func @train_step_pp[0-9]*\|ppc.slot = "[FB][0-9]*@s[0-9]*"' | uniq | FileCheck %s --check-prefix=ORDER
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=4" "-ppc-partition=pp=2" "-ppc-pipeline=schedule=gpipe" \
// RUN:   | grep -o 'ppc.schedule = {[^}]*}\|func.func @train_step_pp[0-9]*\|ppc.slot = "[FB][0-9]*@s[0-9]*"' | uniq | FileCheck %s --check-prefix=GPIPE
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=4" "-ppc-partition=pp=2" "-ppc-pipeline=schedule=interleaved virtual-stages=2" \
// RUN:   | grep -o 'ppc.schedule = {[^}]*}\|func.func @train_step_pp[0-9]*\|ppc.pipeline_rank = [0-9]* : i64, ppc.stages = array<i64: [0-9, ]*>\|ppc.slot = "[FB][0-9]*@s[0-9]*"' \
// RUN:   | uniq | FileCheck %s --check-prefix=INTERLEAVED
// RUN: not ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=3" "-ppc-partition=pp=2" "-ppc-pipeline=schedule=interleaved" \
// RUN:   -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=4" "-ppc-partition=pp=2" "-ppc-pipeline=schedule=zigzag" \
// RUN:   -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=1" "-ppc-partition=pp=4" "-ppc-pipeline=schedule=1f1b" | FileCheck %s --check-prefix=HOME
// RUN: not ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=4" "-ppc-partition=pp=2" "-ppc-pipeline=schedule=1f1b memory-per-rank=1000" -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=MEMORY
// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=1" "-ppc-partition=pp=8" "-ppc-pipeline=schedule=1f1b" | FileCheck %s --check-prefix=LAST
// RUN: not ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=1" "-ppc-partition=pp=9" "-ppc-pipeline=schedule=1f1b" -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=TOOMANY
// RUN: not ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=4" "-ppc-partition=pp=4" "-ppc-pipeline=schedule=interleaved virtual-stages=3" -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=TOOMANYV

// Tests that with one stage per forward op the last stage, which holds no
// parameter and so runs no optimizer, still returns the step's outputs:
// the learning rate it reports is computed there from the lr argument,
// which that rank now takes.
// LAST-LABEL: func.func @train_step_pp7
// LAST-SAME:    (%[[LR:arg[0-9]+]]: tensor<f64> {ppc.hyper = "lr"
// LAST-SAME:    -> (tensor<f32> {ppc.output = "loss"{{.*}}}, tensor<f32> {ppc.output = "grad_norm"{{.*}}}, tensor<f32> {ppc.output = "lr"
// LAST:         %[[OUT:.*]] = ppc.cast %[[LR]] {{{.*}}ppc.slot = "step"} : tensor<f64> -> tensor<f32>
// LAST:         return %{{.*}}, %{{.*}}, %[[OUT]] :

// Tests that more stages than forward ops to run on them is one error line
// naming the mesh flag and the most pipeline ranks the model allows, with
// interleaved virtual stages counted.
// TOOMANY:      error: --mesh 1x1x9: 9 pipeline stages, but the model has only 8 forward ops that run on a stage; at most 8 pipeline ranks (--mesh 1x1x8)
// TOOMANY-NOT:  error
// TOOMANYV:     error: --mesh 1x1x4: 12 pipeline stages (3 virtual stages per rank), but the model has only 8 forward ops that run on a stage; at most 2 pipeline ranks (--mesh 1x1x2)
// TOOMANYV-NOT: error

// Tests that stages that cannot fit the memory budget (by the estimate of
// model states plus the activations of the micro-batches in flight) are an
// error naming the budget.
// MEMORY: error: {{.*}}the pipeline stages do not fit 1000 bytes per rank (memory-per-rank): the model's states and activations are about {{[0-9]+}} bytes over 2 stages; use more pipeline ranks, ZeRO or tensor parallelism

// Tests that with four stages each rank holds and updates exactly its own
// weight: the backward of the last layer (a constant loss gradient times w4)
// stays on the last stage instead of being recomputed where it is used.
// HOME: func.func @train_step_pp0(%arg0: tensor<4x8xf32> {ppc.param = "w1"
// HOME-NOT: ppc.param = "w{{[234]}}"
// HOME: func.func @train_step_pp1(%arg0: tensor<8x8xf32> {ppc.param = "w2"
// HOME-NOT: ppc.param = "w{{[134]}}"
// HOME: func.func @train_step_pp2(%arg0: tensor<8x8xf32> {ppc.param = "w3"
// HOME-NOT: ppc.param = "w{{[124]}}"
// HOME: func.func @train_step_pp3(%arg0: tensor<8x2xf32> {ppc.param = "w4"

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

// Tests the 1F1B order (p = 2, m = 4): rank 0 warms up with p - 1 = 1
// extra forward, then alternates, then drains; the last rank alternates
// from the start.
// ORDER:      func.func @train_step_pp0
// ORDER-NEXT: ppc.slot = "F0@s0"
// ORDER-NEXT: ppc.slot = "F1@s0"
// ORDER-NEXT: ppc.slot = "B0@s0"
// ORDER-NEXT: ppc.slot = "F2@s0"
// ORDER-NEXT: ppc.slot = "B1@s0"
// ORDER-NEXT: ppc.slot = "F3@s0"
// ORDER-NEXT: ppc.slot = "B2@s0"
// ORDER-NEXT: ppc.slot = "B3@s0"
// ORDER-NEXT: func.func @train_step_pp1
// ORDER-NEXT: ppc.slot = "F0@s1"
// ORDER-NEXT: ppc.slot = "B0@s1"
// ORDER-NEXT: ppc.slot = "F1@s1"
// ORDER-NEXT: ppc.slot = "B1@s1"
// ORDER-NEXT: ppc.slot = "F2@s1"
// ORDER-NEXT: ppc.slot = "B2@s1"
// ORDER-NEXT: ppc.slot = "F3@s1"
// ORDER-NEXT: ppc.slot = "B3@s1"
// ORDER-NOT:  ppc.slot

// Tests the GPipe order: every forward, then every backward, on each rank.
// GPIPE:      ppc.schedule = {kind = "gpipe", micro_batches = 4 : i64, ranks = 2 : i64, virtual_stages = 1 : i64}
// GPIPE-NEXT: func.func @train_step_pp0
// GPIPE-NEXT: ppc.slot = "F0@s0"
// GPIPE-NEXT: ppc.slot = "F1@s0"
// GPIPE-NEXT: ppc.slot = "F2@s0"
// GPIPE-NEXT: ppc.slot = "F3@s0"
// GPIPE-NEXT: ppc.slot = "B0@s0"
// GPIPE-NEXT: ppc.slot = "B1@s0"
// GPIPE-NEXT: ppc.slot = "B2@s0"
// GPIPE-NEXT: ppc.slot = "B3@s0"
// GPIPE-NEXT: func.func @train_step_pp1
// GPIPE-NEXT: ppc.slot = "F0@s1"
// GPIPE-NEXT: ppc.slot = "F1@s1"
// GPIPE-NEXT: ppc.slot = "F2@s1"
// GPIPE-NEXT: ppc.slot = "F3@s1"
// GPIPE-NEXT: ppc.slot = "B0@s1"
// GPIPE-NEXT: ppc.slot = "B1@s1"
// GPIPE-NEXT: ppc.slot = "B2@s1"
// GPIPE-NEXT: ppc.slot = "B3@s1"
// GPIPE-NOT:  ppc.slot

// Tests the interleaved schedule with 2 virtual stages per rank: 4 stages,
// rank r runs stages r and r + 2, and the order is Megatron's: forwards in
// groups of p micro-batches per model chunk, a warm-up of
// (p - r - 1) * 2 + (v - 1) * p forwards, then 1F1B, then the drain.
// INTERLEAVED:      ppc.schedule = {kind = "interleaved", micro_batches = 4 : i64, ranks = 2 : i64, virtual_stages = 2 : i64}
// INTERLEAVED-NEXT: func.func @train_step_pp0
// INTERLEAVED-NEXT: ppc.pipeline_rank = 0 : i64, ppc.stages = array<i64: 0, 2>
// INTERLEAVED-NEXT: ppc.slot = "F0@s0"
// INTERLEAVED-NEXT: ppc.slot = "F1@s0"
// INTERLEAVED-NEXT: ppc.slot = "F0@s2"
// INTERLEAVED-NEXT: ppc.slot = "F1@s2"
// INTERLEAVED-NEXT: ppc.slot = "F2@s0"
// INTERLEAVED-NEXT: ppc.slot = "B0@s2"
// INTERLEAVED-NEXT: ppc.slot = "F3@s0"
// INTERLEAVED-NEXT: ppc.slot = "B1@s2"
// INTERLEAVED-NEXT: ppc.slot = "F2@s2"
// INTERLEAVED-NEXT: ppc.slot = "B0@s0"
// INTERLEAVED-NEXT: ppc.slot = "F3@s2"
// INTERLEAVED-NEXT: ppc.slot = "B1@s0"
// INTERLEAVED-NEXT: ppc.slot = "B2@s2"
// INTERLEAVED-NEXT: ppc.slot = "B3@s2"
// INTERLEAVED-NEXT: ppc.slot = "B2@s0"
// INTERLEAVED-NEXT: ppc.slot = "B3@s0"
// INTERLEAVED-NEXT: func.func @train_step_pp1
// INTERLEAVED-NEXT: ppc.pipeline_rank = 1 : i64, ppc.stages = array<i64: 1, 3>
// INTERLEAVED-NEXT: ppc.slot = "F0@s1"
// INTERLEAVED-NEXT: ppc.slot = "F1@s1"
// INTERLEAVED-NEXT: ppc.slot = "F0@s3"
// INTERLEAVED-NEXT: ppc.slot = "B0@s3"
// INTERLEAVED-NEXT: ppc.slot = "F1@s3"
// INTERLEAVED-NEXT: ppc.slot = "B1@s3"
// INTERLEAVED-NEXT: ppc.slot = "F2@s1"
// INTERLEAVED-NEXT: ppc.slot = "B0@s1"
// INTERLEAVED-NEXT: ppc.slot = "F3@s1"
// INTERLEAVED-NEXT: ppc.slot = "B1@s1"
// INTERLEAVED-NEXT: ppc.slot = "F2@s3"
// INTERLEAVED-NEXT: ppc.slot = "B2@s3"
// INTERLEAVED-NEXT: ppc.slot = "F3@s3"
// INTERLEAVED-NEXT: ppc.slot = "B3@s3"
// INTERLEAVED-NEXT: ppc.slot = "B2@s1"
// INTERLEAVED-NEXT: ppc.slot = "B3@s1"
// INTERLEAVED-NOT:  ppc.slot

// Tests that the interleaved schedule needs whole groups of p micro-batches,
// and that an unknown schedule is named; each is one error line.
// DIVIDE:     error: --schedule interleaved needs --micro-batches (3) to be a multiple of the pipeline ranks (pp=2)
// DIVIDE-NOT: error
// UNKNOWN:     error: schedule 'zigzag' is not one of gpipe, 1f1b, interleaved
// UNKNOWN-NOT: error
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
