// RUN: ppc-opt %s -ppc-scale-loss=micro-batches=2 | FileCheck %s --check-prefix=SCALE
// RUN: ppc-opt %s -ppc-scale-loss=micro-batches=2 -ppc-autodiff -ppc-build-train-step="loss-scaling=1 micro-batches=2" | FileCheck %s --check-prefix=STEP
// RUN: not ppc-opt %s -ppc-autodiff -ppc-build-train-step="loss-scaling=1" 2>&1 | FileCheck %s --check-prefix=NOSCALE

// Tests --precision fp16's loss scaling. ppc-scale-loss: @forward takes the
// loss scale as a hyper-parameter and returns each micro-batch's share of
// the mean loss, scaled (loss * scale / 2).
// SCALE-LABEL: func.func @forward
// SCALE-SAME:    %[[S:[a-z0-9]+]]: tensor<f64> {ppc.hyper = "loss_scale"}
// SCALE:         %[[L:.*]] = ppc.reduce_sum
// SCALE:         %[[TWO:.*]] = ppc.constant dense<2.000000e+00> : tensor<f64>
// SCALE:         %[[SHARE:.*]] = ppc.div %[[S]], %[[TWO]]
// SCALE:         %[[F:.*]] = ppc.cast %[[SHARE]] : tensor<f64> -> tensor<f32>
// SCALE:         %[[SCALED:.*]] = ppc.mul %[[L]], %[[F]]
// SCALE:         return %[[SCALED]]

// ppc-build-train-step{loss-scaling}: the micro-batches' scaled losses and
// gradients are summed (not averaged again) and divided by the scale (the
// gradient times its f32 reciprocal); a gradient that is not finite makes
// sum(g * 0) NaN, and then `where` keeps the parameter and both AdamW states;
// AdamW's t counts the steps taken (step - skipped_steps + 1); the step
// reports `overflow`.
// STEP-LABEL: func.func @train_step
// STEP-SAME:    %[[W:[a-z0-9]+]]: tensor<3x3xf32> {ppc.param = "w"}
// STEP-SAME:    %[[M:[a-z0-9]+]]: tensor<3x3xf32> {ppc.state = "exp_avg:w"}
// STEP-SAME:    %[[V:[a-z0-9]+]]: tensor<3x3xf32> {ppc.state = "exp_avg_sq:w"}
// STEP-SAME:    %[[LS:[a-z0-9]+]]: tensor<f64> {ppc.hyper = "loss_scale"}
// STEP-SAME:    %[[SKIPPED:[a-z0-9]+]]: tensor<f64> {ppc.hyper = "skipped_steps"}
// STEP-SAME:    tensor<f32> {ppc.output = "overflow"})
// STEP:         %[[LOSSES:.*]] = ppc.add %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// STEP:         %[[GRADS:.*]] = ppc.add %{{.*}}, %{{.*}} {ppc.step_grad = array<i64: 0>}
// STEP:         %[[SF:.*]] = ppc.cast %[[LS]] : tensor<f64> -> tensor<f32>
// STEP:         %[[LOSS:.*]] = ppc.div %[[LOSSES]], %[[SF]]
// STEP:         %[[INV:.*]] = ppc.div %{{.*}}, %[[LS]] : (tensor<f64>, tensor<f64>) -> tensor<f64>
// STEP:         %[[INVF:.*]] = ppc.cast %[[INV]] : tensor<f64> -> tensor<f32>
// STEP:         %[[G:.*]] = ppc.mul %[[GRADS]], %[[INVF]]
// STEP:         %[[ZEROS:.*]] = ppc.mul %[[G]], %{{.*}} : (tensor<3x3xf32>, tensor<f32>)
// STEP:         %[[SUM:.*]] = ppc.reduce_sum %[[ZEROS]]
// STEP:         %[[FINITE:.*]] = ppc.equal %[[SUM]], %[[SUM]]
// STEP:         %[[OVERFLOW:.*]] = ppc.not %[[FINITE]]
// STEP:         %[[TAKEN:.*]] = ppc.sub %{{.*}}, %[[SKIPPED]]
// STEP:         ppc.add %[[TAKEN]], %{{.*}} : (tensor<f64>, tensor<f64>) -> tensor<f64>
// STEP:         %[[NW:.*]] = ppc.where %[[OVERFLOW]], %[[W]], %{{.*}} : (tensor<i1>, tensor<3x3xf32>, tensor<3x3xf32>)
// STEP:         %[[NM:.*]] = ppc.where %[[OVERFLOW]], %[[M]], %{{.*}}
// STEP:         %[[NV:.*]] = ppc.where %[[OVERFLOW]], %[[V]], %{{.*}}
// STEP:         %[[FLAG:.*]] = ppc.cast %[[OVERFLOW]] : tensor<i1> -> tensor<f32>
// STEP:         return %[[NW]], %[[NM]], %[[NV]], %[[LOSS]], %{{.*}}, %{{.*}}, %[[FLAG]]

// NOSCALE: error: loss scaling without a loss_scale argument; run -ppc-scale-loss first
func.func @forward(%x: tensor<2x3xf32> {ppc.input = "x"}, %w: tensor<3x3xf32> {ppc.param = "w"}) -> (tensor<f32> {ppc.output = "loss"}) {
  %h = ppc.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %s = ppc.reduce_sum %h axes = [0, 1] keepdims = false : (tensor<2x3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
