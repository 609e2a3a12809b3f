// RUN: ppc-opt %s -ppc-autodiff "-ppc-build-train-step=optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0 micro-batches=2" -canonicalize | FileCheck %s --check-prefix=SGD
// RUN: ppc-opt %s -ppc-autodiff "-ppc-build-train-step=optimizer=adamw lr-schedule=cosine warmup-steps=2 total-steps=10 grad-clip=1.0" -canonicalize | FileCheck %s --check-prefix=ADAMW
// RUN: ppc-opt %s -ppc-autodiff "-ppc-build-train-step=optimizer=sgd micro-batches=2 data-parallel=2" -canonicalize | FileCheck %s --check-prefix=DP
// RUN: ppc-opt %s -ppc-autodiff "-ppc-build-train-step=optimizer=lion" -verify-diagnostics -o /dev/null

// Tests the signature of @train_step (step, parameters, optimizer state,
// then the batch with its batch dimension times the micro-batch count, then
// the hyper-parameters that are not structural zeros), the
// micro-batch slices with their losses and gradients averaged, and the SGD
// momentum update; @forward and @forward_grad are gone.
// SGD-LABEL: func.func @train_step
// SGD-SAME:    (%[[STEP:.*]]: tensor<i64> {ppc.step}, %[[W:.*]]: tensor<3x3xf32> {ppc.param = "w"}, %[[BUF:.*]]: tensor<3x3xf32> {ppc.state = "momentum:w"}, %[[X:.*]]: tensor<4x3xf32> {ppc.input = "x"}, %[[LR:.*]]: tensor<f64> {ppc.hyper = "lr"}, %[[MOMENTUM:.*]]: tensor<f64> {ppc.hyper = "momentum"})
// SGD-SAME:    -> (tensor<3x3xf32> {ppc.param = "w"}, tensor<3x3xf32> {ppc.state = "momentum:w"}, tensor<f32> {ppc.output = "loss"}, tensor<f32> {ppc.output = "grad_norm"}, tensor<f32> {ppc.output = "lr"})
// SGD:         %[[V0:.*]] = ppc.reshape %[[X]] {ppc.mb = 0 : i64} : tensor<4x3xf32> -> tensor<1x2x2x3xf32>
// SGD:         ppc.slice %[[V0]] starts = [0, 0, 0, 0] limits = [1, 1, 2, 3] steps = [1, 1, 1, 1]
// SGD:         %[[L0:.*]] = ppc.reduce_mean {{.*}}ppc.fwd = 1 : i64, ppc.mb = 0 : i64
// SGD:         ppc.slice %{{.*}} starts = [0, 1, 0, 0] limits = [1, 2, 2, 3] steps = [1, 1, 1, 1]
// SGD:         %[[L1:.*]] = ppc.reduce_mean {{.*}}ppc.fwd = 1 : i64, ppc.mb = 1 : i64
// SGD:         %[[LSUM:.*]] = ppc.add %[[L0]], %[[L1]]
// SGD:         %[[GSUM:.*]] = ppc.add
// SGD:         %[[LOSS:.*]] = ppc.div %[[LSUM]]
// SGD:         %[[G:.*]] = ppc.div %[[GSUM]], %{{.*}} {ppc.step_grad = array<i64: 0>}
// SGD:         %[[M:.*]] = ppc.cast %[[MOMENTUM]] : tensor<f64> -> tensor<f32>
// SGD:         ppc.mul %[[BUF]], %[[M]] {ppc.optimizer = "w"}
// SGD:         %[[NEWBUF:.*]] = ppc.add %{{.*}}, %[[G]]
// SGD:         %[[STEPPED:.*]] = ppc.mul %[[NEWBUF]]
// SGD:         %[[NEWW:.*]] = ppc.sub %[[W]], %[[STEPPED]] {ppc.optimizer = "w"}
// SGD:         return %[[NEWW]], %[[NEWBUF]], %[[LOSS]]
// SGD-NOT:     func.func @forward

// Tests that with 2 data-parallel ranks the batch [4, 3] is viewed as
// [dp, M, b, 3] = [2, 2, 1, 3]: micro-batch j is row j of each rank's half
// (DESIGN.md §4), so sharding the batch over dp never cuts a slice.
// DP-LABEL: func.func @train_step
// DP:         %[[V:.*]] = ppc.reshape %{{.*}} {ppc.mb = 0 : i64} : tensor<4x3xf32> -> tensor<2x2x1x3xf32>
// DP:         %[[S0:.*]] = ppc.slice %[[V]] starts = [0, 0, 0, 0] limits = [2, 1, 1, 3] steps = [1, 1, 1, 1]
// DP:         ppc.reshape %[[S0]] {ppc.mb = 0 : i64} : tensor<2x1x1x3xf32> -> tensor<2x3xf32>
// DP:         ppc.slice %{{.*}} starts = [0, 1, 0, 0] limits = [2, 2, 1, 3] steps = [1, 1, 1, 1]

// Tests AdamW's two state tensors, gradient clipping by the global norm,
// and the warm-up + cosine schedule computed from the step argument.
// ADAMW-LABEL: func.func @train_step
// ADAMW-SAME:    {ppc.state = "exp_avg:w"}, %{{.*}}: tensor<3x3xf32> {ppc.state = "exp_avg_sq:w"}
// ADAMW-SAME:    {ppc.hyper = "lr"}, %{{.*}}: tensor<f64> {ppc.hyper = "min_lr"}, %{{.*}}: tensor<f64> {ppc.hyper = "beta1"}, %{{.*}}: tensor<f64> {ppc.hyper = "beta2"}, %{{.*}}: tensor<f64> {ppc.hyper = "eps"}, %{{.*}}: tensor<f64> {ppc.hyper = "weight_decay"}, %{{.*}}: tensor<f64> {ppc.hyper = "grad_clip"})
// ADAMW:         %[[NORM:.*]] = ppc.sqrt
// ADAMW:         ppc.min
// ADAMW:         ppc.cast %{{.*}} : tensor<i64> -> tensor<f64>
// ADAMW:         ppc.cos
// ADAMW:         ppc.less
// ADAMW:         ppc.where
// ADAMW:         ppc.pow

// The third RUN line: an unknown optimizer is an error.
// expected-error @+1 {{optimizer 'lion' is not one of sgd, adamw}}
func.func @forward(%x: tensor<2x3xf32> {ppc.input = "x"}, %w: tensor<3x3xf32> {ppc.param = "w"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %h = ppc.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %l = ppc.reduce_mean %h axes = [0, 1] keepdims = false : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
