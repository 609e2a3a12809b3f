#!/usr/bin/env python3
"""Per-kernel GPU times of one training step from Nsight Compute's CSV
(`ncu --metrics gpu__time_duration.sum ... ; ncu --import R --csv
--print-units base`): kernels grouped by name, largest total first, with
their share of the step's kernel time.

    python3 bench/gpu/kernel_table.py ncu.csv [--top 25]
"""
import argparse
import collections
import csv
import re

SCALE = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "ns": 1e-9,
         "us": 1e-6, "ms": 1e-3}


def short(name):
    """A kernel's name without template arguments and parameter lists."""
    name = re.sub(r"\(.*\)$", "", name)
    depth, out = 0, []
    for ch in name:
        depth += ch == "<"
        if depth == 0:
            out.append(ch)
        depth -= ch == ">" and depth > 0
    return "".join(out).replace("void ", "").strip()[:70]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv")
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    total = collections.Counter()
    count = collections.Counter()
    with open(args.csv, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    header = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    cols = rows[header]
    name_col, unit_col, value_col = (cols.index(c) for c in
                                     ("Kernel Name", "Metric Unit", "Metric Value"))
    for r in rows[header + 1:]:
        if len(r) <= value_col or not r[value_col].replace(".", "", 1).replace(",", "").isdigit():
            continue
        seconds = float(r[value_col].replace(",", "")) * SCALE.get(r[unit_col], 1e-9)
        key = short(r[name_col])
        total[key] += seconds
        count[key] += 1
    all_time = sum(total.values())
    print(f"{sum(count.values())} kernel launches, {all_time * 1e3:.2f} ms of kernel time")
    print(f"{'kernel':70} {'launches':>8} {'ms':>9} {'share':>6}")
    for key, seconds in total.most_common(args.top):
        print(f"{key:70} {count[key]:8} {seconds * 1e3:9.3f} {100 * seconds / all_time:5.1f}%")


if __name__ == "__main__":
    main()
