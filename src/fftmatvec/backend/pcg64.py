"""NumPy's PCG64 stream drawn on the GPU (``native/random.cu``).

:func:`device_uniforms` returns on the device the doubles that
``numpy.random.Generator(bits).random(n)`` would return after ``offset``
draws, bit for bit, with no host work but a few 128-bit constants: the
random vectors of the set-up and of the low-rank posterior (165 million at
rank 100 in the 2-D example) need no host draws and no upload
(:func:`fftmatvec.conditioning.gaussian_rows`).  :func:`jump` is the
arithmetic of ``PCG64.advance`` that the kernel repeats.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: PCG's 128-bit multiplier (PCG_DEFAULT_MULTIPLIER_128 in NumPy's pcg64.h).
MULT = 0x2360ED051FC65DA44385DF649FCCF645
_MASK128 = (1 << 128) - 1
_MASK64 = (1 << 64) - 1
_THREADS = 256
_DRAWS_PER_THREAD = 16  # at least: each thread's jump to its first draw costs up to 128 multiply-adds


def jump(delta: int, inc: int) -> tuple[int, int]:
    """``(mult, plus)`` with the state ``delta`` steps after ``s`` equal to
    ``mult * s + plus`` (mod 2^128), for the increment ``inc``
    (square and multiply over the bits of ``delta``, as ``PCG64.advance``)."""
    acc_mult, acc_plus, cur_mult, cur_plus = 1, 0, MULT, inc
    while delta:
        if delta & 1:
            acc_mult, acc_plus = acc_mult * cur_mult & _MASK128, (acc_plus * cur_mult + cur_plus) & _MASK128
        cur_plus = (cur_mult + 1) * cur_plus & _MASK128
        cur_mult = cur_mult * cur_mult & _MASK128
        delta >>= 1
    return acc_mult, acc_plus


def _halves(value: int) -> tuple[np.uint64, np.uint64]:
    """A 128-bit integer as its high and low 64-bit kernel arguments."""
    return np.uint64(value >> 64), np.uint64(value & _MASK64)


def device_uniforms(bits: np.random.PCG64, offset: int, n: int) -> Any:
    """``Generator(bits).random(offset + n)[offset:]`` computed on the current
    GPU, without advancing ``bits``.

    Parameters
    ----------
    bits : numpy.random.PCG64
        The stream, at the state its draws are counted from.
    offset, n : int
        The first draw and how many.

    Returns
    -------
    (n,) float64 CuPy array in [0, 1)
    """
    import cupy

    from . import kernels

    out = cupy.empty(n)
    if n == 0:
        return out
    state = bits.state["state"]
    blocks = min(-(-n // (_THREADS * _DRAWS_PER_THREAD)),
                 8 * cupy.cuda.Device().attributes["MultiProcessorCount"])
    mult, plus = jump(blocks * _THREADS, state["inc"])
    fn = kernels.kernel("random.cu", "pcg64_uniforms")
    fn((blocks,), (_THREADS,), (out, np.int64(n), np.uint64(offset), *_halves(state["state"]),
                                *_halves(state["inc"]), *_halves(mult), *_halves(plus)))
    return out


__all__ = ["MULT", "jump", "device_uniforms"]
