"""Set-up time of an operator with ``precision="auto"``: ``Fhat`` and the measurement of the 32 codes.

Builds ``BTTOperator(f, precision="auto", tolerance=TOL)`` on a random operator
(``tuning.synthetic_matrix``), or with ``--matrix DIR`` from a matrix folder
(``BTTOperator.from_matrix_dir``: reading and checking the files counts),
``--rounds`` times and prints one JSON line per
round: the whole set-up, the calls of ``Backend.fft_matrix`` (the transforms of
``f``, counted and timed by wrapping it), ``Backend.fft_matrices`` (the
transform and the copy rounded from it) and the chosen codes.  Uses
only ``BTTOperator``'s public arguments, so the same script times another
revision's ``src/`` (``PYTHONPATH=OTHER/src``).

    python benchmarks/auto_setup.py --Nm 3000 --Nd 80 --Nt 500 --device cpu --rounds 3 [--profile 30]
    python benchmarks/auto_setup.py --matrix out/tsunami-2d/model/p2o --device gpu --rounds 3
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--Nm", type=int, default=3000)
    p.add_argument("--Nd", type=int, default=80)
    p.add_argument("--Nt", type=int, default=500)
    p.add_argument("--matrix", metavar="DIR", help="build from this matrix folder (sizes from its files)")
    p.add_argument("--tol", type=float, default=1e-7)
    p.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--label", default="", help="written into each line (e.g. the revision)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="also print cProfile's N most expensive calls (cumulative) of each round to stderr")
    args = p.parse_args()

    from fftmatvec import BTTOperator
    from fftmatvec.backend import get_backend
    from fftmatvec.tuning import synthetic_matrix

    be = get_backend(args.device)
    spent = {"transform_s": 0.0, "transforms": 0, "fft_matrices_s": 0.0}

    def timed(fn, seconds, calls=None):
        def wrapper(*a, **k):
            be.synchronize()
            t0 = time.perf_counter()
            out = fn(*a, **k)
            be.synchronize()
            spent[seconds] += time.perf_counter() - t0
            if calls:
                spent[calls] += 1
            return out
        return wrapper

    # this instance only: get_backend returns it to the operator
    be.fft_matrix = timed(be.fft_matrix, "transform_s", "transforms")
    be.fft_matrices = timed(be.fft_matrices, "fft_matrices_s")  # the transform and the rounded copy
    if args.matrix:
        def build():
            return BTTOperator.from_matrix_dir(args.matrix, precision="auto", tolerance=args.tol, device=be)
    else:
        f = synthetic_matrix(args.Nd, args.Nm, args.Nt, cond=1e3, seed=0)

        def build():
            return BTTOperator(f, precision="auto", tolerance=args.tol, device=be)
    BTTOperator(np.ones((2, 3, 4)), device=be)  # imports: not counted
    for r in range(args.rounds):
        spent.update(transform_s=0.0, transforms=0, fft_matrices_s=0.0)
        profile = cProfile.Profile() if args.profile else None
        be.synchronize()
        t0 = time.perf_counter()
        if profile:
            profile.enable()
        op = build()
        be.synchronize()
        total = time.perf_counter() - t0
        if profile:
            profile.disable()
            pstats.Stats(profile, stream=sys.stderr).sort_stats("cumulative").print_stats(args.profile)
        print(json.dumps({"label": args.label, "round": r, "matrix": args.matrix,
                          "Nm": op.Nm, "Nd": op.Nd, "Nt": op.Nt, "device": args.device, "setup_s": round(total, 3),
                          "transform_s": round(spent["transform_s"], 3), "fft_matrix_calls": spent["transforms"],
                          "fft_matrices_s": round(spent["fft_matrices_s"], 3),
                          "forward": op.precision.code, "adjoint": op.adjoint_precision.code,
                          "fhat_bytes": int(sum(np.prod(a.shape) * a.itemsize for a in op.engine.Fhat.values()))}),
              flush=True)


if __name__ == "__main__":
    main()
