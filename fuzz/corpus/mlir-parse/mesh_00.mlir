ppc.mesh @mesh axes = ["pp", "dp", "tp"] shape = [1, 2, 4]
ppc.mesh @square axes = ["x", "y"] shape = [2, 2]

func.func @function_shardings(
    %w: tensor<8x4x16xf32> {ppc.param = "w", ppc.sharding = #ppc.sharding<@mesh, [[dp], [], [tp]]>},
    %b: tensor<16xf32> {ppc.sharding = #ppc.sharding<@mesh, [["dp", tp]]>},
    %s: tensor<f32> {ppc.sharding = #ppc.sharding<@mesh, []>},
    %y: tensor<8x4xf32>)
    -> (tensor<8x4xf32> {ppc.output = "y", ppc.sharding = #ppc.sharding<@mesh, [[], []], partial = [tp]>}) {
  return %y : tensor<8x4xf32>
}

func.func @op_shardings(%a: tensor<4x2xf32>, %b: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %0 = ppc.matmul %a, %b {ppc.shardings = [#ppc.sharding<@mesh, [[dp], []], partial = [tp]>]} : (tensor<4x2xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

func.func @all_reduce(%x: tensor<4x8xf32>, %i: tensor<3xi64>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<3xi64>) {
  %0 = ppc.all_reduce %x on @mesh["tp"] sum : tensor<4x8xf32>
  %1 = ppc.all_reduce %x on @mesh["dp", "tp"] max : tensor<4x8xf32>
  %2 = ppc.all_reduce %x on @mesh["tp", "dp"] sum : tensor<4x8xf32>
  %3 = ppc.all_reduce %i on @square["x"] max : tensor<3xi64>
  return %0, %1, %2, %3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<3xi64>
}

func.func @all_gather_and_slice(%x: tensor<4x2xf32>, %b: tensor<2x3xi1>) -> (tensor<4x2xf32>, tensor<16x3xi1>) {
  %0 = ppc.all_gather %x on @mesh["tp"] dim = 1 : tensor<4x2xf32> -> tensor<4x8xf32>
  %1 = ppc.all_slice %0 on @mesh["tp"] dim = 1 : tensor<4x8xf32> -> tensor<4x2xf32>
  %2 = ppc.all_gather %b on @mesh["dp", "tp"] dim = 0 : tensor<2x3xi1> -> tensor<16x3xi1>
  return %1, %2 : tensor<4x2xf32>, tensor<16x3xi1>
}

func.func @reduce_scatter(%x: tensor<8x4xf32>) -> (tensor<4x4xf32>, tensor<8x1xf32>) {
  %0 = ppc.reduce_scatter %x on @mesh["dp"] dim = 0 sum : tensor<8x4xf32> -> tensor<4x4xf32>
  %1 = ppc.reduce_scatter %x on @mesh["tp"] dim = 1 max : tensor<8x4xf32> -> tensor<8x1xf32>
  return %0, %1 : tensor<4x4xf32>, tensor<8x1xf32>
}

func.func @all_to_all(%x: tensor<2x8xf32>) -> (tensor<8x2xf32>, tensor<2x8xf32>) {
  %0 = ppc.all_to_all %x on @mesh["tp"] split = 1 concat = 0 : tensor<2x8xf32> -> tensor<8x2xf32>
  %1 = ppc.all_to_all %x on @mesh["tp"] split = 1 concat = 1 : tensor<2x8xf32> -> tensor<2x8xf32>
  return %0, %1 : tensor<8x2xf32>, tensor<2x8xf32>
}

func.func @axis_index() -> (tensor<i64>, tensor<i64>, tensor<i64>) {
  %0 = ppc.axis_index on @mesh["tp"] : tensor<i64>
  %1 = ppc.axis_index on @mesh["dp", "tp"] : tensor<i64>
  %2 = ppc.axis_index on @mesh[] : tensor<i64>
  return %0, %1, %2 : tensor<i64>, tensor<i64>, tensor<i64>
}
