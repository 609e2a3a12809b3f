ppc.mesh @mesh axes = ["dp", "tp"] shape = [0, 2]
