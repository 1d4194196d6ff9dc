"""``F^T F m`` through :meth:`BTTOperator.normal` (a forward product, then an adjoint one, as each CG iteration
on the normal equations runs them), with the forward's spectra dropped from the L2 after the product or kept
there (``GPUTransforms.fwd_release_min_bytes``), in one process, the two taking turns in rounds.

    python benchmarks/normal_ab.py --out benchmarks/results/h200-normal-ab.jsonl

Each line: the median of ``-N`` products waited for, and the time per product of ``-N`` queued back to back.
The two operators' results are compared bit for bit first.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--Nm", type=int, default=5000)
    ap.add_argument("--Nd", type=int, default=100)
    ap.add_argument("--Nt", type=int, default=1000)
    ap.add_argument("--precision", default="dssdd")
    ap.add_argument("--adjoint-precision", default="ddssd")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-N", type=int, default=30)
    args = ap.parse_args()

    import cupy as cp

    from fftmatvec import BTTOperator
    from fftmatvec.backend.gpu import GPUBackend
    from fftmatvec.bench import random_slab

    f = random_slab(7, args.Nd, args.Nm, args.Nt, (0, args.Nd), (0, args.Nm))
    ops = {}
    for spectra in ("dropped", "kept"):  # dropped: the backend's default
        be = GPUBackend()
        if spectra == "kept":
            be.fwd_release_min_bytes = 1 << 62
        ops[spectra] = BTTOperator(f, device=be, precision=args.precision, adjoint_precision=args.adjoint_precision)
    m = cp.asarray(np.random.default_rng([7, 1]).standard_normal((args.Nm, args.Nt)))
    results = [op.normal(m) for op in ops.values()]
    if not cp.array_equal(results[0], results[1]):
        raise SystemExit("the two operators' F^T F m differ")
    sync = cp.cuda.Device().synchronize
    command = "python benchmarks/normal_ab.py " + " ".join(sys.argv[1:])
    with open(args.out, "a") as out:
        for rnd in range(args.rounds):
            for spectra, op in ops.items():
                waited = []
                for _ in range(args.N):
                    t0 = time.perf_counter()
                    op.normal(m)
                    sync()
                    waited.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                for _ in range(args.N):
                    op.normal(m)
                sync()
                line = json.dumps(dict(
                    Nm=args.Nm, Nd=args.Nd, Nt=args.Nt, precision=args.precision,
                    adjoint_precision=args.adjoint_precision, round=rnd, spectra=spectra,
                    waited_us=round(1e6 * float(np.median(waited)), 1),
                    back_to_back_us=round(1e6 * (time.perf_counter() - t0) / args.N, 1),
                    device=op.backend.device_name, command=command))
                print(line, flush=True)
                out.write(line + "\n")


if __name__ == "__main__":
    main()
