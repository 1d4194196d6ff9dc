"""Products with the native kernels launched plainly or programmatically, in one process.

Each variant is a GPU backend of its own: ``plain`` (``programmatic_launch``
off) or ``pdl`` (programmatic launches), ``pdl:E`` with ``early_loads = E``,
either with settings of the backend's integer attributes appended, e.g.
``pdl:2+fwd_lanes=64``, or register targets of its kernels
(``+reg.PREFIX=N``: the kernels whose name expression starts with
``PREFIX``, which holds no comma, built to ``N`` registers, e.g.
``pdl+reg.sbgemv_adj_flat<float2=32``), and either with ``@REV``: the file of
``native/`` that ``--source`` names (default ``sbgemv.cu``) from git
revision ``REV`` (or ``@file:PATH``, from that file; see ``ab_sources.py``),
launched as the working tree launches it.  For every
row (the GPU issue's middle-size rows; with ``--big`` the big size's
one-vector rows too) the variants' operators are built on the same
``Fhat`` and input, checked to agree with the first (``rel_diff``: bit for
bit unless a variant changes the order of the sums), and timed
in alternation, ``--rounds`` times: the median of ``-N`` products each
waited for (host clock, as ``fftmatvec bench``'s "time") and the time per
product of ``-N`` queued back to back.  One JSON line per row, variant and
round, with the floor (``Fhat``'s bytes over the copy bandwidth measured
here).  Settings that hold for the whole process (an L2 set-aside, a
context limit) reach every variant once one has made them: compare those in
separate processes (``bench_ab.sh``).

usage: python benchmarks/launch_ab.py --variants plain,pdl:0,pdl:2+fwd_lanes=64,pdl@HEAD~1 --out results/x.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from fftmatvec import BTTOperator
from fftmatvec.backend import kernels
from fftmatvec.backend.gpu import GPUBackend
from fftmatvec.bench import _back_to_back_time, _median_time, random_slab

from ab_sources import use_register_targets, use_revisions

MID = (1000, 50, 500)
BIG = (5000, 100, 1000)
ROWS = [("ddddd", False), ("ddddd", True), ("dssdd", False), ("ddssd", True)]


def backend(variant: str) -> GPUBackend:
    """``plain``, or ``pdl[:E]`` (``early_loads = E``) followed by ``+attr=value`` settings of the
    backend's integer attributes."""
    kind, *settings = variant.partition("@")[0].split("+")
    be = GPUBackend()
    if kind == "plain" and not settings:
        be.programmatic_launch = False
        return be
    kind, _, early = kind.partition(":")
    if kind != "pdl" or not be.programmatic_launch:
        raise SystemExit(f"variant {variant!r}: expected plain, or pdl[:E][+attr=value...] on a device with "
                         f"programmatic launch")
    settings = ([f"early_loads={early}"] if early else []) + [t for t in settings if not t.startswith("reg.")]
    for setting in settings:
        attr, _, value = setting.partition("=")
        if not hasattr(be, attr):
            raise SystemExit(f"variant {variant!r}: GPUBackend has no attribute {attr!r}")
        setattr(be, attr, int(value))
    return be


def register_targets(variant: str) -> list[tuple[str, int]]:
    """The ``(prefix, registers)`` pairs of ``variant``'s ``+reg.PREFIX=N`` settings."""
    settings = variant.partition("@")[0].split("+")[1:]
    return [(p[4:], int(n)) for p, _, n in (t.rpartition("=") for t in settings if t.startswith("reg."))]


