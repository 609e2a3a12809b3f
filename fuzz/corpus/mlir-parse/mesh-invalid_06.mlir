ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func private @rank_mismatch(tensor<4x4xf32> {ppc.sharding = #ppc.sharding<@mesh, [[dp]]>})
