"""``fftmatvec invert CONFIG.toml``: the Bayesian inversion, the project's main job."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "invert",
        help="MAP point and QoI forecast with uncertainty from a TOML config",
        description="Writes map.h5, qoi_mean.h5, qoi_std.h5, summary.json and PNG plots into [output] dir. "
        "Run under mpiexec/srun to distribute the operators over the ranks.",
    )
    p.add_argument("config", metavar="CONFIG.toml")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--resume", action="store_true", help="continue CG from the checkpoint in [output] dir")
    p.add_argument("--out", metavar="DIR", help="output folder (default: [output] dir of the config)")
    p.add_argument("--device", choices=("cpu", "gpu", "auto"), help="backend (default: [grid] device of the config)")
    p.add_argument("--grid", metavar="PRxPC",
                   help="process grid, 'PRxPC' or 'auto' (default: [grid] shape of the config)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..config import load
    from ..grid import ProcessGrid
    from ..inversion.driver import run_inversion
    from ..io import read_meta
    from ..operator import BTTOperator
    from ..replicated import ReplicatedOperator

    cfg = load(args.config)
    if args.out is not None:  # command-line overrides, as if written in the config
        from pathlib import Path

        cfg["output"]["dir"] = str(Path(args.out).resolve())
    if args.device is not None:
        cfg["grid"]["device"] = args.device
    if args.grid is not None:
        cfg["grid"]["shape"] = args.grid
    meta = read_meta(cfg["operator"]["matrix"])
    shape = cfg["grid"]["shape"]
    grid = ProcessGrid.from_option(None, shape, Nd=meta.Nd, Nm=meta.Nm)
    is_root = grid.rank == 0

    def make_operator(matrix: str, precision: str, adjoint_precision: str | None,
                      tolerance: float) -> ReplicatedOperator:
        auto = dict(tolerance=tolerance) if "auto" in (precision, adjoint_precision) else {}
        op = BTTOperator.from_matrix_dir(matrix, grid=grid, precision=precision, adjoint_precision=adjoint_precision,
                                         device=cfg["grid"]["device"], **auto)
        return ReplicatedOperator(op)

    def agree(value):
        return value if grid.comm is None else grid.comm.bcast(value, root=0)

    def log(text: str) -> None:
        if is_root and not args.quiet:
            print(text, file=sys.stderr, flush=True)

    run_inversion(cfg, make_operator=make_operator, is_root=is_root, agree=agree, log=log, resume=args.resume)
    return 0
