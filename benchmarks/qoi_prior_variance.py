"""Time the QoI's prior variance ``diag(Q Gp Q^T)``, the first part of the QoI
band of ``fftmatvec invert``: from ``Nq`` adjoint products for a prior that
acts on each time step alike (``time_invariant_prior_variance``, stop 61),
against one batch of products per ``batch`` QoI entries (``Nq*Nt`` entries,
as ``qoi_forecast`` computes it for other priors).  A Matérn prior on a 2-D
grid and a random ``Q`` on the CPU backend; one JSON line to ``--out``.

    python benchmarks/qoi_prior_variance.py --grid 40 75 --Nq 30 --Nt 100 \\
        --out benchmarks/results/cpu-qoi-prior-variance-stop61.jsonl
"""

import argparse
import platform
import time
from types import SimpleNamespace

import numpy as np
from prior_sqrt import emit

from fftmatvec import BTTOperator
from fftmatvec.inversion.prior import MaternPrior
from fftmatvec.inversion.qoi import qoi_forecast, time_invariant_prior_variance


class _PerEntry:
    """The same prior, taken as one that varies in time: qoi_forecast's loop."""

    time_invariant = False

    def __init__(self, prior):
        self.prior = prior

    def __getattr__(self, name):
        return getattr(self.prior, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", type=int, nargs=2, default=[40, 75])
    ap.add_argument("--Nq", type=int, default=30)
    ap.add_argument("--Nt", type=int, default=100)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--out")
    args = ap.parse_args()
    Nm = args.grid[0] * args.grid[1]
    Q = BTTOperator(np.random.default_rng(0).standard_normal((args.Nq, Nm, args.Nt)))
    prior = MaternPrior(tuple(args.grid), args.Nt, std=0.005, corr_length=30e3, spacing=5e3)
    t0 = time.perf_counter()
    fast = time_invariant_prior_variance(Q, prior, args.batch)
    fast_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    per_entry = qoi_forecast(Q, np.zeros((Nm, args.Nt)), SimpleNamespace(prior=_PerEntry(prior),
                                                                       eigenvalues=np.zeros(0)), batch=args.batch)
    per_entry_s = time.perf_counter() - t0
    row = {"what": "qoi-prior-variance", "grid": args.grid, "Nq": args.Nq, "Nt": args.Nt, "batch": args.batch,
           "machine": platform.node(), "time_invariant_s": fast_s, "per_entry_s": per_entry_s,
           "rel_difference": float(np.linalg.norm(np.sqrt(fast) - per_entry.std) / np.linalg.norm(per_entry.std))}
    emit(row, args.out)


if __name__ == "__main__":
    main()
