// RUN: ppc-opt %s -split-input-file -ppc-fold-constants | FileCheck %s
// RUN: ppc-opt %s -split-input-file -ppc-fold-constants=max-elements=4 | FileCheck %s --check-prefix=LIMIT

// The pass replaces folded ops by constants but leaves the operands' now
// unused constants in place (DCE is -canonicalize's job), so the checks below
// look for the folded value and for the absence of the folded op. Expected
// values are worked out by hand from the ops' definitions.

// Tests that an add of two constants, with broadcasting, becomes one constant
// holding the elementwise sums.
// CHECK-LABEL: func.func @add_constants
// CHECK-NOT:     ppc.add
// CHECK:         %[[SUM:.*]] = ppc.constant dense<{{\[}}[1.100000e+01, 2.200000e+01, 3.350000e+01], [1.400000e+01, 2.500000e+01, 3.650000e+01]]> : tensor<2x3xf32>
// CHECK-NOT:     ppc.add
// CHECK:         return %[[SUM]] : tensor<2x3xf32>
func.func @add_constants() -> tensor<2x3xf32> {
  %a = ppc.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %b = ppc.constant dense<[10.0, 20.0, 30.5]> : tensor<3xf32>
  %0 = ppc.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests that a chain constant -> reshape -> transpose -> cast folds
// completely: [-3..2] viewed as 2x3 is [[-3, -2, -1], [0, 1, 2]], its
// transpose [[-3, 0], [-2, 1], [-1, 2]].
// CHECK-LABEL: func.func @fold_chain
// CHECK-NOT:     ppc.reshape
// CHECK-NOT:     ppc.transpose
// CHECK-NOT:     ppc.cast
// CHECK:         %[[F:.*]] = ppc.constant dense<{{\[}}[-3.000000e+00, 0.000000e+00], [-2.000000e+00, 1.000000e+00], [-1.000000e+00, 2.000000e+00]]> : tensor<3x2xf32>
// CHECK-NOT:     ppc.cast
// CHECK:         return %[[F]] : tensor<3x2xf32>
func.func @fold_chain() -> tensor<3x2xf32> {
  %a = ppc.constant dense<[-3, -2, -1, 0, 1, 2]> : tensor<6xi64>
  %0 = ppc.reshape %a : tensor<6xi64> -> tensor<2x3xi64>
  %1 = ppc.transpose %0 perm = [1, 0] : (tensor<2x3xi64>) -> tensor<3x2xi64>
  %2 = ppc.cast %1 : tensor<3x2xi64> -> tensor<3x2xf32>
  return %2 : tensor<3x2xf32>
}

// -----

// Tests that a transpose of rank 3 folds with the permuted element order:
// input[i][j][k] = 100i + 10j + k of shape 2x2x3, result[k][i][j].
// CHECK-LABEL: func.func @fold_transpose_rank3
// CHECK-NOT:     ppc.transpose
// CHECK:         %[[T:.*]] = ppc.constant dense<{{\[}}{{\[}}[0, 10], [100, 110]], {{\[}}[1, 11], [101, 111]], {{\[}}[2, 12], [102, 112]]]> : tensor<3x2x2xi32>
// CHECK:         return %[[T]]
func.func @fold_transpose_rank3() -> tensor<3x2x2xi32> {
  %a = ppc.constant dense<[[[0, 1, 2], [10, 11, 12]], [[100, 101, 102], [110, 111, 112]]]> : tensor<2x2x3xi32>
  %0 = ppc.transpose %a perm = [2, 0, 1] : (tensor<2x2x3xi32>) -> tensor<3x2x2xi32>
  return %0 : tensor<3x2x2xi32>
}

// -----

// Tests that cast folds with ONNX semantics: float to integer truncates
// toward zero, anything to i1 is x != 0.
// CHECK-LABEL: func.func @fold_cast_semantics
// CHECK-NOT:     ppc.cast
// CHECK-DAG:     %[[I:.*]] = ppc.constant dense<[-2, -1, 0, 0, 1, 2]> : tensor<6xi32>
// CHECK-DAG:     %[[B:.*]] = ppc.constant dense<[true, true, true, false, true, true]> : tensor<6xi1>
// CHECK:         return %[[I]], %[[B]]
func.func @fold_cast_semantics() -> (tensor<6xi32>, tensor<6xi1>) {
  %a = ppc.constant dense<[-2.5, -1.75, -0.5, 0.0, 1.9, 2.0]> : tensor<6xf32>
  %0 = ppc.cast %a : tensor<6xf32> -> tensor<6xi32>
  %1 = ppc.cast %a : tensor<6xf32> -> tensor<6xi1>
  return %0, %1 : tensor<6xi32>, tensor<6xi1>
}

// -----

// Tests that an op with a non-constant operand is left alone, together with
// its constant operand.
// CHECK-LABEL: func.func @non_constant_operand
// CHECK-SAME:    (%[[X:.*]]: tensor<3xf32>)
// CHECK:         %[[C:.*]] = ppc.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
// CHECK-NEXT:    %[[R:.*]] = ppc.mul %[[X]], %[[C]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT:    return %[[R]] : tensor<3xf32>
func.func @non_constant_operand(%x: tensor<3xf32>) -> tensor<3xf32> {
  %c = ppc.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %0 = ppc.mul %x, %c : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// Tests that folding stops at the first op with a non-constant operand: the
// negation of the constant folds, the add that uses it and the argument
// does not.
// CHECK-LABEL: func.func @partially_constant
// CHECK-SAME:    (%[[X:.*]]: tensor<2xi64>)
// CHECK-NOT:     ppc.neg
// CHECK:         %[[N:.*]] = ppc.constant dense<[-5, 7]> : tensor<2xi64>
// CHECK-NOT:     ppc.neg
// CHECK:         %[[R:.*]] = ppc.add %[[X]], %[[N]]
// CHECK:         return %[[R]]
func.func @partially_constant(%x: tensor<2xi64>) -> tensor<2xi64> {
  %c = ppc.constant dense<[5, -7]> : tensor<2xi64>
  %0 = ppc.neg %c : tensor<2xi64>
  %1 = ppc.add %x, %0 : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %1 : tensor<2xi64>
}

// -----

// Tests that max-elements bounds the folded results: the 4-element add still
// folds under max-elements=4, the 8-element expand of it does not, and by
// default both fold.
// CHECK-LABEL: func.func @max_elements
// CHECK-NOT:     ppc.add
// CHECK-NOT:     ppc.expand
// CHECK:         %[[E:.*]] = ppc.constant dense<{{\[}}{{\[}}[1, 3], [5, 7]], {{\[}}[1, 3], [5, 7]]]> : tensor<2x2x2xi64>
// CHECK:         return %[[E]]
// LIMIT-LABEL: func.func @max_elements
// LIMIT-NOT:     ppc.add
// LIMIT:         %[[S:.*]] = ppc.constant dense<{{\[}}[1, 3], [5, 7]]> : tensor<2x2xi64>
// LIMIT-NOT:     ppc.add
// LIMIT:         %[[E:.*]] = ppc.expand %[[S]] : tensor<2x2xi64> -> tensor<2x2x2xi64>
// LIMIT:         return %[[E]]
func.func @max_elements() -> tensor<2x2x2xi64> {
  %a = ppc.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
  %b = ppc.constant dense<[0, 1]> : tensor<2xi64>
  %c = ppc.constant dense<[[0], [2]]> : tensor<2x1xi64>
  %0 = ppc.add %a, %b : (tensor<2x2xi64>, tensor<2xi64>) -> tensor<2x2xi64>
  %1 = ppc.add %0, %c : (tensor<2x2xi64>, tensor<2x1xi64>) -> tensor<2x2xi64>
  %2 = ppc.expand %1 : tensor<2x2xi64> -> tensor<2x2x2xi64>
  return %2 : tensor<2x2x2xi64>
}

// -----

// Tests that trilu of a constant ones matrix gives the lower triangle
// (col - row <= 0) of a non-square matrix.
// CHECK-LABEL: func.func @trilu_lower
// CHECK-NOT:     ppc.trilu
// CHECK:         %[[L:.*]] = ppc.constant dense<{{\[}}[1.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [1.000000e+00, 1.000000e+00, 0.000000e+00, 0.000000e+00], [1.000000e+00, 1.000000e+00, 1.000000e+00, 0.000000e+00]]> : tensor<3x4xf32>
// CHECK:         return %[[L]]
func.func @trilu_lower() -> tensor<3x4xf32> {
  %ones = ppc.constant dense<1.0> : tensor<3x4xf32>
  %0 = ppc.trilu %ones upper = false k = 0 : tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Tests that trilu with upper = true and k = 1 keeps col - row >= 1 in every
// matrix of a batch (the causal-mask complement), here on bools.
// CHECK-LABEL: func.func @trilu_upper_batched
// CHECK-NOT:     ppc.trilu
// CHECK:         %[[U:.*]] = ppc.constant dense<{{\[}}{{\[}}[false, true, true], [false, false, true], [false, false, false]], {{\[}}[false, true, true], [false, false, true], [false, false, false]]]> : tensor<2x3x3xi1>
// CHECK:         return %[[U]]
func.func @trilu_upper_batched() -> tensor<2x3x3xi1> {
  %ones = ppc.constant dense<true> : tensor<2x3x3xi1>
  %0 = ppc.trilu %ones upper = true k = 1 : tensor<2x3x3xi1>
  return %0 : tensor<2x3x3xi1>
}

// -----

// Tests that trilu with a negative k drops the main diagonal too.
// CHECK-LABEL: func.func @trilu_lower_negative_k
// CHECK:         %[[L:.*]] = ppc.constant dense<{{\[}}[0, 0, 0], [1, 0, 0], [1, 1, 0]]> : tensor<3x3xi64>
// CHECK:         return %[[L]]
func.func @trilu_lower_negative_k() -> tensor<3x3xi64> {
  %ones = ppc.constant dense<1> : tensor<3x3xi64>
  %0 = ppc.trilu %ones upper = false k = -1 : tensor<3x3xi64>
  return %0 : tensor<3x3xi64>
}

// -----

// Tests that integer shape arithmetic folds step by step: [2, 16, 64] times
// [1, 1, 4] is [2, 16, 256], plus [0, 0, -1] is [2, 16, 255], and a 0-d 3
// broadcast from the left times that is [6, 48, 765].
// CHECK-LABEL: func.func @shape_arithmetic
// CHECK-NOT:     ppc.mul
// CHECK-NOT:     ppc.add
// CHECK-DAG:     %[[M:.*]] = ppc.constant dense<[2, 16, 256]> : tensor<3xi64>
// CHECK-DAG:     %[[A:.*]] = ppc.constant dense<[2, 16, 255]> : tensor<3xi64>
// CHECK-DAG:     %[[S:.*]] = ppc.constant dense<[6, 48, 765]> : tensor<3xi64>
// CHECK-NOT:     ppc.mul
// CHECK-NOT:     ppc.add
// CHECK:         return %[[M]], %[[A]], %[[S]]
func.func @shape_arithmetic() -> (tensor<3xi64>, tensor<3xi64>, tensor<3xi64>) {
  %shape = ppc.constant dense<[2, 16, 64]> : tensor<3xi64>
  %heads = ppc.constant dense<[1, 1, 4]> : tensor<3xi64>
  %minus = ppc.constant dense<[0, 0, -1]> : tensor<3xi64>
  %three = ppc.constant dense<3> : tensor<i64>
  %0 = ppc.mul %shape, %heads : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %1 = ppc.add %0, %minus : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %2 = ppc.mul %three, %1 : (tensor<i64>, tensor<3xi64>) -> tensor<3xi64>
  return %0, %1, %2 : tensor<3xi64>, tensor<3xi64>, tensor<3xi64>
}

// -----

// Tests that integer division folds truncating toward zero, not flooring.
// CHECK-LABEL: func.func @integer_division
// CHECK-NOT:     ppc.div
// CHECK:         %[[Q:.*]] = ppc.constant dense<[3, -3, -3, 3, 0]> : tensor<5xi64>
// CHECK:         return %[[Q]]
func.func @integer_division() -> tensor<5xi64> {
  %a = ppc.constant dense<[7, -7, 7, -7, 1]> : tensor<5xi64>
  %b = ppc.constant dense<[2, 2, -2, -2, 4]> : tensor<5xi64>
  %0 = ppc.div %a, %b : (tensor<5xi64>, tensor<5xi64>) -> tensor<5xi64>
  return %0 : tensor<5xi64>
}

// -----

// Tests that a comparison of constants folds to an i1 constant.
// CHECK-LABEL: func.func @compare_constants
// CHECK-NOT:     ppc.less
// CHECK:         %[[B:.*]] = ppc.constant dense<{{\[}}[true, false, false], [true, true, false]]> : tensor<2x3xi1>
// CHECK:         return %[[B]]
func.func @compare_constants() -> tensor<2x3xi1> {
  %a = ppc.constant dense<[[0, 5, 9], [-1, 3, 4]]> : tensor<2x3xi32>
  %b = ppc.constant dense<[[1], [4]]> : tensor<2x1xi32>
  %0 = ppc.less %a, %b : (tensor<2x3xi32>, tensor<2x1xi32>) -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// -----

// Tests that nll_loss with a class weight and an ignored target folds in each
// reduction mode. Input [N=2, C=3, d=2] holds -(6n + 2c + d + 1); targets
// [[2, 0], [1, 5]] with 5 ignored pick 5, 2 and 9, weighted 0.5, 1 and 1.5:
// losses [[2.5, 2], [13.5, 0]], sum 18, weight sum 3, mean 6.
// CHECK-LABEL: func.func @nll_loss_weighted_ignore_index
// CHECK-NOT:     ppc.nll_loss
// CHECK-DAG:     %[[NONE:.*]] = ppc.constant dense<{{\[}}[2.500000e+00, 2.000000e+00], [1.350000e+01, 0.000000e+00]]> : tensor<2x2xf32>
// CHECK-DAG:     %[[SUM:.*]] = ppc.constant dense<1.800000e+01> : tensor<f32>
// CHECK-DAG:     %[[MEAN:.*]] = ppc.constant dense<6.000000e+00> : tensor<f32>
// CHECK-NOT:     ppc.nll_loss
// CHECK:         return %[[NONE]], %[[SUM]], %[[MEAN]]
func.func @nll_loss_weighted_ignore_index() -> (tensor<2x2xf32>, tensor<f32>, tensor<f32>) {
  %lp = ppc.constant dense<[[[-1.0, -2.0], [-3.0, -4.0], [-5.0, -6.0]], [[-7.0, -8.0], [-9.0, -10.0], [-11.0, -12.0]]]> : tensor<2x3x2xf32>
  %t = ppc.constant dense<[[2, 0], [1, 5]]> : tensor<2x2xi64>
  %w = ppc.constant dense<[1.0, 1.5, 0.5]> : tensor<3xf32>
  %0 = ppc.nll_loss %lp, %t, %w none ignore_index = 5 : (tensor<2x3x2xf32>, tensor<2x2xi64>, tensor<3xf32>) -> tensor<2x2xf32>
  %1 = ppc.nll_loss %lp, %t, %w sum ignore_index = 5 : (tensor<2x3x2xf32>, tensor<2x2xi64>, tensor<3xf32>) -> tensor<f32>
  %2 = ppc.nll_loss %lp, %t, %w mean ignore_index = 5 : (tensor<2x3x2xf32>, tensor<2x2xi64>, tensor<3xf32>) -> tensor<f32>
  return %0, %1, %2 : tensor<2x2xf32>, tensor<f32>, tensor<f32>
}

// -----

// Tests that nll_loss without ignore_index folds: mean of (2 + 3) over 2 targets.
// CHECK-LABEL: func.func @nll_loss_without_ignore_index
// CHECK: ppc.constant dense<2.500000e+00> : tensor<f32>
// CHECK-NOT: ppc.nll_loss
func.func @nll_loss_without_ignore_index() -> tensor<f32> {
  %lp = ppc.constant dense<[[-1.0, -2.0], [-3.0, -4.0]]> : tensor<2x2xf32>
  %t = ppc.constant dense<[1, 0]> : tensor<2xi64>
  %0 = ppc.nll_loss %lp, %t mean : (tensor<2x2xf32>, tensor<2xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}
