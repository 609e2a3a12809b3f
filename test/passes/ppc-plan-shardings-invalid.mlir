// RUN: ppc-opt %s -split-input-file "-ppc-plan-shardings=tp=4 memory-per-rank=1000" -verify-diagnostics

// Tests that a model no plan fits is an error naming the budget and the
// best plan's need.
// expected-error @+1 {{no plan found fits in 1000 bytes per rank (memory-per-rank) with ZeRO stage 0: the best needs 11264}}
func.func @train_step(%x: tensor<64x32xf32> {ppc.input = "x"},
                      %w: tensor<32x32xf32> {ppc.param = "w"}) -> tensor<64x32xf32> {
  %y = ppc.matmul %x, %w : (tensor<64x32xf32>, tensor<32x32xf32>) -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}
