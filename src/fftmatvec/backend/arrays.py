"""NumPy or CuPy arrays alike, the way ``cupy.get_array_module`` does it.

Code that takes arrays from its caller (the inversion, distributed vectors)
works on them where they are: :func:`array_module` names their module,
:func:`to_host` copies them to NumPy, and :func:`dctn` is the orthonormal
DCT-II on the array's device. CuPy is imported only for CuPy arrays.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np


def array_module(a: Any) -> ModuleType:
    """``cupy`` for a CuPy array, else ``numpy``."""
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def to_host(a: Any) -> np.ndarray:
    """``a`` as a NumPy array (a device-to-host copy for a CuPy array)."""
    return a.get() if array_module(a) is not np else np.asarray(a)


#: Per array module, the longest axis transformed by a product with the dense
#: DCT matrix (one GEMM, batched over the axes before it); longer axes go
#: through the FFT-based transform.  On the development VM's CPU the FFT was
#: faster on lines from 128 points and on grids from 200 x 200; on an H200 the
#: products won on every line and grid tried, up to 2048 points
#: (benchmarks/prior_sqrt.py, docs/inversion.md).
DENSE_DCT_MAX = {"numpy": 256, "cupy": 2048}


@functools.lru_cache(maxsize=None)
def dct_matrix(n: int, xp: ModuleType = np) -> Any:
    """The orthonormal DCT-II matrix ``C`` (n, n) as an array of ``xp``: the
    transform of ``x`` along an axis is ``C @ x``, its inverse ``C^T @ x``."""
    k, j = np.arange(n)[:, None], np.arange(n)[None, :]
    C = np.sqrt(2.0 / n) * np.cos(np.pi * k * (2 * j + 1) / (2 * n))
    C[0] /= np.sqrt(2.0)
    return xp.asarray(C)


_ONE, _ZERO = np.array(1.0), np.array(0.0)  # GEMM's alpha and beta, read through host pointers


def matmul_each(C: Any, x: Any, *, transpose: bool = False) -> Any:
    """``C @ x[b]`` (``C.T @ x[b]`` with ``transpose``) for every ``b``.

    C : (n, n) array; x : (lead, n, m) array of the same module.  Returns a
    new (lead, n, m) array.  For float64 CuPy arrays one cuBLAS strided
    batched GEMM called directly: ``cupy.matmul`` took 90.3 us a call that
    this one makes in 34.5, bound by its host work (40 x 75 x 500 on an H200,
    benchmarks/dct_matmul_host.py, docs/inversion.md).
    """
    xp = array_module(x)
    if xp is np or x.dtype != np.float64 or C.dtype != np.float64:
        return xp.matmul(C.T if transpose else C, x)
    from cupy_backends.cuda.libs import cublas

    x = xp.ascontiguousarray(x)
    C = xp.ascontiguousarray(C)
    lead, n, m = x.shape
    y = xp.empty_like(x)
    if x.size == 0:
        return y
    # Row-major y[b] = C x[b] is column-major y[b]^T = x[b]^T C^T; the column-major view of C is C^T.
    handle = xp.cuda.device.get_cublas_handle()
    cublas.setStream(handle, xp.cuda.get_current_stream().ptr)
    mode = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    try:
        cublas.dgemmStridedBatched(
            handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_T if transpose else cublas.CUBLAS_OP_N, m, n, n,
            _ONE.ctypes.data, x.data.ptr, m, n * m, C.data.ptr, n, 0, _ZERO.ctypes.data, y.data.ptr, m, n * m,
            lead)
    finally:
        cublas.setPointerMode(handle, mode)
    return y


def dctn(x: Any, axes: Sequence[int], *, inverse: bool = False, workers: int | None = None) -> Any:
    """The orthonormal DCT-II (or its inverse) of ``x`` along ``axes``, on ``x``'s device.

    ``workers``: threads of SciPy's transform (ignored for a CuPy array).
    """
    xp = array_module(x)
    for axis in axes:
        n = x.shape[axis]
        if n <= DENSE_DCT_MAX[xp.__name__]:
            lead = math.prod(x.shape[:axis])
            x = matmul_each(dct_matrix(n, xp), x.reshape(lead, n, -1), transpose=inverse).reshape(x.shape)
        elif xp is np:
            import scipy.fft

            fun = scipy.fft.idct if inverse else scipy.fft.dct
            x = fun(x, type=2, norm="ortho", axis=axis, workers=workers)
        else:
            import cupyx.scipy.fft

            fun = cupyx.scipy.fft.idct if inverse else cupyx.scipy.fft.dct
            x = fun(x, type=2, norm="ortho", axis=axis)
    return x
