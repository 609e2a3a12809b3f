func.func @collective_unknown_mesh(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = ppc.all_reduce %x on @mesh["tp"] sum : tensor<4xf32>
  return %0 : tensor<4xf32>
}
