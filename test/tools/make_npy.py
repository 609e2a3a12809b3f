#!/usr/bin/env python3
"""Writes good and malformed .npy files for the `ppc eval` tests into OUT_DIR."""
import os
import sys

import numpy as np


def main(out):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 2)).astype(np.float32)
    np.save(os.path.join(out, "x.npy"), x)
    np.save(os.path.join(out, "wrong_shape.npy"), x.reshape(2, 4))
    np.save(os.path.join(out, "wrong_dtype.npy"), np.zeros((4, 2), np.int64))
    np.save(os.path.join(out, "big_endian.npy"), x.astype(">f4"))
    np.save(os.path.join(out, "fortran.npy"), np.asfortranarray(x.reshape(2, 4)))
    with open(os.path.join(out, "x.npy"), "rb") as f:
        data = f.read()
    with open(os.path.join(out, "short.npy"), "wb") as f:
        f.write(data[:-20])
    with open(os.path.join(out, "bad_magic.npy"), "wb") as f:
        f.write(b"NOTNUMPY" + data[8:])
    np.save(os.path.join(out, "s.npy"), rng.standard_normal((6, 10)).astype(np.float32))
    np.save(os.path.join(out, "t_out_of_range.npy"), np.array([1, 2, 12, 0, 3, 4]))


if __name__ == "__main__":
    main(sys.argv[1])
