"""``fftmatvec bench``: time one product on random data against the bandwidth floor."""

from __future__ import annotations

import argparse
import json

from .matvec import add_grid_options


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmark F m or F^T d on random data")
    p.add_argument("--Nm", type=_positive, required=True, help="parameters (block columns)")
    p.add_argument("--Nd", type=_positive, required=True, help="sensors (block rows)")
    p.add_argument("--Nt", type=_positive, required=True, help="time steps")
    p.add_argument("--nrhs", type=_positive, default=1, metavar="K", help="right-hand sides at once (default 1)")
    p.add_argument("--precision", default="ddddd", metavar="CODE", help="five-letter stage precision code")
    p.add_argument("--adjoint", action="store_true", help="time F^T d instead of F m")
    p.add_argument("-N", "--reps", type=_positive, default=10, help="timed repetitions (median reported)")
    p.add_argument("--check", action="store_true", help="relative error against a float64 dense or FFT reference")
    p.add_argument("--compare-naive", action="store_true", help="also time the naive pipeline (and dense F where it fits)")
    add_grid_options(p)
    p.add_argument("--seed", type=int, default=0, help="random seed of the data")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    p.set_defaults(func=run)


def _report(r: dict) -> None:
    op = "F^T d" if r["adjoint"] else "F m"
    print(f"{op}  Nm={r['Nm']} Nd={r['Nd']} Nt={r['Nt']} K={r['nrhs']}  precision={r['precision']}  "
          f"device={r['device']}  grid={r['grid']} ({r['ranks']} ranks; times of the slowest rank)")
    print(f"  time per product  {r['time_s'] * 1e3:10.3f} ms  ({r['time_per_vector_s'] * 1e3:.3f} ms per vector)")
    for name, t in r["stages"].items():
        print(f"    {name:<8}        {t * 1e3:10.3f} ms")
    print(f"  communication     {r['comm_s'] * 1e3:10.3f} ms")
    print(f"  Fhat              {r['fhat_bytes'] / 1e9:10.3f} GB (largest slab)")
    print(f"  copy bandwidth    {r['copy_bandwidth_Bps'] / 1e9:10.2f} GB/s (read + write)")
    print(f"  floor             {r['floor_s'] * 1e3:10.3f} ms   ratio {r['floor_ratio']:.2f}x")
    print(f"  SBGEMV reads Fhat at {r['sbgemv_bandwidth_ratio']:.2f}x copy bandwidth")
    if "rel_error" in r:
        print(f"  rel. error        {r['rel_error']:10.3e} (vs float64 {r['reference']} reference)")
    if "naive_time_s" in r:
        print(f"  naive             {r['naive_time_s'] * 1e3:10.3f} ms   speed-up {r['speedup_vs_naive']:.2f}x")
    if "dense_time_s" in r:
        print(f"  dense matvec      {r['dense_time_s'] * 1e3:10.3f} ms")


def run(args: argparse.Namespace) -> int:
    from ..bench import BenchConfig, run_bench
    from ..precision import parse

    parse(args.precision)  # reject a bad code before allocating anything
    cfg = BenchConfig(
        Nm=args.Nm, Nd=args.Nd, Nt=args.Nt, nrhs=args.nrhs, precision=args.precision, adjoint=args.adjoint,
        reps=args.reps, check=args.check, compare_naive=args.compare_naive, device=args.device, seed=args.seed,
    )
    from ..grid import ProcessGrid

    grid = ProcessGrid.from_option(None, args.grid, Nd=args.Nd, Nm=args.Nm)
    result = run_bench(cfg, grid)
    _report(result)
    if args.json:
        print(json.dumps(result))
    return 0
