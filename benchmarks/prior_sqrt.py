"""Time the Matérn prior's square root ``S x`` (two per conjugate gradient
iteration of ``cg-parameter``) on a parameter grid with many time columns:
the prior's DCT-diagonalised solve against a sparse LU solve of the same
``S^{-1} = A`` (SuperLU, how it was solved before stop 61), and their
difference.  One JSON line per grid to ``--out``.

    python benchmarks/prior_sqrt.py --shape 40 75 --Nt 500 --out benchmarks/results/cpu-prior-sqrt-stop61.jsonl
"""

import argparse
import json
import os
import platform

import numpy as np
from fft_libraries import median_ms
from scipy.sparse.linalg import splu

from fftmatvec.inversion.prior import MaternPrior


def emit(row: dict, out: str | None) -> None:
    """Print ``row`` as one JSON line, and append it to ``out`` if given."""
    print(json.dumps(row))
    if out:
        with open(out, "a") as fh:
            fh.write(json.dumps(row) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=int, nargs="+", default=[40, 75], help="parameter grid (nx [ny])")
    ap.add_argument("--Nt", type=int, default=500, help="time columns")
    ap.add_argument("--spacing", type=float, default=5e3)
    ap.add_argument("--corr-length", type=float, default=30e3)
    ap.add_argument("-N", "--reps", type=int, default=10)
    ap.add_argument("--out", help="append the JSON line to this file")
    args = ap.parse_args()
    prior = MaternPrior(args.shape, args.Nt, std=0.005, corr_length=args.corr_length, spacing=args.spacing)
    x = np.random.default_rng(0).standard_normal(prior.dims)
    lu = splu(prior.space.A.tocsc())
    dct = prior.sqrt(x)
    ref = lu.solve(x)
    row = {
        "what": "prior-sqrt", "shape": args.shape, "Nt": args.Nt, "machine": platform.node(),
        "cpus": os.cpu_count(),
        "dct_s": median_ms(lambda: prior.sqrt(x), args.reps) / 1e3,
        "splu_solve_s": median_ms(lambda: lu.solve(x), args.reps) / 1e3,
        "rel_difference": float(np.linalg.norm(dct - ref) / np.linalg.norm(ref)),
    }
    emit(row, args.out)


if __name__ == "__main__":
    main()
