ppc.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func private @split_and_partial(tensor<4x4xf32> {ppc.sharding = #ppc.sharding<@mesh, [[dp], []], partial = [dp]>})
