ppc.mesh @mesh axes = ["tp", "dp", "tp"] shape = [1, 2, 4]
