// RUN: ppc-opt %s -split-input-file -allow-unregistered-dialect -ppc-autodiff -verify-diagnostics

// Tests that an op without a gradient rule on a path from a parameter to the
// loss is an error at that op.
func.func @forward(%w: tensor<4xf32> {ppc.param = "w"}) -> (tensor<f32> {ppc.output = "loss"}) {
  // expected-error @+1 {{'test.opaque' has no gradient rule, and it lies on a path from a parameter to the loss}}
  %y = "test.opaque"(%w) : (tensor<4xf32>) -> tensor<4xf32>
  %l = ppc.reduce_sum %y axes = [0] keepdims = false : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an op without a rule is fine off the parameters' paths.
func.func @forward(%x: tensor<4xf32> {ppc.input = "x"}, %w: tensor<4xf32> {ppc.param = "w"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %y = "test.opaque"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %z = ppc.mul %y, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = ppc.reduce_sum %z axes = [0] keepdims = false : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that @forward must return a scalar loss.
// expected-error @+1 {{@forward must return one float scalar (the loss); run -ppc-append-loss first}}
func.func @forward(%w: tensor<4xf32> {ppc.param = "w"}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// Tests that the pass needs @forward.
// expected-error @+1 {{no @forward function to differentiate}}
module {
  func.func @other() {
    return
  }
}
