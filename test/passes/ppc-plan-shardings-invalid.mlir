// RUN: ppc-opt %s -split-input-file "-ppc-plan-shardings=tp=4 memory-per-rank=1000" -verify-diagnostics
// RUN: not ppc-opt %s "-ppc-plan-shardings=tp=4 tp-shard=w9:0" 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not ppc-opt %s "-ppc-plan-shardings=tp=3 tp-shard=w:1" 2>&1 | FileCheck %s --check-prefix=DIVIDE

// Tests that a model no plan fits is an error naming the budget and the
// best plan's need.
// expected-error @+1 {{no plan found fits in 1000 bytes per rank (memory-per-rank) with ZeRO stage 0: the best needs 11264}}
func.func @train_step(%x: tensor<64x32xf32> {ppc.input = "x"},
                      %w: tensor<32x32xf32> {ppc.param = "w"}) -> tensor<64x32xf32> {
  %y = ppc.matmul %x, %w : (tensor<64x32xf32>, tensor<32x32xf32>) -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}

// NAME: tp-shard 'w9:0': no parameter 'w9'
// DIVIDE: tp-shard 'w:1': dimension 1 of parameter 'w' (size 32) does not split into 1 blocks over mesh axis tp of size 3
