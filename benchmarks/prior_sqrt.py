"""Time the Matérn prior's square root ``S x`` (two per conjugate gradient
iteration of ``cg-parameter``) on a parameter grid with many time columns:
the prior's DCT-diagonalised solve, on the host or (``--device gpu``) with
the vectors on the GPU, with its short axes transformed by DCT-matrix
products (``dct_s``, since stop 62) and with every axis by the FFT-based
transform (``fft_dct_s``, a ``DENSE_DCT_MAX`` of 0), against a sparse LU solve of
the same ``S^{-1} = A`` on the host (SuperLU, how it was solved before stop
61), and their difference.  On the GPU also the host's and the device's time
of one ``dct_s`` call apart (``dct_host_s``, ``dct_device_s``: the call
queued behind a spinning kernel).  One JSON line per grid to ``--out``.

    python benchmarks/prior_sqrt.py --shape 40 75 --Nt 500 --out benchmarks/results/cpu-prior-sqrt-stop61.jsonl
"""

import argparse
import json
import os
import platform
import time

import numpy as np
import scipy.sparse as sp
from fft_libraries import median_ms
from scipy.sparse.linalg import splu

from fftmatvec.backend import arrays, get_backend
from fftmatvec.backend.arrays import to_host
from fftmatvec.inversion.prior import MaternPrior


def neumann_laplacian(n: int, h: float) -> sp.csr_matrix:
    """Second differences with zero-flux ends, spacing ``h``: the matrix the prior's DCT diagonalises."""
    main = np.full(n, -2.0)
    main[[0, -1]] += 1.0
    return sp.diags([np.ones(n - 1), main, np.ones(n - 1)], [-1, 0, 1]) / h**2


def sparse_inverse_sqrt(prior: MaternPrior, spacing: float) -> sp.csc_matrix:
    """``S^{-1} = delta I - gamma L`` of the prior's spatial factor, ``L`` the grid's sparse Laplacian."""
    laplacians = [neumann_laplacian(n, spacing) for n in prior.shape]
    L = laplacians[0] if len(laplacians) == 1 else (sp.kron(laplacians[0], sp.eye(prior.shape[1]))
                                                    + sp.kron(sp.eye(prior.shape[0]), laplacians[1]))
    return (prior.delta * sp.eye(prior.dims[0]) - prior.gamma * L).tocsc()


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
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="where the prior's vectors live")
    ap.add_argument("--dense-max", type=int,
                    help="longest axis transformed by the DCT matrix in dct_s (default: the library's for the device)")
    ap.add_argument("--out", help="append the JSON line to this file")
    args = ap.parse_args()
    backend = get_backend(args.device)
    prior = MaternPrior(args.shape, args.Nt, std=0.005, corr_length=args.corr_length, spacing=args.spacing,
                        xp=backend.xp)
    x = np.random.default_rng(0).standard_normal(prior.dims)
    x_device = backend.xp.asarray(x)
    lu = splu(sparse_inverse_sqrt(prior, args.spacing))
    ref = lu.solve(x)

    module = backend.xp.__name__

    def sqrt_seconds(dense_max: int) -> float:
        arrays.DENSE_DCT_MAX[module] = dense_max
        start = time.perf_counter()
        prior.sqrt(x_device)
        backend.synchronize()
        return time.perf_counter() - start

    default = arrays.DENSE_DCT_MAX[module]
    dense_max = default if args.dense_max is None else args.dense_max
    sqrt_seconds(0)
    fft_dct = to_host(prior.sqrt(x_device))
    times = {m: [] for m in (dense_max, 0)}
    for _ in range(args.reps):  # in turns, so that both see the same machine
        for m in times:
            times[m].append(sqrt_seconds(m))
    arrays.DENSE_DCT_MAX[module] = dense_max
    dct = to_host(prior.sqrt(x_device))
    arrays.DENSE_DCT_MAX[module] = default
    dct_s, fft_dct_s = (float(np.median(times[m])) for m in (dense_max, 0))
    row = {
        "what": "prior-sqrt", "shape": args.shape, "Nt": args.Nt, "machine": platform.node(),
        "cpus": os.cpu_count(), "device": args.device, "dense_dct_max": dense_max,
        "dct_s": dct_s, "fft_dct_s": fft_dct_s,
        "dct_vs_fft_dct": float(np.linalg.norm(dct - fft_dct) / np.linalg.norm(fft_dct)),
        "splu_solve_s": median_ms(lambda: lu.solve(x), args.reps) / 1e3,
        "rel_difference": float(np.linalg.norm(dct - ref) / np.linalg.norm(ref)),
    }
    if args.device == "gpu":
        arrays.DENSE_DCT_MAX[module] = dense_max
        row["dct_host_s"], row["dct_device_s"] = host_and_device_seconds(lambda: prior.sqrt(x_device), args.reps)
        arrays.DENSE_DCT_MAX[module] = default
    emit(row, args.out)


def host_and_device_seconds(fn, reps: int, busy_s: float = 0.05) -> tuple[float, float]:
    """Medians of one call's host time and device time, apart: the calls are
    queued behind a kernel that spins ``busy_s``, so the host's launches do
    not wait for the device, and events around each call then time its
    device work alone (no gaps from launches)."""
    import cupy as cp

    spin = cp.RawKernel(r"""extern "C" __global__ void spin(long long cycles) {
        const long long t0 = clock64();
        while (clock64() - t0 < cycles) {}
    }""", "spin")
    cycles = np.int64(busy_s * cp.cuda.Device().attributes["ClockRate"] * 1e3)
    fn()
    host, device = [], []
    for _ in range(reps):
        spin((1,), (1,), (cycles,))
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        t0 = time.perf_counter()
        fn()
        host.append(time.perf_counter() - t0)
        end.record()
        if start.done:
            raise RuntimeError("the spin ended before the call was queued: raise busy_s")
        end.synchronize()
        device.append(cp.cuda.get_elapsed_time(start, end) * 1e-3)
    return float(np.median(host)), float(np.median(device))


if __name__ == "__main__":
    main()
