// RUN: ppc-opt %s -split-input-file -ppc-mixed-precision | FileCheck %s
// RUN: ppc-opt %s -split-input-file -ppc-mixed-precision=precision=fp16 | FileCheck %s --check-prefix=F16
// RUN: not ppc-opt %s -split-input-file -ppc-mixed-precision=precision=fp8 2>&1 | FileCheck %s --check-prefix=BAD

// Tests --precision bf16 on @forward: activations (what the arguments feed)
// become bf16; a parameter is read through one bf16 copy made before its
// first reader; a scalar constant that bf16 cannot hold exactly (1/sqrt(2))
// is applied in f32 and the result rounded once, one it can (0.5) in bf16;
// what constants alone compute stays f32 and is cast where an activation op
// reads it; integers are untouched; the result is handed back as f32.
// CHECK-LABEL: func.func @forward
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x8xf32> {ppc.param = "w"}, %[[I:.*]]: tensor<4xi64>)
// CHECK-SAME:    -> tensor<4x8xf32>
// CHECK:         %[[T:.*]] = ppc.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK:         %[[T2:.*]] = ppc.add %[[T]], %[[T]] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK:         %[[XB:.*]] = ppc.cast %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK:         %[[WB:.*]] = ppc.cast %[[W]] : tensor<8x8xf32> -> tensor<8x8xbf16>
// CHECK:         %[[Y:.*]] = ppc.matmul %[[XB]], %[[WB]] : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
// CHECK:         %[[YF:.*]] = ppc.cast %[[Y]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK:         %[[D:.*]] = ppc.div %[[YF]], %{{.*}} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK:         %[[DB:.*]] = ppc.cast %[[D]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK:         %[[HB:.*]] = ppc.cast %{{.*}} : tensor<f32> -> tensor<bf16>
// CHECK:         %[[M:.*]] = ppc.mul %[[DB]], %[[HB]] : (tensor<4x8xbf16>, tensor<bf16>) -> tensor<4x8xbf16>
// CHECK:         %[[TB:.*]] = ppc.cast %[[T2]] : tensor<8xf32> -> tensor<8xbf16>
// CHECK:         %[[S:.*]] = ppc.add %[[M]], %[[TB]] : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
// CHECK:         %[[Z:.*]] = ppc.matmul %[[S]], %[[WB]] : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
// CHECK:         %[[G:.*]] = ppc.gather %[[Z]][%[[I]]]
// CHECK-SAME:      -> tensor<4x8xbf16>
// CHECK:         %[[R:.*]] = ppc.cast %[[G]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK:         return %[[R]] : tensor<4x8xf32>
// F16-LABEL: func.func @forward
// F16:         ppc.matmul %{{.*}}, %{{.*}} : (tensor<4x8xf16>, tensor<8x8xf16>) -> tensor<4x8xf16>
// BAD: precision 'fp8' is not one of fp32, bf16, fp16
func.func @forward(%x: tensor<4x8xf32>, %w: tensor<8x8xf32> {ppc.param = "w"}, %i: tensor<4xi64>) -> tensor<4x8xf32> {
  %sqrt2 = ppc.constant dense<1.41421354> : tensor<f32>
  %half = ppc.constant dense<0.5> : tensor<f32>
  %t = ppc.constant dense<1.0> : tensor<8xf32>
  %t2 = ppc.add %t, %t : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %y = ppc.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %d = ppc.div %y, %sqrt2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = ppc.mul %d, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %s = ppc.add %m, %t2 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %z = ppc.matmul %s, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %g = ppc.gather %z[%i] axis = 0 : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// Tests what stays f32: values computed from integer inputs and constants
// alone (positions cast to float, a rotary angle) are cast where an
// activation reads them; a loss the model computes itself (log-softmax, NLL
// and what follows) reads its bf16 input as f32 and stays f32.
// CHECK-LABEL: func.func @forward
// CHECK:         %[[POS:.*]] = ppc.cast %arg0 : tensor<4xi64> -> tensor<4xf32>
// CHECK:         %[[ANGLE:.*]] = ppc.mul %[[POS]], %{{.*}} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK:         %[[ANGLEB:.*]] = ppc.cast %[[ANGLE]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK:         %[[X:.*]] = ppc.add %{{.*}}, %[[ANGLEB]] : (tensor<4x4xbf16>, tensor<4xbf16>) -> tensor<4x4xbf16>
// CHECK:         %[[XF:.*]] = ppc.cast %[[X]] : tensor<4x4xbf16> -> tensor<4x4xf32>
// CHECK:         %[[LP:.*]] = ppc.log_softmax %[[XF]] axis = 1 : tensor<4x4xf32>
// CHECK:         %[[NLL:.*]] = ppc.nll_loss %[[LP]], %arg0 mean : (tensor<4x4xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK:         %[[TWICE:.*]] = ppc.add %[[NLL]], %[[NLL]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK:         return %[[TWICE]] : tensor<f32>
func.func @forward(%ids: tensor<4xi64>, %w: tensor<4x4xf32> {ppc.param = "w"}) -> tensor<f32> {
  %freq = ppc.constant dense<0.1> : tensor<f32>
  %pos = ppc.cast %ids : tensor<4xi64> -> tensor<4xf32>
  %angle = ppc.mul %pos, %freq : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %x = ppc.add %w, %angle : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  %lp = ppc.log_softmax %x axis = 1 : tensor<4x4xf32>
  %nll = ppc.nll_loss %lp, %ids mean : (tensor<4x4xf32>, tensor<4xi64>) -> tensor<f32>
  %twice = ppc.add %nll, %nll : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %twice : tensor<f32>
}
