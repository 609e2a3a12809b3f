func.func @collective_not_a_mesh(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = ppc.all_reduce %x on @collective_not_a_mesh["tp"] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}
