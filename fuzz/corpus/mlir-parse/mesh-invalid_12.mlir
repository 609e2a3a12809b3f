func.func @shardings_kind(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = ppc.neg %x {ppc.shardings = ["dp"]} : tensor<4xf32>
  return %0 : tensor<4xf32>
}
