// RUN: ppc-opt %s "-ppc-training-pipeline=optimizer=sgd lr=0.1 weight-decay=0 micro-batches=4" "-ppc-partition=pp=2" "-ppc-pipeline=schedule=interleaved virtual-stages=2" \
// RUN:   | grep -o 'ppc.schedule = {[^}]*}\|func.func @train_step_pp[0-9]*\|ppc.pipeline_rank = [0-9]* : i64, ppc.stages = array<i64: [0-9, ]*>\|ppc.slot = "[FB][0-9]*@s[0-9]*"' \
// RUN:   | uniq | FileCheck %s --check-prefix=INTERLEAVED

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
