// Errors in the pinned layouts of -ppc-plan-shardings (tp-shard=<param>:<dim>).
// The pins are pass options, so each case has its own RUN line and check
// prefix; both run on the one-matmul step at the end of the file.

// Tests that a pin naming no parameter of the step is an error naming it.
// RUN: not ppc-opt %s "-ppc-plan-shardings=tp=4 tp-shard=w9:0" 2>&1 | FileCheck %s --check-prefix=NAME
// NAME: tp-shard 'w9:0': no parameter 'w9'

// Tests that a pin of a dimension the tp axis does not divide (32 over 3)
// is an error naming the parameter, the dimension and its size.
// RUN: not ppc-opt %s "-ppc-plan-shardings=tp=3 tp-shard=w:1" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// DIVIDE: tp-shard 'w:1': dimension 1 of parameter 'w' (size 32) does not split into 1 blocks over mesh axis tp of size 3

func.func @train_step(%x: tensor<64x32xf32> {ppc.input = "x"},
                      %w: tensor<32x32xf32> {ppc.param = "w"}) -> tensor<64x32xf32> {
  %y = ppc.matmul %x, %w : (tensor<64x32xf32>, tensor<32x32xf32>) -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}
