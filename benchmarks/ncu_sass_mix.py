"""What one kernel's instructions are, and what its warps wait for, from an
Nsight Compute export by instruction:

    ncu --set full -o rep -k regex:NAME ... python ...
    ncu -i rep.ncu-rep --page source --csv --print-source sass > FILE.csv
    python benchmarks/ncu_sass_mix.py FILE.csv[.gz] [--per DMMA.16x8x8]

Prints the share of executed instructions by opcode (with its modifiers, as
``IMAD.MOV.U32``), the instructions executed per ``--per`` instruction, and
the share of the warp-state samples by stall reason (issued and not).
"""
from __future__ import annotations

import argparse
import collections
import csv
import gzip


def mix(path: str, per: str) -> dict:
    """The export at ``path``: ``{"instructions": {opcode: %}, "per": n, "stalls": {reason: %}}``."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        rows = list(csv.reader(f))
    header = rows[1]  # (rows[0] names the kernel)
    col = {name: i for i, name in enumerate(header)}
    executed, stalls = collections.Counter(), collections.Counter()
    for row in rows[2:]:
        if len(row) != len(header):
            continue
        words = [w for w in row[col["Source"]].split() if not w.startswith("@")]  # past the predicate
        executed[words[0] if words else ""] += float(row[col["Instructions Executed"]] or 0)
        for name in header:
            if name.startswith("stall_") and "Not Issued" not in name:
                stalls[name[len("stall_"):]] += float(row[col[name]] or 0)
    total, sampled = sum(executed.values()), sum(stalls.values())
    return {"instructions": {op: round(100 * n / total, 1) for op, n in executed.most_common(15)},
            "per": round(total / executed[per], 1) if executed[per] else None,
            "stalls": {reason: round(100 * n / sampled, 1) for reason, n in stalls.most_common(8)}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="the export (.csv or .csv.gz)")
    ap.add_argument("--per", default="DMMA.16x8x8", help="count instructions per one of these")
    args = ap.parse_args(argv)
    res = mix(args.csv, args.per)
    print("instructions (% executed):", res["instructions"])
    print(f"instructions per {args.per}:", res["per"])
    print("warp-state samples (%):", res["stalls"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
