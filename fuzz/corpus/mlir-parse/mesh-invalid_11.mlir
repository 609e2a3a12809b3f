ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @shardings_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = ppc.neg %x {ppc.shardings = [#ppc.sharding<@mesh, [[dp]]>, #ppc.sharding<@mesh, [[dp]]>]} : tensor<4xf32>
  return %0 : tensor<4xf32>
}
