"""Distributed parameter- and data-space vectors.

A :class:`DistVector` is one SOTI vector of ``n`` blocks of ``Nt`` values
(optionally ``K`` of them side by side) spread over a process grid the way
the operator wants it (design.md section 4, docs/grid.md):

* parameter space (``"param"``, ``n = Nm``): block ``J_c`` on rank ``(0, c)``;
* data space (``"data"``, ``n = Nd``): block ``I_r`` on rank ``(r, 0)``.

Every rank has a ``local`` array: ``(count, Nt)`` (or ``(count, Nt, K)``) on
the holders, where ``(start, count) = grid.block(space, n)``, and an empty
``(0, Nt[, K])`` array elsewhere, so arithmetic runs the same on every rank
and a dot product is one all-reduce over the whole grid.  ``local`` is a
NumPy or CuPy array; scatter, gather, read and write go through host memory,
:meth:`DistVector.allgather` keeps a CuPy block on the device.

Global metadata (``space``, ``n``, ``Nt``, ``K``) is agreed by all ranks
when a vector is made (:meth:`DistVector.__init__`, :meth:`read`,
:meth:`scatter`, :meth:`from_global`), so checks on it need no vote.
Arithmetic (``+ - *`` with scalars, :meth:`axpy`) is local; scalars must be
the same on every rank (they are, when they come from :meth:`dot`).
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from .backend.arrays import array_module, to_host
from .errors import ConfigError, collective
from .grid import SerialGrid

Array = Any


class DistVector:
    """One parameter- or data-space vector on a process grid.

    Parameters
    ----------
    local : (count, Nt) or (count, Nt, K) array, or None
        This rank's block (``grid.block(space, n)``) on holders; on other
        ranks ignored (None allowed) and replaced by an empty array.
    grid : SerialGrid or ProcessGrid, optional (default: one process)
    space : {"param", "data"}
    n : int
        Number of blocks of the whole vector (``Nm`` or ``Nd``).
    Nt : int, optional
        Time steps; taken from the holders' blocks when None.

    Construction is collective: every rank of the grid calls it, the
    holders' shapes are checked and ``Nt``/``K`` agreed in one vote, and a
    wrong block on one rank raises the same :class:`ConfigError` everywhere.

    Attributes
    ----------
    local : array
        See above; modified in place by ``+=``, :meth:`axpy` ...
    grid, space, n, Nt, K : as given (``K`` None for one vector)
    start, count : int
        My block range (``count`` as owned, also on non-holders).
    qoi : bool
        Whether the vector is a QoI vector (kept from :meth:`read`, used by
        :meth:`write`).
    """

    __array_ufunc__ = None  # numpy scalars defer to our __rmul__ etc.

    def __init__(self, local: Array | None, grid: Any = None, space: str = "param", n: int | None = None,
                 Nt: int | None = None, *, qoi: bool = False) -> None:
        grid = grid if grid is not None else SerialGrid()
        holds = grid.holds(space)
        if n is None:
            if grid.size > 1:
                raise ConfigError("DistVector: give n (the global number of blocks) on a process grid")
            n = 0 if local is None else int(np.shape(local)[0])
        start, count = grid.block(space, n)
        with collective(grid.comm, "making a distributed vector") as vote:
            if holds:
                if local is None:
                    raise ConfigError(f"DistVector: rank holds blocks {start}..{start + count - 1} of the "
                                      f"{space}-space vector but passed no local block")
                shape = tuple(np.shape(local))
                if len(shape) not in (2, 3) or shape[0] != count or (Nt is not None and shape[1] != Nt):
                    want = f"({count}, {Nt if Nt is not None else 'Nt'}[, K])"
                    raise ConfigError(f"DistVector: local block must have shape {want}, got {shape}")
                vote.share((shape[1], shape[2] if len(shape) == 3 else None, _float_dtype(local).str))
        agreed = vote.agreed("the vector's (Nt, K, dtype)")
        if agreed is None:  # no holder shared: only possible with n == 0 blocks anywhere
            agreed = (Nt, None, np.dtype(np.float64).str)
        Nt_, K, dtype = agreed
        if Nt_ is None:
            raise ConfigError("DistVector: Nt unknown (no rank holds blocks); pass Nt=")
        if holds:
            xp = array_module(local)
            local = local if local.dtype.kind == "f" else xp.asarray(local, dtype=np.float64)
        else:  # an empty block of the holders' dtype, so that gathers agree on the element type
            xp = array_module(local) if local is not None else np
            local = xp.empty((0, Nt_) + ((K,) if K is not None else ()), dtype=np.dtype(dtype))
        self._set(local, grid, space, n, Nt_, K, qoi)

    # -- construction without a vote (metadata already agreed) ----------------
    def _set(self, local, grid, space, n, Nt, K, qoi) -> None:
        self.local = local
        self.grid = grid
        self.space = space
        self.n = n
        self.Nt = Nt
        self.K = K
        self.qoi = qoi
        self.start, self.count = grid.block(space, n)

    @classmethod
    def _wrap(cls, local: Array, grid: Any, space: str, n: int, Nt: int, K: int | None,
              qoi: bool = False) -> "DistVector":
        """A vector from a local block whose shape the caller guarantees
        (``(count, Nt[, K])`` on holders, ``(0, Nt[, K])`` elsewhere)."""
        self = cls.__new__(cls)
        self._set(local, grid, space, n, Nt, K, qoi)
        return self

    def _like(self, local: Array) -> "DistVector":
        return DistVector._wrap(local, self.grid, self.space, self.n, self.Nt, self.K, self.qoi)

    @classmethod
    def zeros(cls, grid: Any, space: str, n: int, Nt: int, K: int | None = None, *,
              xp: Any = np, dtype: Any = np.float64) -> "DistVector":
        """A zero vector (no communication); ``xp`` is numpy or cupy."""
        grid = grid if grid is not None else SerialGrid()
        count = grid.block(space, n)[1] if grid.holds(space) else 0
        local = xp.zeros((count, Nt) + ((K,) if K is not None else ()), dtype=dtype)
        return cls._wrap(local, grid, space, n, Nt, K)

    @classmethod
    def from_global(cls, full: Array, grid: Any = None, space: str = "param", *, qoi: bool = False) -> "DistVector":
        """Each rank passes the whole ``(n, Nt[, K])`` array and keeps its own
        block (a copy).  Collective (one vote on the shape)."""
        grid = grid if grid is not None else SerialGrid()
        shape = tuple(np.shape(full))
        with collective(grid.comm, "making a distributed vector from a global array") as vote:
            if len(shape) not in (2, 3):
                raise ConfigError(f"a {space}-space vector must have shape (n, Nt) or (n, Nt, K), got {shape}")
            vote.share((shape, _float_dtype(full).str))
        shape, dtype = vote.agreed("the global vector's shape and dtype")
        n = shape[0]
        start, count = grid.block(space, n)
        if grid.holds(space):
            local = full[start:start + count].astype(dtype, copy=True)
        else:
            local = array_module(full).empty((0,) + shape[1:], dtype=np.dtype(dtype))
        return cls._wrap(local, grid, space, n, shape[1], shape[2] if len(shape) == 3 else None, qoi)

    @classmethod
    def scatter(cls, full: np.ndarray | None, grid: Any = None, space: str = "param", root: int = 0, *,
                qoi: bool = False) -> "DistVector":
        """Distribute ``full`` ``(n, Nt[, K])`` from rank ``root`` of the grid
        (the other ranks pass None) to the holders, with one ``Scatterv``.
        The local blocks are host (NumPy) arrays of ``full``'s float dtype."""
        grid = grid if grid is not None else SerialGrid()
        is_root = grid.rank == root
        with collective(grid.comm, "scattering a vector") as vote:
            if is_root:
                full = np.ascontiguousarray(to_host(full))
                if full.ndim not in (2, 3) or full.dtype.kind not in "fiu":
                    raise ConfigError(f"scatter: a {space}-space vector must be a real (n, Nt) or "
                                      f"(n, Nt, K) array, got {full.dtype} of shape {full.shape}")
                if full.dtype.kind != "f":
                    full = full.astype(np.float64)
                vote.share((full.shape, full.dtype.str))
        shape, dtype = vote.agreed("the scattered vector")
        n, Nt = shape[:2]
        K = shape[2] if len(shape) == 3 else None
        per_block = math.prod(shape[1:])
        counts = [0] * grid.size
        for rank, _, count in grid.holder_blocks(space, n):
            counts[rank] = count * per_block
        start, count = grid.block(space, n)
        local = np.empty(((count if grid.holds(space) else 0),) + tuple(shape[1:]), dtype=np.dtype(dtype))
        grid.all.scatterv(full if is_root else None, counts, local, root=root)
        return cls._wrap(local, grid, space, n, Nt, K, qoi)

    @classmethod
    def read(cls, path: "str | os.PathLike", grid: Any = None, space: str = "param", *,
             n: int | None = None, Nt: int | None = None, qoi: bool | None = None) -> "DistVector":
        """Read a vector file; each holder reads only its own blocks (one
        hyperslab, :func:`fftmatvec.io.read_vector` with ``blocks=``).

        ``n``/``Nt`` (e.g. the operator's ``Nm``, ``Nt``) and ``qoi`` are
        checked against the file when given.  Collective: a missing or bad
        file on any holder raises the same
        :class:`~fftmatvec.errors.FileFormatError` on every rank.
        """
        from .io import read_vector

        grid = grid if grid is not None else SerialGrid()
        holds = grid.holds(space)
        local = None
        with collective(grid.comm, f"reading vector {path}") as vote:
            if holds:
                n_file = n
                if n_file is None:  # learn n from the attributes, reading no data
                    n_file = read_vector(path, space, blocks=(0, 0), qoi=qoi, expect_nt=Nt)[1].n
                blocks = grid.block(space, n_file)
                local, info = read_vector(path, space, blocks=blocks, qoi=qoi, expect_n=n, expect_nt=Nt)
                vote.share((info.n, info.Nt, info.qoi))
        n_, Nt_, qoi_ = vote.agreed(f"the sizes of {path}")
        if not holds:
            local = np.empty((0, Nt_))
        return cls._wrap(local, grid, space, n_, Nt_, None, qoi_)

    # -- global views ------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """Global shape ``(n, Nt)`` or ``(n, Nt, K)``."""
        return (self.n, self.Nt) + ((self.K,) if self.K is not None else ())

    @property
    def holds(self) -> bool:
        """Whether this rank holds a block of the vector."""
        return self.grid.holds(self.space)

    @property
    def dtype(self):
        return self.local.dtype

    def _counts(self) -> list[int]:
        """Elements of the vector on each grid rank (0 on non-holders)."""
        per_block = math.prod(self.shape[1:])
        counts = [0] * self.grid.size
        for rank, _, count in self.grid.holder_blocks(self.space, self.n):
            counts[rank] = count * per_block
        return counts

    def gather(self, root: int | None = 0) -> np.ndarray | None:
        """The whole ``(n, Nt[, K])`` array (NumPy) on grid rank ``root``
        (every rank when ``root`` is None), None elsewhere.  One ``Gatherv``."""
        send = np.ascontiguousarray(to_host(self.local))
        recv = None
        if root is None or self.grid.rank == root:
            recv = np.empty(self.shape, dtype=send.dtype)
        return self.grid.all.gatherv(send, self._counts(), recv, root=root)

    def allgather(self) -> Array:
        """The whole ``(n, Nt[, K])`` array on every rank, in the local
        block's array module: on a GPU grid a CuPy array gathered device to
        device (NCCL, or CUDA-aware MPI; plain MPI stages it through the
        host).  One collective over the grid."""
        xp = array_module(self.local)
        send = xp.ascontiguousarray(self.local)
        recv = xp.empty(self.shape, dtype=send.dtype)
        return self.grid.all.gatherv(send, self._counts(), recv, root=None)

    def write(self, path: "str | os.PathLike", *, qoi: bool | None = None, attrs: dict | None = None) -> None:
        """Gather to grid rank 0, which writes the file atomically
        (:func:`fftmatvec.io.write_vector`).  Collective: a failed write
        raises the same error on every rank."""
        from .io import write_vector

        if self.K is not None:
            raise ConfigError(f"cannot write a batch of {self.K} vectors to one vector file")
        full = self.gather(root=0)
        with collective(self.grid.comm, f"writing vector {path}"):
            if self.grid.rank == 0:
                write_vector(path, full, self.space, qoi=self.qoi if qoi is None else qoi, attrs=attrs)

    # -- reductions ------------------------------------------------------------------
    def _sum(self, local_values: np.ndarray) -> np.ndarray:
        buf = np.ascontiguousarray(local_values, dtype=np.float64)
        return self.grid.all.allreduce(buf) if self.grid.size > 1 else buf

    def dot(self, other: "DistVector") -> float:
        """Euclidean inner product over all entries (all ``K`` columns
        together); the same float on every rank (one all-reduce)."""
        self._check_compatible(other)
        xp = array_module(self.local)
        local = float(xp.vdot(self.local.reshape(-1), other.local.reshape(-1))) if self.local.size else 0.0
        return float(self._sum(np.array([local]))[0])

    def norm(self) -> float:
        """Euclidean norm over all entries."""
        return math.sqrt(max(self.dot(self), 0.0))

    def gram(self, other: "DistVector") -> np.ndarray:
        """``(K, L)`` matrix of column inner products of two batched vectors
        (the block inner product ``X^T Y``), on every rank."""
        self._check_compatible(other, same_k=False)
        if self.K is None or other.K is None:
            raise ConfigError("gram needs batched (n, Nt, K) vectors")
        X = to_host(self.local).reshape(-1, self.K)
        Y = to_host(other.local).reshape(-1, other.K)
        return self._sum(X.T @ Y)

    # -- arithmetic --------------------------------------------------------------------
    def _check_compatible(self, other: Any, same_k: bool = True) -> None:
        if not isinstance(other, DistVector):
            raise TypeError(f"expected a DistVector, got {type(other).__name__}")
        same = (other.grid.shape == self.grid.shape and other.space == self.space
                and (other.n, other.Nt) == (self.n, self.Nt) and (not same_k or other.K == self.K))
        if not same:
            raise ConfigError(f"incompatible vectors: {self!r} and {other!r}")

    def copy(self) -> "DistVector":
        return self._like(self.local.copy())

    def zeros_like(self) -> "DistVector":
        return self._like(array_module(self.local).zeros_like(self.local))

    def axpy(self, a: float, x: "DistVector") -> "DistVector":
        """``self += a * x`` in place; return ``self``."""
        self._check_compatible(x)
        if self.local.size:
            self.local += a * x.local
        return self

    def __add__(self, other: Any) -> "DistVector":
        if isinstance(other, DistVector):
            self._check_compatible(other)
            return self._like(self.local + other.local)
        return NotImplemented

    def __sub__(self, other: Any) -> "DistVector":
        if isinstance(other, DistVector):
            self._check_compatible(other)
            return self._like(self.local - other.local)
        return NotImplemented

    def __mul__(self, a: Any) -> "DistVector":
        if isinstance(a, DistVector) or not np.isscalar(a) and np.ndim(a) != 0:
            return NotImplemented
        return self._like(self.local * a)

    __rmul__ = __mul__

    def __truediv__(self, a: Any) -> "DistVector":
        if isinstance(a, DistVector) or not np.isscalar(a) and np.ndim(a) != 0:
            return NotImplemented
        return self._like(self.local / a)

    def __neg__(self) -> "DistVector":
        return self._like(-self.local)

    def __pos__(self) -> "DistVector":
        return self

    def __iadd__(self, other: Any) -> "DistVector":
        return self.axpy(1.0, other)

    def __isub__(self, other: Any) -> "DistVector":
        return self.axpy(-1.0, other)

    def __imul__(self, a: Any) -> "DistVector":
        self.local *= a
        return self

    def __itruediv__(self, a: Any) -> "DistVector":
        self.local /= a
        return self

    def __repr__(self) -> str:
        return (f"DistVector({self.space}, shape={self.shape}, grid={self.grid.pr}x{self.grid.pc}, "
                f"local={tuple(self.local.shape)})")


def _float_dtype(a: Array) -> np.dtype:
    """The dtype a vector keeps for ``a``'s values: its own when floating, else float64."""
    dtype = np.dtype(a.dtype)
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


def inner(x: DistVector, y: DistVector) -> float:
    """``x.dot(y)``: the inner product to give solvers (``cg(..., inner=inner)``)."""
    return x.dot(y)
