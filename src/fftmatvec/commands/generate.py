"""``fftmatvec generate CONFIG.toml``: build the tsunami-style model and write its files."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "generate",
        help="write the p2o/p2q maps, true parameter and synthetic data of the [model] table",
        description="Writes p2o/, p2q/ (matrix directories), m_true.h5, d_true.h5, d_obs.h5, "
        "q_true.h5 and model.json into [generate] dir (or --out).",
    )
    p.add_argument("config", metavar="CONFIG.toml")
    p.add_argument("--out", metavar="DIR", help="output folder (default: [generate] dir of the config)")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import time

    from ..config import GENERATE, load
    from ..models import generate

    cfg = load(args.config, require=GENERATE)
    out = args.out or cfg["generate"]["dir"]
    t0 = time.perf_counter()
    paths = generate(cfg["model"], out)
    if not args.quiet:
        print(f"generated the model in {time.perf_counter() - t0:.1f} s:")
        for name, path in paths.items():
            print(f"  {name:<7} {path}")
    return 0
