"""Host cost of the prior's DCT-matrix products on a GPU: ``cupy.matmul``
against :func:`fftmatvec.backend.arrays.matmul_each` (one direct cuBLAS
strided-batched GEMM), for the two axes of a parameter grid with many time
columns.  Each call is timed in a loop of ``-N`` calls, by the host clock up
to the last launch ("host") and up to the device's end ("with sync"); their
results are compared.  One JSON line per form and axis.

    python benchmarks/dct_matmul_host.py --shape 40 75 --Nt 500 --out FILE
"""

import argparse
import platform
import time

import cupy as cp
import numpy as np
from prior_sqrt import emit

from fftmatvec.backend.arrays import dct_matrix, matmul_each


def per_call(fn, reps: int) -> tuple[float, float]:
    """Seconds a call: host time of the loop, and up to the end of its device work."""
    for _ in range(5):
        fn()
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    t1 = time.perf_counter()
    cp.cuda.Device().synchronize()
    return (t1 - t0) / reps, (time.perf_counter() - t0) / reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=int, nargs=2, default=[40, 75], help="parameter grid (nx ny)")
    ap.add_argument("--Nt", type=int, default=500, help="time columns")
    ap.add_argument("-N", "--reps", type=int, default=300)
    ap.add_argument("--out")
    args = ap.parse_args()
    nx, ny = args.shape
    x = cp.asarray(np.random.default_rng(0).standard_normal((nx, ny, args.Nt)))
    # (lead, n, m) of the product along each grid axis, as dctn forms it
    for axis, x3 in ((0, x.reshape(1, nx, -1)), (1, x.reshape(nx, ny, -1))):
        C = dct_matrix(x3.shape[1], cp)
        forms = {"cupy.matmul": lambda: cp.matmul(C, x3), "matmul_each": lambda: matmul_each(C, x3)}
        equal = bool((forms["cupy.matmul"]() == forms["matmul_each"]()).all())
        for form, fn in forms.items():
            host, synced = per_call(fn, args.reps)
            emit({"what": "dct-matmul-host", "machine": platform.node(), "shape": args.shape, "Nt": args.Nt,
                  "axis": axis, "lead_n_m": list(x3.shape), "form": form, "host_s": host, "with_sync_s": synced,
                  "equal": equal}, args.out)


if __name__ == "__main__":
    main()
