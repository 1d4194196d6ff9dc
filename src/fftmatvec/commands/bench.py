"""``fftmatvec bench``: time one product on random data against the bandwidth floor.

With ``--sweep weak|strong`` it runs every grid of ``--grids`` that fits in
the launch, one after the other on sub-communicators, and merges one row per
grid into a CSV file (:mod:`fftmatvec.scaling`, docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json

from .matvec import add_grid_options, add_precision_options, check_precision_options


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmark F m, F^T d or F^T F m on random data")
    p.add_argument("--Nm", type=_positive, required=True,
                   help="parameters (block columns); per rank with --sweep weak")
    p.add_argument("--Nd", type=_positive, required=True, help="sensors (block rows)")
    p.add_argument("--Nt", type=_positive, required=True, help="time steps")
    p.add_argument("--nrhs", type=_positive, default=1, metavar="K", help="right-hand sides at once (default 1)")
    add_precision_options(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--adjoint", action="store_true", help="time F^T d instead of F m")
    which.add_argument("--normal", action="store_true",
                       help="time F^T F m, the product of a conjugate gradient iteration (F, then F^T)")
    p.add_argument("-N", "--reps", type=_positive, default=10, help="timed repetitions (median reported)")
    p.add_argument("--warmup", type=_seconds, default=0.0, metavar="SECONDS",
                   help="run products back to back this long before timing any, for the sustained rate: an "
                   "H200's power limit slows products with many right-hand sides after a fraction of a second "
                   "(docs/gpu.md; default 0)")
    p.add_argument("--check", action="store_true", help="relative error against a float64 dense or FFT reference")
    p.add_argument("--compare-naive", action="store_true",
                   help="also time the naive pipeline (and dense F where it fits)")
    add_grid_options(p)
    p.add_argument("--seed", type=int, default=0, help="random seed of the data")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    s = p.add_argument_group("scaling sweep (docs/benchmarks.md)")
    s.add_argument("--sweep", choices=("weak", "strong"),
                   help="run each grid of --grids that fits in this launch; weak: --Nm per rank, strong: totals")
    s.add_argument("--grids", metavar="LIST",
                   help="grids of the sweep, e.g. 1x1,1x2,2x1,1x4,2x2 (default: 1 x ranks of this launch); "
                   "grids larger than the launch are skipped")
    s.add_argument("--csv", metavar="FILE",
                   help="merge the sweep's rows into this CSV file (same grid and sizes: replaced)")
    s.add_argument("--plot", metavar="PNG", help="plot time and efficiency against ranks (every row of --csv)")
    p.set_defaults(func=run)


def _report(r: dict) -> None:
    op = "F^T F m" if r["normal"] else "F^T d" if r["adjoint"] else "F m"
    code = f"{r['precision']}/{r['adjoint_precision']}" if r["normal"] else r["precision"]
    print(f"{op}  Nm={r['Nm']} Nd={r['Nd']} Nt={r['Nt']} K={r['nrhs']}  precision={code}  "
          f"device={r['device']}  grid={r['grid']} ({r['ranks']} ranks; times of the slowest rank)")
    if r["warmup_products"]:
        print(f"  warm-up           {r['warmup_products']} products back to back ({r['warmup_s']:g} s) before timing")
    print(f"  time per product  {r['time_s'] * 1e3:10.3f} ms  ({r['time_per_vector_s'] * 1e3:.3f} ms per vector)")
    print(f"  back to back      {r['back_to_back_s'] * 1e3:10.3f} ms per product (no wait between products)")
    if r.get("into_out_s") is not None:
        print(f"  into out=         {r['into_out_s'] * 1e3:10.3f} ms per product (the caller's result array)")
    if r.get("prepared_s") is not None:
        print(f"  prepared          {r['prepared_s'] * 1e3:10.3f} ms per product (BTTOperator.prepare)")
    for name, t in r["stages"].items():
        print(f"    {name:<8}        {t * 1e3:10.3f} ms")
    print(f"  communication     {r['comm_s'] * 1e3:10.3f} ms")
    reads = " read twice" if r["normal"] else ""
    print(f"  Fhat              {r['fhat_bytes'] / 1e9:10.3f} GB (largest slab{reads})")
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
    from ..errors import ConfigError

    check_precision_options(args)
    cfg = BenchConfig(
        Nm=args.Nm, Nd=args.Nd, Nt=args.Nt, nrhs=args.nrhs, precision=args.precision, adjoint=args.adjoint,
        normal=args.normal, adjoint_precision=args.adjoint_precision, reps=args.reps, check=args.check,
        compare_naive=args.compare_naive, device=args.device, seed=args.seed, warmup_s=args.warmup,
    )
    if args.sweep is not None:
        if args.grid is not None:
            raise ConfigError("--grid is for one run; a sweep takes --grids LIST")
        return _sweep(args, cfg)
    if args.grids is not None or args.csv is not None or args.plot is not None:
        raise ConfigError("--grids, --csv and --plot need --sweep weak|strong")
    from ..grid import ProcessGrid

    grid = ProcessGrid.from_option(None, args.grid, Nd=args.Nd, Nm=args.Nm)
    result = run_bench(cfg, grid)
    _report(result)
    if args.json:
        print(json.dumps(result))
    return 0


def _sweep(args: argparse.Namespace, cfg) -> int:
    from ..errors import ConfigError, collective
    from ..mpi import launched, world
    from ..scaling import ROW_KEY, add_efficiency, format_row, parse_grids, plot_scaling, run_sweep, update_csv

    comm = world() if launched() else None
    size = 1 if comm is None else comm.Get_size()
    is_root = comm is None or comm.Get_rank() == 0
    grids = parse_grids(args.grids) if args.grids else [(1, size)]
    ranks = f"{size} rank{'s' if size > 1 else ''}"
    if all(pr * pc > size for pr, pc in grids):
        raise ConfigError(f"--grids {args.grids}: no grid fits in the {ranks} of this launch")
    per = " per rank" if args.sweep == "weak" else ""
    product = "F^T F m" if args.normal else "F^T d" if args.adjoint else "F m"
    code = f"{args.precision}/{args.adjoint_precision or args.precision}" if args.normal else args.precision
    print(f"{args.sweep} scaling sweep of {product} on {ranks}: Nm={args.Nm}{per} Nd={args.Nd} "
          f"Nt={args.Nt} K={args.nrhs} precision={code} device={args.device}; times of the slowest rank",
          flush=True)
    rows, skipped = run_sweep(cfg, args.sweep, grids, comm=comm, log=lambda line: print(line, flush=True))
    if skipped:
        print(f"skipped (more ranks than the {size} of this launch): {', '.join(skipped)}")
    every = rows
    with collective(comm, "writing the sweep results"):  # rank 0 writes, every rank learns the outcome
        if is_root and args.csv:
            every = update_csv(args.csv, rows)
        else:
            add_efficiency(every)
        if is_root and args.plot and every:
            plot_scaling(every, args.plot, title=f"fftmatvec bench --sweep: {args.csv or 'one launch'}")
    ours = {tuple(r[k] for k in ROW_KEY) for r in rows}
    mine = [r for r in every if tuple(r[k] for k in ROW_KEY) in ours]
    print(f"efficiency{f' (series from {args.csv})' if args.csv else ''}:")
    for row in mine:
        print("  " + format_row(row))
    if args.csv:
        print(f"csv: {args.csv} ({len(every)} rows)")
    if args.plot:
        print(f"plot: {args.plot}")
    if args.json:
        clean = [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in mine]
        print(json.dumps({"sweep": args.sweep, "ranks": size, "rows": clean, "skipped": skipped}))
    return 0
