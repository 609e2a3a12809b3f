ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func private @unknown_axis(tensor<4xf32> {ppc.sharding = #ppc.sharding<@mesh, [[pp]]>})
