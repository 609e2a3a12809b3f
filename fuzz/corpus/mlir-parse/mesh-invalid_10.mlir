func.func private @not_a_sharding(tensor<4xf32> {ppc.sharding = "dp"})
