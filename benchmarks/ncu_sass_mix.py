"""What one kernel's instructions are, and what its warps wait for, from an
Nsight Compute export by instruction:

    ncu --set full -o rep -k regex:NAME ... python ...
    ncu -i rep.ncu-rep --page source --csv --print-source sass > FILE.csv
    python benchmarks/ncu_sass_mix.py FILE.csv[.gz] [--per DMMA.16x8x8] [--top N]

Prints the share of executed instructions by opcode (with its modifiers, as
``IMAD.MOV.U32``), the instructions executed per ``--per`` instruction, and
the share of the warp-state samples by stall reason (issued and not); with
``--top``, the N instructions with the most samples, each with its share and
its two main stall reasons.
"""
from __future__ import annotations

import argparse
import collections
import csv
import gzip


def mix(path: str, per: str, top: int = 0) -> dict:
    """The export at ``path``: ``{"instructions": {opcode: %}, "per": n, "stalls": {reason: %}, "top": [(address,
    source, % of the samples, {reason: % of its samples}), ...]}`` (``top`` instructions by samples)."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        rows = list(csv.reader(f))
    header = rows[1]  # (rows[0] names the kernel)
    col = {name: i for i, name in enumerate(header)}
    executed, stalls, lines = collections.Counter(), collections.Counter(), []
    for row in rows[2:]:
        if len(row) != len(header):
            continue
        words = [w for w in row[col["Source"]].split() if not w.startswith("@")]  # past the predicate
        executed[words[0] if words else ""] += float(row[col["Instructions Executed"]] or 0)
        mine = collections.Counter()
        for name in header:
            if name.startswith("stall_") and "Not Issued" not in name:
                mine[name[len("stall_"):]] += float(row[col[name]] or 0)
        stalls.update(mine)
        lines.append((row[col["Address"]], row[col["Source"]], mine))
    total, sampled = sum(executed.values()), sum(stalls.values())
    lines.sort(key=lambda line: -sum(line[2].values()))
    return {"instructions": {op: round(100 * n / total, 1) for op, n in executed.most_common(15)},
            "per": round(total / executed[per], 1) if executed[per] else None,
            "stalls": {reason: round(100 * n / sampled, 1) for reason, n in stalls.most_common(8)},
            "top": [(address, source, round(100 * sum(mine.values()) / sampled, 1),
                     {r: round(100 * n / sum(mine.values())) for r, n in mine.most_common(2)})
                    for address, source, mine in lines[:top]]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="the export (.csv or .csv.gz)")
    ap.add_argument("--per", default="DMMA.16x8x8", help="count instructions per one of these")
    ap.add_argument("--top", type=int, default=0, help="list this many instructions with the most samples")
    args = ap.parse_args(argv)
    res = mix(args.csv, args.per, args.top)
    print("instructions (% executed):", res["instructions"])
    print(f"instructions per {args.per}:", res["per"])
    print("warp-state samples (%):", res["stalls"])
    for address, source, share, reasons in res["top"]:
        print(f"{address} {share:5.1f}% {reasons} {source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
