ppc.mesh @mesh axes = ["dp", "tp"] shape = [1, 2, 4]
