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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..config import load
    from ..inversion.driver import run_inversion
    from ..operator import BTTOperator

    cfg = load(args.config)
    device = cfg["grid"]["device"]

    def make_operator(matrix: str, precision: str, tolerance: float):
        return BTTOperator.from_matrix_dir(matrix, precision=precision, device=device)

    def log(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    run_inversion(cfg, make_operator=make_operator, log=log, resume=args.resume)
    return 0
