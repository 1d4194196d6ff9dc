"""Run the fused transforms (native/fft.cu) a few times at one size, for a
profiler (``ncu --kernel-name regex:rfft_pad python3 benchmarks/fused_fft_run.py``).

Usage: python benchmarks/fused_fft_run.py N NT K REAL [REPEATS]
"""

import sys

import cupy as cp
import numpy as np

from fftmatvec.backend.gpu import GPUBackend


def main(n: int, nt: int, K: int, real: str, repeats: int = 5) -> None:
    be = GPUBackend()
    real = np.dtype(real)
    x = cp.random.standard_normal((n, nt, K)).astype(real)
    xh = cp.empty((nt + 1, n, K), np.result_type(real, np.complex64))
    y = cp.empty((n, nt, K), real)
    for _ in range(repeats):
        be.pad_rfft(x, xh)
        be.irfft_unpad(xh, y, real)
    be.synchronize()
    print("relative round-trip error", float(cp.linalg.norm(y - x) / cp.linalg.norm(x)))


if __name__ == "__main__":
    a = sys.argv[1:]
    main(int(a[0]), int(a[1]), int(a[2]), a[3], int(a[4]) if len(a) > 4 else 5)
