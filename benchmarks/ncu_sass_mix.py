"""What one kernel's instructions are, and what its warps wait for, from an
Nsight Compute export by instruction:

    ncu --set full -o rep -k regex:NAME ... python ...
    ncu -i rep.ncu-rep --page source --csv --print-source sass > FILE.csv
    python benchmarks/ncu_sass_mix.py FILE.csv[.gz] [--per DMMA.16x8x8] [--top N] [--runs PCT] [--span A:B]

Prints the share of executed instructions by opcode (with its modifiers, as
``IMAD.MOV.U32``), the instructions executed per ``--per`` instruction, and
the share of the warp-state samples by stall reason (issued and not); with
``--top``, the N instructions with the most samples, each with its share and
its two main stall reasons.  ``--span A:B`` takes the instructions A to B
only (their places in the export, from 0), and their share of all the
kernel's samples.  ``--runs PCT`` lists the runs of consecutive
instructions executed equally often that hold at least PCT% of the
samples: in a kernel whose warps take roles (copies, products, ...), the
code of one role runs as many times as that role's warps pass it, so the
runs show which role its samples come from.
"""
from __future__ import annotations

import argparse
import collections
import csv
import gzip


def _rows(path: str) -> tuple[dict, list]:
    """The export's column numbers by name and its rows of instructions."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        rows = list(csv.reader(f))
    header = rows[1]  # (rows[0] names the kernel)
    return {name: i for i, name in enumerate(header)}, [row for row in rows[2:] if len(row) == len(header)]


def _samples(row: list, col: dict) -> collections.Counter:
    """One instruction's warp-state samples by stall reason (issued and not), the reasons with samples."""
    return +collections.Counter({name[len("stall_"):]: float(row[i] or 0) for name, i in col.items()
                                 if name.startswith("stall_") and "Not Issued" not in name})


def runs(path: str, min_share: float) -> list:
    """``[(first, last, executed, % of the samples, {reason: % of its samples}), ...]``: the runs of consecutive
    instructions of the export at ``path`` executed equally often, those with at least ``min_share``% of the
    kernel's samples."""
    col, rows = _rows(path)
    found = []  # [first, last, executed, samples]
    for i, row in enumerate(rows):
        executed = float(row[col["Instructions Executed"]] or 0)
        if found and found[-1][2] == executed:
            found[-1][1] = i
            found[-1][3].update(_samples(row, col))
        else:
            found.append([i, i, executed, _samples(row, col)])
    total = sum(sum(r[3].values()) for r in found)
    return [(a, b, int(ex), round(100 * sum(mine.values()) / total, 2),
             {r: round(100 * n / sum(mine.values())) for r, n in mine.most_common(2)})
            for a, b, ex, mine in found if sum(mine.values()) >= min_share / 100 * total]


def mix(path: str, per: str, top: int = 0, span: tuple[int, int] | None = None) -> dict:
    """The export at ``path``: ``{"instructions": {opcode: %}, "per": n, "stalls": {reason: %}, "share": % of all
    the samples, "top": [(address, source, % of the samples, {reason: % of its samples}), ...]}`` (``top``
    instructions by samples), over instructions ``span[0] .. span[1]`` when given, else all."""
    col, rows = _rows(path)
    everything = sum(sum(_samples(row, col).values()) for row in rows)
    if span is not None:
        rows = rows[span[0]:span[1] + 1]
    executed, stalls, lines = collections.Counter(), collections.Counter(), []
    for row in rows:
        words = [w for w in row[col["Source"]].split() if not w.startswith("@")]  # past the predicate
        executed[words[0] if words else ""] += float(row[col["Instructions Executed"]] or 0)
        mine = _samples(row, col)
        stalls.update(mine)
        lines.append((row[col["Address"]], row[col["Source"]], mine))
    total, sampled = sum(executed.values()), sum(stalls.values())
    lines.sort(key=lambda line: -sum(line[2].values()))
    return {"instructions": {op: round(100 * n / total, 1) for op, n in executed.most_common(15)},
            "per": round(total / executed[per], 1) if executed[per] else None,
            "stalls": {reason: round(100 * n / sampled, 1) for reason, n in stalls.most_common(8)},
            "share": round(100 * sampled / everything, 1),
            "top": [(address, source, round(100 * sum(mine.values()) / sampled, 1),
                     {r: round(100 * n / sum(mine.values())) for r, n in mine.most_common(2)})
                    for address, source, mine in lines[:top]]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="the export (.csv or .csv.gz)")
    ap.add_argument("--per", default="DMMA.16x8x8", help="count instructions per one of these")
    ap.add_argument("--top", type=int, default=0, help="list this many instructions with the most samples")
    ap.add_argument("--span", default=None, help="A:B, the instructions A to B only (places in the export)")
    ap.add_argument("--runs", type=float, default=None,
                    help="list the runs of instructions executed equally often with at least this %% of the samples")
    args = ap.parse_args(argv)
    span = tuple(int(v) for v in args.span.split(":")) if args.span else None
    res = mix(args.csv, args.per, args.top, span)
    print("instructions (% executed):", res["instructions"])
    print(f"instructions per {args.per}:", res["per"])
    print(f"warp-state samples (%, {res['share']}% of the kernel's):", res["stalls"])
    for address, source, share, reasons in res["top"]:
        print(f"{address} {share:5.1f}% {reasons} {source}")
    if args.runs is not None:
        print("runs of instructions executed equally often: first, last, times, % of the samples, stalls")
        for first, last, executed, share, reasons in runs(args.csv, args.runs):
            print(f"{first:5d} {last:5d} {executed:10d} {share:6.2f}% {reasons}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
