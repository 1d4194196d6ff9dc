"""Geometry of the fused transforms (``native/fft.cu``): the radices of a
length, the twiddles of its passes in the order the kernels read them, how a
block's series lie in shared memory and how many threads take a pass.

Pure NumPy, so that these rules, which the kernels repeat, are tested without
a GPU (tests/unit/test_fused_layout.py).
"""

from __future__ import annotations

import numpy as np

#: The radices native/fft.cu has butterflies for (``fmv::Dft``).
FFT_BUTTERFLIES = frozenset({2, 3, 4, 5, 7, 8, 10})


def fft_radices(M: int) -> list[int] | None:
    """Radices of the fused transform's complex FFT of length ``M`` (the
    real length is ``2 M``): a 10 for each pair of factors 2 and 5 (one pass
    instead of two: every pass reads and writes the series in shared memory
    once), the other powers of two in 8s, then 4 and 2, and the odd primes
    3, 5 and 7, applied smallest first (the first pass stores with a stride
    of the radix, so small first means fewer shared-memory bank conflicts);
    None when ``M`` has a prime factor above 7 (cuFFT then)."""
    radices = []
    while M % 10 == 0:
        radices.append(10)
        M //= 10
    for r in (8, 4, 2, 5, 3, 7):
        while M % r == 0:
            radices.append(r)
            M //= r
    return sorted(radices) if M == 1 else None


def pass_twiddles(radices: list[int]) -> np.ndarray:
    """The Stockham passes' twiddles in float64, in the order native/fft.cu
    reads them: pass by pass (``NS`` the product of the earlier radices, ``R``
    the pass's radix), ``exp(-2 pi i k r / (NS R))`` for ``k < NS`` and
    ``1 <= r < R``, ``k`` fastest (``M - 1`` values; one unused value for ``M = 1``)."""
    parts = [np.ones(1, np.complex128)] if not radices else []
    NS = 1
    for R in radices:
        r, k = np.arange(1, R)[:, None], np.arange(NS)[None, :]
        parts.append(np.exp(-2j * np.pi * k * r / (NS * R)).ravel())
        NS *= R
    return np.concatenate(parts)


def fused_row_stride(M: int, S: int, itemsize: int) -> int:
    """Row stride (elements) of a series in the fused transforms' shared
    memory, the rule of ``Row`` in native/fft.cu: ``M + 1``, padded for
    ``1 < S < P`` (``P = 128 / itemsize``, lanes per shared-memory wavefront)
    to ``ld % P == P / S``, so that the S series met by one warp access
    start in distinct banks."""
    P = 128 // itemsize
    return M + 1 if S == 1 or S >= P else M + 1 + (P // S - (M + 1)) % P


def fused_in_place(M: int, S: int, threads: int, radices: list[int]) -> bool:
    """Whether a fused transform may run its passes in one shared-memory buffer
    (the rule of ``InPlace`` in native/fft.cu): every pass has at most one
    butterfly per thread, which reads its values before any are written."""
    return all(S * (M // R) <= threads for R in radices)


def pass_threads(M: int, S: int, radices: list[int]) -> int:
    """The fewest threads, a multiple of 32, that take every pass's
    butterflies over ``S`` series of a fused transform of length ``2 M`` at
    once (one butterfly a thread, as :func:`fused_in_place` asks)."""
    return 32 * -(-max([S * (M // R) for R in radices] + [S]) // 32)


__all__ = ["FFT_BUTTERFLIES", "fft_radices", "fused_in_place", "fused_row_stride", "pass_threads", "pass_twiddles"]
