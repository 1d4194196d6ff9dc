"""Products with the native kernels launched plainly or programmatically, in one process.

Each variant is a GPU backend of its own: ``plain`` (``programmatic_launch``
off) or ``pdl`` (programmatic launches), ``pdl:E`` with ``early_loads = E``,
either with settings of the backend's integer attributes appended, e.g.
``pdl:2+fwd_lanes=64``.  For every
row (the GPU issue's middle-size rows; with ``--big`` the big size's
one-vector rows too) the variants' operators are built on the same
``Fhat`` and input, checked to agree with the first (``rel_diff``: bit for
bit unless a variant changes the order of the sums), and timed
in alternation, ``--rounds`` times: the median of ``-N`` products each
waited for (host clock, as ``fftmatvec bench``'s "time") and the time per
product of ``-N`` queued back to back.  One JSON line per row, variant and
round, with the floor (``Fhat``'s bytes over the copy bandwidth measured
here).

usage: python benchmarks/launch_ab.py --variants plain,pdl:0,pdl:2+fwd_lanes=64 --out results/x.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from fftmatvec import BTTOperator
from fftmatvec.backend.gpu import GPUBackend
from fftmatvec.bench import random_slab

MID = (1000, 50, 500)
BIG = (5000, 100, 1000)
ROWS = [("ddddd", False), ("ddddd", True), ("dssdd", False), ("ddssd", True)]


def backend(variant: str) -> GPUBackend:
    """``plain``, or ``pdl[:E]`` (``early_loads = E``) followed by ``+attr=value`` settings of the
    backend's integer attributes."""
    kind, *settings = variant.split("+")
    be = GPUBackend()
    if kind == "plain" and not settings:
        be.programmatic_launch = False
        return be
    kind, _, early = kind.partition(":")
    if kind != "pdl" or not be.programmatic_launch:
        raise SystemExit(f"variant {variant!r}: expected plain, or pdl[:E][+attr=value...] on a device with "
                         f"programmatic launch")
    settings = ([f"early_loads={early}"] if early else []) + settings
    for setting in settings:
        attr, _, value = setting.partition("=")
        if not hasattr(be, attr):
            raise SystemExit(f"variant {variant!r}: GPUBackend has no attribute {attr!r}")
        setattr(be, attr, int(value))
    return be


def waited(apply, x, be, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        apply(x)
        be.synchronize()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def back_to_back(apply, x, be, reps: int) -> float:
    be.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        apply(x)
    be.synchronize()
    return (time.perf_counter() - t0) / reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", default="plain,pdl")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-N", type=int, default=200)
    ap.add_argument("--big", action="store_true", help="the big size's one-vector rows too")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    variants = args.variants.split(",")
    backends = {v: backend(v) for v in variants}
    first = backends[variants[0]]
    command = "python benchmarks/launch_ab.py " + " ".join(sys.argv[1:])
    sizes = [MID] + ([BIG] if args.big else [])
    with open(args.out, "a") as out:
        for Nm, Nd, Nt in sizes:
            f = random_slab(7, Nd, Nm, Nt, (0, Nd), (0, Nm))
            for code, adjoint in ROWS:
                n_in = Nd if adjoint else Nm
                x = first.asarray(np.random.default_rng([7, 1]).standard_normal((n_in, Nt)))
                kw = dict(adjoint_precision=code) if adjoint else dict(precision=code)
                ops = {v: BTTOperator(f, device=be, **kw) for v, be in backends.items()}
                applies = {v: (op.rmatvec if adjoint else op.matvec) for v, op in ops.items()}
                results = {v: applies[v](x) for v in variants}
                ref = results[variants[0]]
                rel_diff = {v: float(abs(results[v] - ref).max() / abs(ref).max()) for v in variants}
                for v in variants:
                    if rel_diff[v] > 1e-5:  # a set-up that changes the summation order differs in the last bits
                        raise SystemExit(f"{code} {'F^T d' if adjoint else 'F m'}: {v} differs from {variants[0]} "
                                         f"by {rel_diff[v]:.2e}")
                op = ops[variants[0]]
                fhat = op.engine.Fhat[(op.adjoint_precision if adjoint else op.precision).sbgemv]
                floor = fhat.nbytes / first.copy_bandwidth(nbytes=int(max(fhat.nbytes, 256 << 20)))
                for rnd in range(args.rounds):
                    for v in variants:
                        be = backends[v]
                        for _ in range(3):  # warm: recorded, replayed
                            applies[v](x)
                        t_w = waited(applies[v], x, be, args.N)
                        t_b = back_to_back(applies[v], x, be, args.N)
                        row = dict(Nm=Nm, Nd=Nd, Nt=Nt, precision=code, adjoint=adjoint, variant=v, round=rnd,
                                   waited_us=round(t_w * 1e6, 2), back_to_back_us=round(t_b * 1e6, 2),
                                   floor_us=round(floor * 1e6, 2), waited_x_floor=round(t_w / floor, 4),
                                   back_to_back_x_floor=round(t_b / floor, 4), rel_diff=rel_diff[v],
                                   device=first.device_name,
                                   command=command)
                        print(json.dumps(row), flush=True)
                        out.write(json.dumps(row) + "\n")
                del op, ops, applies, results


if __name__ == "__main__":
    main()
