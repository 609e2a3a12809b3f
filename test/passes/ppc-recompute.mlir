// RUN: ppc-opt %s -ppc-recompute=policy=none | FileCheck %s --check-prefix=NONE
// RUN: ppc-opt %s -ppc-recompute=policy=selective | FileCheck %s --check-prefix=SELECTIVE
// RUN: ppc-opt %s -ppc-recompute=policy=full | FileCheck %s --check-prefix=FULL
// RUN: ppc-opt %s -ppc-recompute="policy=auto memory-per-rank=1e9" | FileCheck %s --check-prefix=NONE
// RUN: ppc-opt %s -ppc-recompute="policy=auto memory-per-rank=500" | FileCheck %s --check-prefix=AUTO
// RUN: not ppc-opt %s -ppc-recompute=policy=some 2>&1 | FileCheck %s --check-prefix=INVALID

// Tests the recomputation of one block (/blocks.0, its ops named as torch
// exports them) with an attention core (t·tᵀ, softmax, ·t), followed by a
// head outside every block. Backward ops read the block's h, t, p and z.
//
// none (and auto when the plan fits): nothing changes.
// NONE-NOT:     ppc.recomputed
// NONE-NOT:     ppc.recompute =
//
// selective: the core (the scores and the probabilities) is computed again
// right before the first backward op that reads p; t and h stay kept (t is
// the core's input). z, an elementwise function of the kept h, is computed
// again right before its own backward use.
// SELECTIVE-LABEL: func.func @train_step
// SELECTIVE-SAME:    ppc.recompute = {"/blocks.0" = "selective"}
// SELECTIVE:         %[[H:.*]] = ppc.matmul %arg0, %arg1 {ppc.fwd = 0
// SELECTIVE:         %[[T:.*]] = ppc.tanh %[[H]] {ppc.fwd = 1
// SELECTIVE:         %[[TT:.*]] = ppc.transpose %[[T]]
// SELECTIVE:         %[[P:.*]] = ppc.softmax
// SELECTIVE:         ppc.neg %[[H]] {ppc.bwd = 7
// SELECTIVE:         %[[S2:.*]] = ppc.matmul %[[T]], %[[TT]] {ppc.bwd = 3 : i64, ppc.mb = 0 : i64, ppc.recomputed = "/blocks.0"}
// SELECTIVE-NEXT:    %[[P2:.*]] = ppc.softmax %[[S2]] axis = 1 {ppc.bwd = 4 : i64, ppc.mb = 0 : i64, ppc.recomputed = "/blocks.0"}
// SELECTIVE-NEXT:    ppc.matmul %[[P2]], %{{.*}} {ppc.bwd = 4
// SELECTIVE:         ppc.mul %{{.*}}, %[[T]] {ppc.bwd = 1
// SELECTIVE-NEXT:    %[[Z2:.*]] = ppc.exp %[[H]] {ppc.bwd = 8 : i64, ppc.mb = 0 : i64, ppc.recomputed = "/blocks.0"}
// SELECTIVE-NEXT:    ppc.mul %[[Z2]], %{{.*}} {ppc.bwd = 8
//
// full: the block keeps only its input (x, an argument); its backward begins
// by running its forward again, as far as the backward reads it. The head
// (outside every block) is not recomputed.
// FULL-LABEL: func.func @train_step
// FULL-SAME:    ppc.recompute = {"/blocks.0" = "full"}
// FULL:         %[[O:.*]] = ppc.matmul %{{.*}}, %{{.*}} {ppc.fwd = 5
// FULL:         %[[Y:.*]] = ppc.exp %[[O]] {ppc.fwd = 6
// FULL:         ppc.neg %[[Y]] {ppc.bwd = 6
// FULL-NEXT:    %[[H2:.*]] = ppc.matmul %arg0, %arg1 {ppc.bwd = 0 : i64, ppc.mb = 0 : i64, ppc.recomputed = "/blocks.0"}
// FULL-NEXT:    %[[T2:.*]] = ppc.tanh %[[H2]] {ppc.bwd = 1
// FULL-NEXT:    %[[TT2:.*]] = ppc.transpose %[[T2]] perm = [1, 0] {ppc.bwd = 2
// FULL-NEXT:    %[[S2:.*]] = ppc.matmul %[[T2]], %[[TT2]] {ppc.bwd = 3
// FULL-NEXT:    %[[P2:.*]] = ppc.softmax %[[S2]] axis = 1 {ppc.bwd = 4
// FULL-NEXT:    %[[Z2:.*]] = ppc.exp %[[H2]] {ppc.bwd = 8
// FULL-NEXT:    ppc.neg %[[H2]] {ppc.bwd = 7
// FULL-NEXT:    ppc.matmul %[[P2]], %{{.*}} {ppc.bwd = 4
// FULL-NEXT:    ppc.mul %{{.*}}, %[[T2]] {ppc.bwd = 1
// FULL-NEXT:    ppc.mul %[[Z2]], %{{.*}} {ppc.bwd = 8
// FULL-NOT:     ppc.recomputed
// FULL:         return
//
// auto under a 500-byte budget (the plan without recomputation needs more): the least that fits is not enough, so
// every block gets full (the program then warns in ppc compile).
// AUTO:         ppc.recompute = {"/blocks.0" = "full"}
//
// INVALID: error: recompute policy 'some' is not one of none, selective, full, auto
func.func @train_step(%x: tensor<4x8xf32> {ppc.input = "x"}, %w: tensor<8x8xf32> {ppc.param = "w"}) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %h = ppc.matmul %x, %w {ppc.fwd = 0 : i64, ppc.mb = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/blocks.0/fc/MatMul")
  %t = ppc.tanh %h {ppc.fwd = 1 : i64, ppc.mb = 0 : i64} : tensor<4x8xf32> loc("/blocks.0/act/Tanh")
  %tt = ppc.transpose %t perm = [1, 0] {ppc.fwd = 2 : i64, ppc.mb = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x4xf32> loc("/blocks.0/attn/Transpose")
  %s = ppc.matmul %t, %tt {ppc.fwd = 3 : i64, ppc.mb = 0 : i64} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32> loc("/blocks.0/attn/MatMul")
  %p = ppc.softmax %s axis = 1 {ppc.fwd = 4 : i64, ppc.mb = 0 : i64} : tensor<4x4xf32> loc("/blocks.0/attn/Softmax")
  %o = ppc.matmul %p, %t {ppc.fwd = 5 : i64, ppc.mb = 0 : i64} : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("/blocks.0/attn/MatMul_1")
  %z = ppc.exp %h {ppc.fwd = 8 : i64, ppc.mb = 0 : i64} : tensor<4x8xf32> loc("/blocks.0/gate/Exp")
  %y = ppc.exp %o {ppc.fwd = 6 : i64, ppc.mb = 0 : i64} : tensor<4x8xf32> loc("/head/Exp")
  // The backward, last op first.
  %gy = ppc.neg %y {ppc.bwd = 6 : i64, ppc.mb = 0 : i64} : tensor<4x8xf32> loc("/head/Exp")
  %gh = ppc.neg %h {ppc.bwd = 7 : i64, ppc.mb = 0 : i64} : tensor<4x8xf32> loc("/blocks.0/fc/MatMul")
  %gp = ppc.matmul %p, %gy {ppc.bwd = 4 : i64, ppc.mb = 0 : i64} : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("/blocks.0/attn/Softmax")
  %gt = ppc.mul %gp, %t {ppc.bwd = 1 : i64, ppc.mb = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("/blocks.0/act/Tanh")
  %gz = ppc.mul %z, %gt {ppc.bwd = 8 : i64, ppc.mb = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("/blocks.0/gate/Exp")
  return %gz, %gh, %y : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
