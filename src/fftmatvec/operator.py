"""The BTT operator ``F``: products with ``F``, ``F^T``, ``F^T F`` and ``G^T F``.

:class:`BTTOperator` couples the local engine (:class:`~fftmatvec.btt.LocalBTT`)
with a process grid that moves the blocks between ranks.  In one process
(the default grid) inputs and outputs are whole SOTI arrays.
"""

from __future__ import annotations

import os
from typing import Any, Callable, ContextManager

import numpy as np

from . import precision as _precision
from .backend import Backend, get_backend
from .btt import LocalBTT, _no_timer
from .errors import FftmatvecError
from .grid import SerialGrid

Array = Any


class BTTOperator:
    """A block-triangular Toeplitz parameter-to-observable map.

    ``y_i(t) = sum_j sum_{s<=t} f_ij(t-s) m_j(s)``, ``F`` of shape
    ``(Nd*Nt, Nm*Nt)`` applied with FFTs and never formed.

    Parameters
    ----------
    f : (Nd, Nm, Nt) float64 array
        First block column, SOTI.  Use :meth:`from_matrix_dir` for files.
    precision : str
        Five-letter code for ``F`` products (design.md section 3).
    adjoint_precision : str, optional
        Code for ``F^T`` products; default: the same as ``precision``.
    device : {"cpu", "gpu", "auto"} or Backend
    aux : (Nd, Nm, Nt) float64 array, optional
        First block column of a second BTT ``G`` of the same shape, for
        :meth:`aux_normal` (the C++ code's auxiliary matrix).
    grid : grid object, optional
        Process grid (:mod:`fftmatvec.grid`); default the one-process grid.
        With a grid, ``f`` and ``aux`` may be the full arrays (each rank cuts
        its slab) and vectors are the local blocks.

    Attributes
    ----------
    dims : (Nm, Nt)
    dimsd : (Nd, Nt)
    shape : (Nd*Nt, Nm*Nt)
    """

    def __init__(
        self,
        f: np.ndarray,
        *,
        precision: str = _precision.DEFAULT,
        adjoint_precision: str | None = None,
        device: "str | Backend" = "cpu",
        aux: np.ndarray | None = None,
        grid: Any = None,
        shape: tuple[int, int, int] | None = None,
    ) -> None:
        self.grid = grid if grid is not None else SerialGrid()
        self.backend = get_backend(device)
        self.precision = _precision.parse(precision)
        self.adjoint_precision = _precision.parse(adjoint_precision or precision)
        if shape is None and np.ndim(f) != 3:
            raise ValueError(f"f must have shape (Nd, Nm, Nt), got {np.shape(f)}")
        self.Nd, self.Nm, self.Nt = shape if shape is not None else f.shape
        self._check_slab(f, "f")
        dtypes = {self.precision.sbgemv, self.adjoint_precision.sbgemv}
        self.engine = LocalBTT(f, self.backend, dtypes)
        self.aux_engine = None
        if aux is not None:
            self._check_slab(aux, "aux")
            self.aux_engine = LocalBTT(aux, self.backend, {self.adjoint_precision.sbgemv})
        self.backend.synchronize()

    @classmethod
    def from_matrix_dir(
        cls, matrix_dir: "str | os.PathLike", *, aux_dir: "str | os.PathLike | None" = None, grid: Any = None, **kwargs
    ) -> "BTTOperator":
        """Build from an FFTMatvec matrix directory, reading only this rank's slab.

        ``aux_dir`` is an optional second matrix directory of the same shape.
        Other keyword arguments as for the constructor.
        """
        from .io import read_matrix_slab, read_meta

        grid = grid if grid is not None else SerialGrid()
        meta = read_meta(matrix_dir)
        rows, cols = grid.row_block(meta.Nd), grid.col_block(meta.Nm)
        f = read_matrix_slab(matrix_dir, rows, cols, meta=meta)
        aux = None
        if aux_dir is not None:
            aux_meta = read_meta(aux_dir)
            if (aux_meta.Nd, aux_meta.Nm, aux_meta.Nt) != (meta.Nd, meta.Nm, meta.Nt):
                raise FftmatvecError(
                    f"{aux_dir}: auxiliary matrix is {aux_meta.Nd}x{aux_meta.Nm}x{aux_meta.Nt}, "
                    f"but {matrix_dir} is {meta.Nd}x{meta.Nm}x{meta.Nt}"
                )
            aux = read_matrix_slab(aux_dir, rows, cols, meta=aux_meta)
        op = cls(f, aux=aux, grid=grid, shape=(meta.Nd, meta.Nm, meta.Nt), **kwargs)
        op.meta = meta
        return op

    def _check_slab(self, f: np.ndarray, name: str) -> None:
        (_, nd), (_, nm) = self.grid.row_block(self.Nd), self.grid.col_block(self.Nm)
        if f.shape != (nd, nm, self.Nt):
            raise ValueError(f"{name} must have shape {(nd, nm, self.Nt)} (the local slab), got {f.shape}")
        if not np.all(np.isfinite(f)):
            raise FftmatvecError(f"{name} contains NaN or Inf")

    # -- shapes ------------------------------------------------------------
    @property
    def dims(self) -> tuple[int, int]:
        return (self.Nm, self.Nt)

    @property
    def dimsd(self) -> tuple[int, int]:
        return (self.Nd, self.Nt)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.Nd * self.Nt, self.Nm * self.Nt)

    # -- products ----------------------------------------------------------
    def matvec(self, m: Array, timer: Callable[[str], ContextManager[None]] = _no_timer) -> Array:
        """``y = F m``.

        m : (Nm, Nt) or (Nm, Nt, K) float, SOTI (the local block ``J_c`` on
        grid row 0 under a grid).  Returns (Nd, Nt[, K]) float64, in the same
        array library as ``m``.
        """
        x, unbatch, to_caller = self._prepare(m, self.Nm, self.grid.col_block, self.grid.holds_param, self.precision)
        x = self.grid.col_bcast(x)
        y = self.engine.apply(x, self.precision, adjoint=False, timer=timer)
        y = self.grid.row_reduce(y)
        return to_caller(unbatch(y))

    def rmatvec(self, d: Array, timer: Callable[[str], ContextManager[None]] = _no_timer) -> Array:
        """``m = F^T d``.

        d : (Nd, Nt) or (Nd, Nt, K) float, SOTI.  Returns (Nm, Nt[, K]) float64.
        """
        prec = self.adjoint_precision
        x, unbatch, to_caller = self._prepare(d, self.Nd, self.grid.row_block, self.grid.holds_data, prec)
        x = self.grid.row_bcast(x)
        m = self.engine.apply(x, prec, adjoint=True, timer=timer)
        m = self.grid.col_reduce(m)
        return to_caller(unbatch(m))

    def normal(self, m: Array) -> Array:
        """``F^T F m`` with one reduction between the passes; shapes as :meth:`matvec` input."""
        return self._chain(m, self.engine)

    def aux_normal(self, m: Array) -> Array:
        """``G^T F m`` for the auxiliary BTT ``G``; shapes as :meth:`matvec` input."""
        if self.aux_engine is None:
            raise FftmatvecError("aux_normal needs an auxiliary matrix (aux= or aux_dir=)")
        return self._chain(m, self.aux_engine)

    def _chain(self, m: Array, second: LocalBTT) -> Array:
        fwd, adj = self.precision, self.adjoint_precision
        x, unbatch, to_caller = self._prepare(m, self.Nm, self.grid.col_block, self.grid.holds_param, fwd)
        x = self.grid.col_bcast(x)
        y = self.engine.apply(x, fwd, adjoint=False)
        y = self.grid.row_reduce(y, all=True).astype(adj.pad, copy=False)
        z = second.apply(y, adj, adjoint=True)
        z = self.grid.col_reduce(z)
        return to_caller(unbatch(z))

    def _prepare(self, v: Array, n: int, block: Callable, holds: Callable, prec: _precision.Precision):
        """Check an input block, move it to the backend in the pad precision.

        Returns the ``(n_local, Nt, K)`` array and two functions: one that
        drops the batch axis again when the input had none, one that returns
        a float64 array in the caller's array library.
        """
        be = self.backend
        native = be.is_native(v)
        v = v if native else np.asarray(v)
        _, n_local = block(n)
        expected = (n_local, self.Nt) if holds() else None
        if expected is not None and (v.ndim not in (2, 3) or v.shape[:2] != expected):
            raise ValueError(f"input must have shape {expected} or {expected + ('K',)}, got {v.shape}")
        if not bool(be.xp.all(be.xp.isfinite(v))):
            raise FftmatvecError("input vector contains NaN or Inf")
        batched = v.ndim == 3
        x = be.asarray(v if batched else v[:, :, None], dtype=prec.pad)

        def unbatch(y: Array) -> Array:
            return y if batched else y[:, :, 0]

        def to_caller(y: Array) -> Array:
            return y.astype(np.float64) if native else be.to_host(y).astype(np.float64)

        return x, unbatch, to_caller

    # -- views ---------------------------------------------------------------
    def aslinearoperator(self):
        """A :class:`scipy.sparse.linalg.LinearOperator` on flattened SOTI
        vectors (``m.ravel()``), with ``matvec``, ``rmatvec`` and ``matmat``
        (one batched product for all columns)."""
        from .linop import as_scipy

        return as_scipy(self)
