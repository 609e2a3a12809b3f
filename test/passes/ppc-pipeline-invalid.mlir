// Error cases of -ppc-pipeline. Each case needs its own pass options, so
// each has its own RUN line and check prefix; all run on the 4-layer model
// at the end of the file. The errors are reported at the module (or, for
// the memory budget, at the step), not at a useful source location, so
// stderr is checked with FileCheck rather than -verify-diagnostics.

// Tests that the interleaved schedule needs whole groups of p micro-batches
// (here 3 micro-batches over pp=2); the error is one line.
// RUN: not ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=3" "-ppc-partition=pp=2" "-ppc-pipeline=schedule=interleaved" \
// RUN:   -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=DIVIDE
// DIVIDE:     error: --schedule interleaved needs --micro-batches (3) to be a multiple of the pipeline ranks (pp=2)
// DIVIDE-NOT: error

// Tests that an unknown schedule is one error line naming it and the
// schedules there are.
// RUN: not ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=4" "-ppc-partition=pp=2" "-ppc-pipeline=schedule=zigzag" \
// RUN:   -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN:     error: schedule 'zigzag' is not one of gpipe, 1f1b, interleaved
// UNKNOWN-NOT: error

// Tests that stages that cannot fit the memory budget (by the estimate of
// model states plus the activations of the micro-batches in flight) are an
// error naming the budget.
// RUN: not ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=4" "-ppc-partition=pp=2" "-ppc-pipeline=schedule=1f1b memory-per-rank=1000" -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=MEMORY
// MEMORY: error: {{.*}}the pipeline stages do not fit 1000 bytes per rank (memory-per-rank): the model's states and activations are about {{[0-9]+}} bytes over 2 stages; use more pipeline ranks, ZeRO or tensor parallelism

// Tests that more stages than forward ops to run on them (9 stages, 8
// forward ops) is one error line naming the mesh flag and the most
// pipeline ranks the model allows.
// RUN: not ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=1" "-ppc-partition=pp=9" "-ppc-pipeline=schedule=1f1b" -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=TOOMANY
// TOOMANY:      error: --mesh 1x1x9: 9 pipeline stages, but the model has only 8 forward ops that run on a stage; at most 8 pipeline ranks (--mesh 1x1x8)
// TOOMANY-NOT:  error

// Tests the same with interleaved virtual stages counted: 4 ranks of 3
// virtual stages are 12 stages, for 8 forward ops.
// RUN: not ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=4" "-ppc-partition=pp=4" "-ppc-pipeline=schedule=interleaved virtual-stages=3" -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=TOOMANYV
// TOOMANYV:     error: --mesh 1x1x4: 12 pipeline stages (3 virtual stages per rank), but the model has only 8 forward ops that run on a stage; at most 2 pipeline ranks (--mesh 1x1x2)
// TOOMANYV-NOT: error

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
