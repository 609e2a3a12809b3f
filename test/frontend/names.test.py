"""Checks what names.test's commands wrote.

    names.test.py ERRORS.txt      one line, no control byte but its newline
"""
import sys


def main(args):
    data = open(args[0], "rb").read()
    assert data.count(b"\n") == 1 and data.endswith(b"\n"), data
    bad = [b for b in data[:-1] if b < 0x20 or b == 0x7f or b >= 0x80]
    assert not bad, data
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
