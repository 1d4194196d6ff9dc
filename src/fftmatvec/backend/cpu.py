"""NumPy/SciPy backend: pocketfft through ``scipy.fft`` with worker threads,
the per-frequency products as batched BLAS ``matmul`` on contiguous data."""

from __future__ import annotations

import os
import time

import numpy as np
import scipy.fft

from .base import Array, Backend, StageTimer
from .threads import cores_per_rank, map_slices

#: Smallest copy :meth:`CPUBackend.copy_into` splits over threads (below it
#: the threads cost more than they save).
THREADED_COPY_BYTES = 64 << 20


class CPUBackend(Backend):
    """The embedded default.

    Parameters
    ----------
    workers : int, optional
        Threads for ``scipy.fft`` and BLAS; default :func:`cores_per_rank`.
        (SciPy's pocketfft with workers was measured faster here than
        ``numpy.fft``, which also computes float32 transforms in float64;
        see docs/benchmarks.md.)
    """

    name = "cpu"
    xp = np

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or cores_per_rank()
        if self.workers < len(os.sched_getaffinity(0)):
            # ranks share this process's cores: keep BLAS to our share too
            from threadpoolctl import threadpool_limits

            threadpool_limits(self.workers, user_api="blas")
        self._scratch: dict[tuple[tuple[int, ...], np.dtype, str], np.ndarray] = {}

    def copy_into(self, a: Array, out: Array) -> None:
        """As the base class; arrays of :data:`THREADED_COPY_BYTES` or more are
        copied one slice of the first axis a thread (the rounding of
        ``Fhat``'s complex128 copy to complex64 at set-up)."""
        a = a.reshape(out.shape)
        if out.nbytes < THREADED_COPY_BYTES or out.ndim == 0:
            out[...] = a
        else:
            map_slices(lambda rows: np.copyto(out[rows], a[rows], casting="unsafe"), out.shape[0], self.workers)

    def to_host(self, a: Array) -> np.ndarray:
        return np.asarray(a)

    def _cast(self, a: np.ndarray, dtype: np.dtype, tag: str) -> np.ndarray:
        if a.dtype == dtype:
            return a
        buf = self.scratch(a.shape, dtype, tag)
        buf[...] = a
        return buf

    def rfft(self, x_pad: Array, out: Array) -> None:
        out[...] = scipy.fft.rfft(x_pad, axis=0, workers=self.workers)

    def sbgemv(self, Fhat: Array, x_hat: Array, out: Array, adjoint: bool) -> None:
        if not adjoint:
            np.matmul(Fhat, self._cast(x_hat, Fhat.dtype, "sbgemv-in"), out=out)
            return
        # Fhat[k]^H x = conj(Fhat[k]^T conj(x)): the transposed view reaches
        # BLAS as a transpose flag, so Fhat is read in place, never copied.
        x_conj = self.scratch(x_hat.shape, Fhat.dtype, "sbgemv-adj-in")
        np.conjugate(x_hat, out=x_conj)
        np.matmul(Fhat.transpose(0, 2, 1), x_conj, out=out)
        np.conjugate(out, out=out)

    def irfft(self, x_hat: Array, out: Array) -> None:
        x_hat = self._cast(x_hat, np.result_type(out.dtype, np.complex64), "irfft-in")
        out[...] = scipy.fft.irfft(x_hat, n=out.shape[0], axis=0, workers=self.workers)

    def naive_matvec(self, Fhat: Array, x: Array, adjoint: bool) -> np.ndarray:
        from ..bench import naive_numpy

        return naive_numpy(Fhat, x, adjoint)

    def copy_bandwidth(self, nbytes: int = 1 << 30, repeats: int = 5) -> float:
        """Best of ``repeats`` copies (after one that faults the pages in)."""
        src = np.ones(nbytes // 8)
        dst = np.empty_like(src)
        times = []
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            np.copyto(dst, src)
            times.append(time.perf_counter() - t0)
        # the best, not the median: memory bandwidth on a shared host drifts
        # with the neighbours' load, and the floor should be what is achievable
        return 2 * src.nbytes / float(np.min(times[1:]))

    def timer(self) -> StageTimer:
        return StageTimer()