def run_row(f: np.ndarray, code: str, adjoint: bool, backends: dict[str, GPUBackend], rounds: int, reps: int,
            emit, select, registers: dict[str, dict[str, int]]) -> None:
    """Time one row's variants (each an operator on ``f`` of its own backend), alternated ``rounds`` times;
    ``select(variant)`` picks the revision of the ``--source`` file and the register targets that kernels are built with;
    ``registers[variant]`` holds the registers of each kernel built for it."""
    variants = list(backends)
    first = backends[variants[0]]
    Nd, Nm, Nt = f.shape
    x = first.asarray(np.random.default_rng([7, 1]).standard_normal((Nd if adjoint else Nm, Nt)))
    kw = dict(adjoint_precision=code) if adjoint else dict(precision=code)
    ops = {v: (select(v), BTTOperator(f, device=be, **kw))[1] for v, be in backends.items()}

    def applier(v: str, op: BTTOperator):
        apply = op.rmatvec if adjoint else op.matvec
        return lambda x: (select(v), apply(x))[1]

    applies = {v: applier(v, op) for v, op in ops.items()}
    ref = applies[variants[0]](x)
    rel_diff = {v: float(abs(applies[v](x) - ref).max() / abs(ref).max()) for v in variants}
    for v in variants:
        if rel_diff[v] > 1e-5:  # a set-up that changes the summation order differs in the last bits
            raise SystemExit(f"{code} {'F^T d' if adjoint else 'F m'}: {v} differs from {variants[0]} "
                             f"by {rel_diff[v]:.2e}")
    op = ops[variants[0]]
    fhat = op.engine.Fhat[(op.adjoint_precision if adjoint else op.precision).sbgemv]
    floor = fhat.nbytes / first.copy_bandwidth(nbytes=int(max(fhat.nbytes, 256 << 20)))
    for rnd in range(rounds):
        for v in variants:
            apply, sync = applies[v], backends[v].synchronize
            for _ in range(3):  # warm: recorded, replayed
                apply(x)
            t_w = _median_time(lambda: apply(x), reps, sync)
            t_b = _back_to_back_time(lambda: apply(x), reps, sync)
            emit(Nm=Nm, Nd=Nd, Nt=Nt, precision=code, adjoint=adjoint, variant=v, round=rnd,
                 waited_us=round(t_w * 1e6, 2), back_to_back_us=round(t_b * 1e6, 2), floor_us=round(floor * 1e6, 2),
                 waited_x_floor=round(t_w / floor, 4), back_to_back_x_floor=round(t_b / floor, 4),
                 rel_diff=rel_diff[v], registers=registers[v], device=first.device_name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", default="plain,pdl")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-N", type=int, default=200)
    ap.add_argument("--big", action="store_true", help="the big size's one-vector rows too")
    ap.add_argument("--rows", default=",".join(f"{c}{'-adj' if a else ''}" for c, a in ROWS),
                    help="the rows to time, e.g. ddddd-adj,ddssd-adj (CODE for F m, CODE-adj for F^T d)")
    ap.add_argument("--source", default="sbgemv.cu", help="the file of native/ that @REV variants take")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rows = [(r.removesuffix("-adj"), r.endswith("-adj")) for r in args.rows.split(",")]
    backends = {v: backend(v) for v in args.variants.split(",")}
    select_rev = use_revisions(args.source, sorted({v.partition("@")[2] for v in backends} - {""}))
    targets = {"now": []}
    use_register_targets(lambda: targets["now"])
    registers = {v: {} for v in backends}  # the kernels each variant's products were built with
    active = {"variant": None}
    build = kernels.kernel

    def kernel_noted(fname: str, name: str, *targs, **kw):
        fn = build(fname, name, *targs, **kw)
        if active["variant"] is not None:
            registers[active["variant"]][kernels.name_expression(name, *targs)] = int(fn.num_regs)
        return fn

    kernels.kernel = kernel_noted

    def select(variant: str) -> None:
        select_rev(variant.partition("@")[2] or "tree")
        targets["now"] = register_targets(variant)
        active["variant"] = variant

    command = "python benchmarks/launch_ab.py " + " ".join(sys.argv[1:])
    with open(args.out, "a") as out:

        def emit(**row) -> None:
            line = json.dumps(dict(row, command=command))
            print(line, flush=True)
            out.write(line + "\n")

        for Nm, Nd, Nt in [MID] + ([BIG] if args.big else []):
            f = random_slab(7, Nd, Nm, Nt, (0, Nd), (0, Nm))
            for code, adjoint in rows:
                run_row(f, code, adjoint, backends, args.rounds, args.N, emit, select, registers)


if __name__ == "__main__":
    main()
