"""``fftmatvec precision``: error model, measured Pareto front and the choice of codes.

For a matrix directory or a random operator of given sizes: every one of the
32 precision codes, for ``F m`` and ``F^T d``, with its predicted error bound,
its measured error against all-double and its median time; the Pareto front;
the fastest code meeting ``--tol`` for each direction (docs/precision.md).

Under ``mpiexec``/``srun`` the products are those of the ``--grid``, each rank
holding its slab: the errors include the reductions' and the times their
communication.
"""

from __future__ import annotations

import argparse
import json
import sys

from .matvec import add_grid_options


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "precision",
        help="measure all 32 precision codes; pick the fastest meeting a tolerance",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    p.add_argument("--matrix", metavar="DIR", help="FFTMatvec matrix directory")
    p.add_argument("--Nm", type=_positive, help="parameters of a random operator (with --Nd, --Nt)")
    p.add_argument("--Nd", type=_positive, help="sensors of a random operator")
    p.add_argument("--Nt", type=_positive, help="time steps of a random operator")
    p.add_argument("--cond", type=float, default=1e3,
                   help="condition number of each Fhat[k] of the random operator (default 1e3)")
    p.add_argument("--tol", required=True, metavar="TOL",
                   help="relative error tolerance, e.g. 1e-7 (against all-double)")
    p.add_argument("--require-bound", action="store_true",
                   help="the predicted bound must meet the tolerance too (not only the measured error)")
    p.add_argument("--tie", type=float, default=0.03, metavar="FRAC",
                   help="codes within this relative time of the fastest count as equally fast; "
                        "the most accurate of them is chosen (default 0.03)")
    add_grid_options(p)
    p.add_argument("--probes", type=_positive, default=3, help="random probe vectors per direction (default 3)")
    p.add_argument("--repeats", type=_positive, default=7, help="timed products per code (median, default 7)")
    p.add_argument("--svd", choices=("auto", "exact", "estimate"), default="auto",
                   help="singular values of Fhat: every frequency, sampled + power iteration, or by size")
    p.add_argument("--seed", type=int, default=0, help="seed of the random operator and the probes")
    p.add_argument("--plot", metavar="PNG", help="save the time-versus-error plot with the Pareto front")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object as the last stdout line (the table then goes to stderr)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from ..errors import ConfigError
    from ..grid import ProcessGrid
    from ..operator import BTTOperator
    from ..precision import validate_tolerance
    from ..tuning import synthetic_matrix

    try:
        tol = validate_tolerance(float(args.tol))
    except ValueError:
        raise ConfigError(f"--tol must be a number in (0, 1), got {args.tol!r}") from None
    sizes = (args.Nm, args.Nd, args.Nt)
    if args.matrix is not None and any(v is not None for v in sizes):
        raise ConfigError("give either --matrix DIR or --Nm/--Nd/--Nt, not both")
    if args.matrix is None and any(v is None for v in sizes):
        raise ConfigError("give --matrix DIR, or all of --Nm, --Nd and --Nt for a random operator")
    exact = {"auto": None, "exact": True, "estimate": False}[args.svd]
    auto = dict(precision="auto", tolerance=tol, device=args.device,
                auto_options=dict(probes=args.probes, repeats=args.repeats, seed=args.seed, exact=exact,
                                  require_bound=args.require_bound, tie=args.tie, time_all=True))
    if args.matrix is not None:
        from ..io import read_meta

        meta = read_meta(args.matrix)
        grid = ProcessGrid.from_option(None, args.grid, Nd=meta.Nd, Nm=meta.Nm)
        op = BTTOperator.from_matrix_dir(args.matrix, grid=grid, **auto)  # each rank reads its slab
        source = f"matrix {args.matrix}"
    else:
        if not (np.isfinite(args.cond) and args.cond >= 1):
            raise ConfigError(f"--cond must be a number >= 1, got {args.cond}")
        grid = ProcessGrid.from_option(None, args.grid, Nd=args.Nd, Nm=args.Nm)
        f = synthetic_matrix(args.Nd, args.Nm, args.Nt, cond=args.cond, seed=args.seed)  # each rank keeps its slab
        op = BTTOperator(f, grid=grid, **auto)
        source = f"random operator (synthetic_matrix, cond {args.cond:g}, seed {args.seed})"
    result = op.tuning
    if grid.rank == 0:
        out = sys.stderr if args.json else sys.stdout
        print(source, file=out)
        print(result.format(), file=out)
        if args.plot:
            print(f"plot: {result.plot(args.plot)}", file=out)
        if args.json:
            print(json.dumps(result.to_dict()))
    return 0
