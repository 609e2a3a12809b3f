// RUN: ppc-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(ppc-fuse-attention))' | FileCheck %s

// Tests nanoGPT's form: q @ k^T (k^T a transpose of the heads' split), / sqrt(d),
// masked_fill(~tril(ones), -inf), softmax, @ v. The mask is the causal flag,
// the two transposes of k one, and nothing of the unfused form is left.
// CHECK-LABEL: func.func @causal_masked_fill
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x2x4x8xf32>, %[[KS:.*]]: tensor<2x4x2x8xf32>, %[[V:.*]]: tensor<2x2x4x8xf32>)
// CHECK:         %[[K:.*]] = ppc.transpose %[[KS]] perm = [0, 2, 1, 3]
// CHECK-NEXT:    %[[O:.*]], %{{.*}} = ppc.attention %[[Q]], %[[K]], %[[V]] scale = 0.35355339{{[0-9]*}} causal : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> (tensor<2x2x4x8xf32>, tensor<2x2x4xf32>)
// CHECK-NEXT:    return %[[O]]
func.func @causal_masked_fill(%q: tensor<2x2x4x8xf32>, %ks: tensor<2x4x2x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %ones = ppc.constant dense<true> : tensor<4x4xi1>
  %keep = ppc.trilu %ones upper = false k = 0 : tensor<4x4xi1>
  %hide = ppc.not %keep : tensor<4x4xi1>
  %inf = ppc.constant dense<0xFF800000> : tensor<f32>
  %sqrt = ppc.constant dense<2.82842708> : tensor<f32>
  %kt = ppc.transpose %ks perm = [0, 2, 3, 1] : (tensor<2x4x2x8xf32>) -> tensor<2x2x8x4xf32>
  %s = ppc.matmul %q, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %d = ppc.div %s, %sqrt : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %m = ppc.where %hide, %inf, %d : (tensor<4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = ppc.softmax %m axis = 3 : tensor<2x2x4x4xf32>
  %o = ppc.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// Tests transformers' LLaMA form: an additive constant mask of float32's
// lowest value above the diagonal (after the scaling), softmax, two f32
// casts: the mask folds and is recognised as causal; k^T was a swap of the
// last two dimensions, so k is its input.
// CHECK-LABEL: func.func @causal_additive
// CHECK-SAME:    (%[[Q:.*]]: tensor<1x2x3x4xf32>, %[[K:.*]]: tensor<1x2x3x4xf32>, %[[V:.*]]: tensor<1x2x3x4xf32>)
// CHECK-NEXT:    %[[O:.*]], %{{.*}} = ppc.attention %[[Q]], %[[K]], %[[V]] scale = 5.000000e-01 causal
// CHECK-NEXT:    return %[[O]]
func.func @causal_additive(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %mask = ppc.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %two = ppc.constant dense<2.0> : tensor<f32>
  %kt = ppc.transpose %k perm = [0, 1, 3, 2] : (tensor<1x2x3x4xf32>) -> tensor<1x2x4x3xf32>
  %s = ppc.matmul %q, %kt : (tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>) -> tensor<1x2x3x3xf32>
  %d = ppc.div %s, %two : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
  %a = ppc.add %d, %mask : (tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32>) -> tensor<1x2x3x3xf32>
  %p = ppc.softmax %a axis = 3 : tensor<1x2x3x3xf32>
  %c = ppc.cast %p : tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %o = ppc.matmul %c, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return %o : tensor<1x2x3x4xf32>
}

// -----

// Tests a padding mask from an input (BERT's attention_mask), added before
// a scaling: it stays a bias, scaled as the unfused program scales it.
// CHECK-LABEL: func.func @input_mask_then_scale
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x3x4xf32>, %[[KT:.*]]: tensor<2x4x5xf32>, %[[V:.*]]: tensor<2x5x6xf32>, %[[M:.*]]: tensor<2x1x5xf32> {ppc.input = "mask"})
// CHECK:         %[[K:.*]] = ppc.transpose %[[KT]] perm = [0, 2, 1]
// CHECK:         %[[B:.*]] = ppc.mul %[[M]], %{{.*}} : (tensor<2x1x5xf32>, tensor<f32>) -> tensor<2x1x5xf32>
// CHECK-NEXT:    %[[O:.*]], %{{.*}} = ppc.attention %[[Q]], %[[K]], %[[V]] bias %[[B]] scale = 2.500000e-01 : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x5x6xf32>, tensor<2x1x5xf32>) -> (tensor<2x3x6xf32>, tensor<2x3xf32>)
// CHECK-NOT:     ppc.softmax
func.func @input_mask_then_scale(%q: tensor<2x3x4xf32>, %kt: tensor<2x4x5xf32>, %v: tensor<2x5x6xf32>, %mask: tensor<2x1x5xf32> {ppc.input = "mask"}) -> tensor<2x3x6xf32> {
  %c = ppc.constant dense<0.25> : tensor<f32>
  %s = ppc.matmul %q, %kt : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %a = ppc.add %s, %mask : (tensor<2x3x5xf32>, tensor<2x1x5xf32>) -> tensor<2x3x5xf32>
  %m = ppc.mul %c, %a : (tensor<f32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %p = ppc.softmax %m axis = 2 : tensor<2x3x5xf32>
  %o = ppc.matmul %p, %v : (tensor<2x3x5xf32>, tensor<2x5x6xf32>) -> tensor<2x3x6xf32>
  return %o : tensor<2x3x6xf32>
}

// -----

// Tests what stays unfused: a mask a parameter computes (the fused op does
// not differentiate its bias), probabilities the model also returns, and a
// softmax over another axis.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT:     ppc.attention
// CHECK-COUNT-3: ppc.softmax
func.func @not_fused(%q: tensor<2x3x4xf32>, %kt: tensor<2x4x3xf32>, %v: tensor<2x3x4xf32>, %w: tensor<3xf32> {ppc.param = "w"}) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x3xf32>, tensor<2x3x4xf32>) {
  %s = ppc.matmul %q, %kt : (tensor<2x3x4xf32>, tensor<2x4x3xf32>) -> tensor<2x3x3xf32>
  %a = ppc.add %s, %w : (tensor<2x3x3xf32>, tensor<3xf32>) -> tensor<2x3x3xf32>
  %p = ppc.softmax %a axis = 2 : tensor<2x3x3xf32>
  %o = ppc.matmul %p, %v : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %s2 = ppc.matmul %q, %kt : (tensor<2x3x4xf32>, tensor<2x4x3xf32>) -> tensor<2x3x3xf32>
  %p2 = ppc.softmax %s2 axis = 2 : tensor<2x3x3xf32>
  %o2 = ppc.matmul %p2, %v : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %s3 = ppc.matmul %q, %kt : (tensor<2x3x4xf32>, tensor<2x4x3xf32>) -> tensor<2x3x3xf32>
  %p3 = ppc.softmax %s3 axis = 1 : tensor<2x3x3xf32>
  %o3 = ppc.matmul %p3, %v : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %o, %o2, %p2, %o3 : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x3xf32>, tensor<2x3x4xf32>
}

// -----

// Tests a mask of zeros (a padding mask of all ones, bound at compile
// time): it folds away, leaving plain attention.
// CHECK-LABEL: func.func @zero_mask
// CHECK:         ppc.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 :
// CHECK-NOT:     bias
func.func @zero_mask(%q: tensor<2x3x4xf32>, %kt: tensor<2x4x3xf32>, %v: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %ones = ppc.constant dense<1.0> : tensor<2x1x3xf32>
  %one = ppc.constant dense<1.0> : tensor<f32>
  %min = ppc.constant dense<-3.40282347E+38> : tensor<f32>
  %inv = ppc.sub %one, %ones : (tensor<f32>, tensor<2x1x3xf32>) -> tensor<2x1x3xf32>
  %mask = ppc.mul %inv, %min : (tensor<2x1x3xf32>, tensor<f32>) -> tensor<2x1x3xf32>
  %s = ppc.matmul %q, %kt : (tensor<2x3x4xf32>, tensor<2x4x3xf32>) -> tensor<2x3x3xf32>
  %a = ppc.add %s, %mask : (tensor<2x3x3xf32>, tensor<2x1x3xf32>) -> tensor<2x3x3xf32>
  %p = ppc.softmax %a axis = 2 : tensor<2x3x3xf32>
  %o = ppc.matmul %p, %v : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %o : tensor<2x3x4xf32>
}

// -----

// Tests BLOOM's form: heads folded into the batch ([B*H, T, S], baddbmm's
// alpha and ALiBi bias) and viewed as [B, H, T, S] around the softmax. The
// attention runs over [B, H]; q, k, v and the ALiBi bias are viewed so, and
// the output is viewed back.
// CHECK-LABEL: func.func @folded_heads
// CHECK-SAME:    (%[[Q:.*]]: tensor<4x3x2xf32>, %[[KT:.*]]: tensor<4x2x3xf32>, %[[V:.*]]: tensor<4x3x2xf32>, %[[A:.*]]: tensor<4x1x3xf32> {ppc.input = "alibi"})
// CHECK:         %[[K:.*]] = ppc.transpose %[[KT]] perm = [0, 2, 1]
// CHECK-DAG:     %[[Q4:.*]] = ppc.reshape %[[Q]] : tensor<4x3x2xf32> -> tensor<2x2x3x2xf32>
// CHECK-DAG:     %[[K4:.*]] = ppc.reshape %[[K]] : tensor<4x3x2xf32> -> tensor<2x2x3x2xf32>
// CHECK-DAG:     %[[V4:.*]] = ppc.reshape %[[V]] : tensor<4x3x2xf32> -> tensor<2x2x3x2xf32>
// CHECK-DAG:     %[[B:.*]] = ppc.reshape %[[A]] : tensor<4x1x3xf32> -> tensor<2x2x1x3xf32>
// CHECK:         %[[O:.*]], %{{.*}} = ppc.attention %[[Q4]], %[[K4]], %[[V4]] bias %[[B]] scale = 5.000000e-01 : (tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>, tensor<2x2x1x3xf32>) -> (tensor<2x2x3x2xf32>, tensor<2x2x3xf32>)
// CHECK-NEXT:    %[[R:.*]] = ppc.reshape %[[O]] : tensor<2x2x3x2xf32> -> tensor<4x3x2xf32>
// CHECK-NEXT:    return %[[R]]
func.func @folded_heads(%q: tensor<4x3x2xf32>, %kt: tensor<4x2x3xf32>, %v: tensor<4x3x2xf32>, %alibi: tensor<4x1x3xf32> {ppc.input = "alibi"}) -> tensor<4x3x2xf32> {
  %alpha = ppc.constant dense<0.5> : tensor<f32>
  %s = ppc.matmul %q, %kt : (tensor<4x3x2xf32>, tensor<4x2x3xf32>) -> tensor<4x3x3xf32>
  %m = ppc.mul %s, %alpha : (tensor<4x3x3xf32>, tensor<f32>) -> tensor<4x3x3xf32>
  %a = ppc.add %m, %alibi : (tensor<4x3x3xf32>, tensor<4x1x3xf32>) -> tensor<4x3x3xf32>
  %r = ppc.reshape %a : tensor<4x3x3xf32> -> tensor<2x2x3x3xf32>
  %p = ppc.softmax %r axis = 3 : tensor<2x2x3x3xf32>
  %p3 = ppc.reshape %p : tensor<2x2x3x3xf32> -> tensor<4x3x3xf32>
  %o = ppc.matmul %p3, %v : (tensor<4x3x3xf32>, tensor<4x3x2xf32>) -> tensor<4x3x2xf32>
  return %o : tensor<4x3x2xf32>
}

// -----

// Tests OPT's clamp max(s, lowest) (the same scores where a key is visible)
// and Falcon's multi-query k and v, which the matmuls broadcast over the
// heads: they are expanded to one per query head.
// CHECK-LABEL: func.func @clamp_and_multi_query
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x4x3x2xf32>, %[[K:.*]]: tensor<2x1x3x2xf32>, %[[V:.*]]: tensor<2x1x3x2xf32>, %[[M:.*]]: tensor<2x1x3x3xf32> {ppc.input = "mask"})
// CHECK-DAG:     %[[KE:.*]] = ppc.expand %[[K]] : tensor<2x1x3x2xf32> -> tensor<2x4x3x2xf32>
// CHECK-DAG:     %[[VE:.*]] = ppc.expand %[[V]] : tensor<2x1x3x2xf32> -> tensor<2x4x3x2xf32>
// CHECK:         ppc.attention %[[Q]], %[[KE]], %[[VE]] bias %[[M]] scale = 1.000000e+00 :
// CHECK-NOT:     ppc.max
func.func @clamp_and_multi_query(%q: tensor<2x4x3x2xf32>, %k: tensor<2x1x3x2xf32>, %v: tensor<2x1x3x2xf32>, %mask: tensor<2x1x3x3xf32> {ppc.input = "mask"}) -> tensor<2x4x3x2xf32> {
  %lowest = ppc.constant dense<-3.40282347E+38> : tensor<f32>
  %kt = ppc.transpose %k perm = [0, 1, 3, 2] : (tensor<2x1x3x2xf32>) -> tensor<2x1x2x3xf32>
  %s = ppc.matmul %q, %kt : (tensor<2x4x3x2xf32>, tensor<2x1x2x3xf32>) -> tensor<2x4x3x3xf32>
  %a = ppc.add %s, %mask : (tensor<2x4x3x3xf32>, tensor<2x1x3x3xf32>) -> tensor<2x4x3x3xf32>
  %c = ppc.max %a, %lowest : (tensor<2x4x3x3xf32>, tensor<f32>) -> tensor<2x4x3x3xf32>
  %p = ppc.softmax %c axis = 3 : tensor<2x4x3x3xf32>
  %o = ppc.matmul %p, %v : (tensor<2x4x3x3xf32>, tensor<2x1x3x2xf32>) -> tensor<2x4x3x2xf32>
  return %o : tensor<2x4x3x2xf32>
}
