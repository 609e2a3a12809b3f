// RUN: ppc-opt %s -split-input-file -allow-unregistered-dialect "-ppc-partition=dp=2" -verify-diagnostics

// Tests that partitioning needs a training step.
// expected-error @+1 {{no @train_step to partition; run the training pipeline first}}
module {
  func.func @forward() {
    return
  }
}

// -----

// Tests that a batch the data-parallel ranks cannot share is an error naming
// the dimension.
// expected-error @+1 {{'x': dimension 0 of size 3 cannot be split over mesh axes [dp] of size 2}}
func.func @train_step(%x: tensor<3x4xf32> {ppc.input = "x"}) -> tensor<3x4xf32> {
  return %x : tensor<3x4xf32>
}

// -----

// Tests that an op without a sharding rule is an error at the op.
func.func @train_step(%x: tensor<4x4xf32> {ppc.input = "x"}) -> tensor<4x4xf32> {
  // expected-error @+1 {{'test.opaque' has no sharding rule}}
  %y = "test.opaque"(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
