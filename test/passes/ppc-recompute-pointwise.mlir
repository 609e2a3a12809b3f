// RUN: ppc-opt %s -ppc-recompute="policy=none pointwise=true" | FileCheck %s
// RUN: ppc-opt %s -ppc-recompute="policy=auto memory-per-rank=1e9 pointwise=true" | FileCheck %s
// RUN: ppc-opt %s -ppc-recompute=policy=none | FileCheck %s --check-prefix=OFF

// Tests ppc-recompute's `pointwise` (what ppc compile sets for CUDA): in a
// block no level recomputes, an elementwise value whose every backward
// reader is elementwise is computed again from the values the backward
// keeps anyway, right before its first backward reader (whose fused
// kernel then computes it). Here a = tanh(h) is read back by the
// gradient's elementwise mul only: recomputed from h, which the backward
// keeps. g = exp(a) is also read by a GEMM (the weight gradient): kept.
// The block gets no level (no ppc.recompute attribute).
// CHECK-LABEL: func.func @train_step
// CHECK-NOT:     ppc.recompute =
// CHECK:         %[[H:.*]] = ppc.matmul %arg0, %arg1 {ppc.fwd = 0
// CHECK:         %[[G:.*]] = ppc.exp %{{.*}} {ppc.fwd = 2
// CHECK:         %[[GG:.*]] = ppc.mul %{{.*}}, %[[G]] {ppc.bwd = 2
// CHECK-NEXT:    %[[A2:.*]] = ppc.tanh %[[H]] {ppc.bwd = 1 : i64, ppc.mb = 0 : i64, ppc.recomputed = "/blocks.0"}
// CHECK-NEXT:    ppc.mul %[[GG]], %[[A2]] {ppc.bwd = 1
// CHECK-NOT:     ppc.exp {{.*}}ppc.recomputed
// CHECK:         return
//
// Without it, nothing changes.
// OFF-NOT: ppc.recomputed
func.func @train_step(%x: tensor<4x8xf32> {ppc.input = "x"}, %w: tensor<8x8xf32> {ppc.param = "w"}) -> (tensor<4x8xf32>, tensor<8x8xf32>) {
  %h = ppc.matmul %x, %w {ppc.fwd = 0 : i64, ppc.mb = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/blocks.0/fc/MatMul")
  %a = ppc.tanh %h {ppc.fwd = 1 : i64, ppc.mb = 0 : i64} : tensor<4x8xf32> loc("/blocks.0/act/Tanh")
  %g = ppc.exp %a {ppc.fwd = 2 : i64, ppc.mb = 0 : i64} : tensor<4x8xf32> loc("/blocks.0/act/Exp")
  %o = ppc.matmul %g, %w {ppc.fwd = 3 : i64, ppc.mb = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("/blocks.0/out/MatMul")
  // The backward, last op first.
  %go = ppc.neg %o {ppc.bwd = 3 : i64, ppc.mb = 0 : i64} : tensor<4x8xf32> loc("/blocks.0/out/MatMul")
  %gt = ppc.transpose %g perm = [1, 0] {ppc.bwd = 3 : i64, ppc.mb = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x4xf32> loc("/blocks.0/out/MatMul")
  %gw = ppc.matmul %gt, %go {ppc.bwd = 3 : i64, ppc.mb = 0 : i64} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32> loc("/blocks.0/out/MatMul")
  %gg = ppc.mul %go, %g {ppc.bwd = 2 : i64, ppc.mb = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("/blocks.0/act/Exp")
  %ga = ppc.mul %gg, %a {ppc.bwd = 1 : i64, ppc.mb = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("/blocks.0/act/Tanh")
  %gh = ppc.mul %ga, %h {ppc.bwd = 0 : i64, ppc.mb = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("/blocks.0/fc/MatMul")
  return %gh, %gw : tensor<4x8xf32>, tensor<8x8xf32>
}
