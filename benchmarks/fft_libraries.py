"""Which CPU FFT library is fastest for the operator's transforms?

Times the stage-2 transform (real FFT of a zero-padded, time-major
``(L, n)`` array along axis 0) with ``numpy.fft`` and ``scipy.fft`` (one and
all worker threads), in float64 and float32, and prints medians in ms.

    python benchmarks/fft_libraries.py --Nt 256 --n 1000
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import scipy.fft


def median_ms(fn, reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--Nt", type=int, default=256)
    parser.add_argument("--n", type=int, default=1000, help="series per transform (Nm or Nd)")
    parser.add_argument("-N", "--reps", type=int, default=20)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    L = 2 * args.Nt
    print(f"rfft of ({L}, {args.n}) along axis 0, median of {args.reps} (ms), {cores} cores")
    print(f"{'dtype':<8} {'numpy.fft':>10} {'scipy w=1':>10} {f'scipy w={cores}':>10}")
    for dtype in (np.float64, np.float32):
        x = np.random.default_rng(0).standard_normal((L, args.n)).astype(dtype)
        row = [
            median_ms(lambda: np.fft.rfft(x, axis=0), args.reps),
            median_ms(lambda: scipy.fft.rfft(x, axis=0, workers=1), args.reps),
            median_ms(lambda: scipy.fft.rfft(x, axis=0, workers=cores), args.reps),
        ]
        print(f"{np.dtype(dtype).name:<8} " + " ".join(f"{t:10.3f}" for t in row))


if __name__ == "__main__":
    main()
