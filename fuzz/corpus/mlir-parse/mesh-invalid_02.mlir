ppc.mesh @mesh axes = ["dp", ""] shape = [2, 2]
