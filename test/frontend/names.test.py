"""Checks what names.test's commands wrote.

    names.test.py ERRORS.txt      one line, no control byte but its newline
    names.test.py --source F.cpp  no line of the source begins with what a
                                  node name tried to put there
"""
import sys


def main(args):
    if args[0] == "--source":
        data = open(args[1], "rb").read()
        assert b"\r" not in data, "a carriage return reached the generated source"
        for line in data.split(b"\n"):
            stripped = line.strip()
            assert not stripped.startswith((b"int injected", b"#include </etc")), line
        return 0
    data = open(args[0], "rb").read()
    assert data.count(b"\n") == 1 and data.endswith(b"\n"), data
    bad = [b for b in data[:-1] if b < 0x20 or b == 0x7f or b >= 0x80]
    assert not bad, data
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
