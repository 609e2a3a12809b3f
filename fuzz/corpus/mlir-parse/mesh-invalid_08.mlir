func.func private @unknown_mesh(tensor<4xf32> {ppc.sharding = #ppc.sharding<@nowhere, [[dp]]>})
