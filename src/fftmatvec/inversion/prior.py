"""Gaussian priors ``m ~ N(m0, Gp)`` on the parameter grid.

Every prior has a symmetric square root ``S`` with ``Gp = S S^T = S^2``, used
for prior preconditioning (whitened variables ``m = m0 + S u``) and sampling.
Vectors are SOTI arrays ``(Nm, Nt)`` or batches ``(Nm, Nt, K)``; every method
works column by column on the batch axis.

* :class:`WhitePrior`: ``Gp = std^2 I``.
* :class:`MaternPrior`: ``Gp = (delta I - gamma L)^{-2}`` in space, ``L`` the
  Neumann finite-difference Laplacian of a 1-D line or 2-D patch of the ``Nm``
  parameter points, independent in time or with a second factor of the same
  kind along time (``Gp = Gs kron Gt``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import scipy.fft
import scipy.sparse as sp

from fftmatvec.backend.cpu import cores_per_rank
from fftmatvec.errors import ConfigError

Array = np.ndarray


class Prior(Protocol):
    """What the solvers use from a prior."""

    dims: tuple[int, int]
    mean: Array
    #: ``S`` acts on each time step alike (``S = Ss kron I``): the QoI's prior
    #: variance then needs no product per QoI entry (:func:`~fftmatvec.inversion.qoi.qoi_forecast`).
    time_invariant: bool

    def apply(self, x: Array) -> Array: ...
    def sqrt(self, x: Array) -> Array: ...
    def inv(self, x: Array) -> Array: ...


def bcast(a: Array | float, x: Array) -> Array:
    """Append axes to ``a`` (scalar or e.g. ``(n, Nt)``) so it broadcasts
    against ``x`` of shape ``(n, Nt)`` or a batch ``(n, Nt, K)``."""
    a = np.asarray(a)
    return a.reshape(a.shape + (1,) * (x.ndim - a.ndim))


class _Sampler:
    """``sample`` for priors with ``dims``, ``mean`` and ``sqrt``."""

    def sample(self, rng: np.random.Generator, K: int | None = None) -> Array:
        """Draw ``m0 + S xi``, ``xi ~ N(0, I)``.

        Returns
        -------
        (Nm, Nt) or (Nm, Nt, K) float64
        """
        xi = rng.standard_normal(self.dims + (() if K is None else (K,)))
        return bcast(self.mean, xi) + self.sqrt(xi)


def _mean(mean: Array | float, dims: tuple[int, int]) -> Array:
    try:
        return np.broadcast_to(np.asarray(mean, dtype=float), dims).copy()
    except ValueError as exc:
        raise ConfigError(f"prior mean of shape {np.shape(mean)} does not fit {dims}") from exc


class WhitePrior(_Sampler):
    """``Gp = std^2 I``.

    Parameters
    ----------
    dims : (Nm, Nt)
    std : float or array broadcastable to (Nm, Nt), > 0
        Marginal standard deviation.
    mean : float or array broadcastable to (Nm, Nt)
    """

    def __init__(self, dims: tuple[int, int], std: Array | float = 1.0,
                 mean: Array | float = 0.0) -> None:
        self.dims = (int(dims[0]), int(dims[1]))
        self.std = np.asarray(std, dtype=float)
        if not np.all(self.std > 0):
            raise ConfigError("prior std must be > 0")
        self.mean = _mean(mean, self.dims)
        self.time_invariant = self.std.ndim < 2 or self.std.shape[1] == 1

    def apply(self, x: Array) -> Array:
        """``Gp x``; x (Nm, Nt[, K])."""
        return x * bcast(self.std**2, x)

    def sqrt(self, x: Array) -> Array:
        """``S x = std x``."""
        return x * bcast(self.std, x)

    def inv(self, x: Array) -> Array:
        """``Gp^{-1} x``."""
        return x / bcast(self.std**2, x)


def neumann_laplacian(n: int, h: float = 1.0) -> sp.csr_matrix:
    """Second-difference matrix ``(n, n)`` with zero-flux ends, spacing ``h``
    (symmetric, negative semidefinite, constants in its null space)."""
    main = np.full(n, -2.0)
    main[0] += 1.0
    main[-1] += 1.0
    off = np.ones(n - 1)
    return (sp.diags([off, main, off], [-1, 0, 1]) / h**2).tocsr()


def grid_laplacian(shape: Sequence[int], spacing: Sequence[float]) -> sp.csr_matrix:
    """Neumann Laplacian of a 1-D or 2-D grid, points in C order
    (``j = ix * ny + iy`` for ``shape = (nx, ny)``)."""
    if len(shape) == 1:
        return neumann_laplacian(shape[0], spacing[0])
    (nx, ny), (hx, hy) = shape, spacing
    return (sp.kron(neumann_laplacian(nx, hx), sp.eye(ny))
            + sp.kron(sp.eye(nx), neumann_laplacian(ny, hy))).tocsr()


def neumann_eigenvalues(n: int, h: float = 1.0) -> Array:
    """Eigenvalues ``(n,)`` of ``-neumann_laplacian(n, h)``, in the order of the
    orthonormal DCT-II, whose basis vectors are its eigenvectors."""
    return (2.0 * np.sin(np.pi * np.arange(n) / (2 * n)) / h) ** 2


class MaternFactor:
    """``S = (delta I - gamma L)^{-1}`` on a 1-D or 2-D grid, ``L`` its Neumann
    Laplacian (:func:`grid_laplacian`).

    The orthonormal DCT-II along each grid axis diagonalises ``L``, so ``S x``
    is a transform, a division by ``S^{-1}``'s eigenvalues and the inverse
    transform: ``O(n log n)`` a column, all columns in one call (a sparse LU
    solve of the 2-D grid took most of a conjugate gradient iteration on a
    GPU, docs/inversion.md).

    ``kappa^2 = delta / gamma = 8 nu / corr_length^2`` with ``nu = 2 - dim/2``
    (the distance at which the continuous Matérn correlation has fallen to
    about 0.13), and the overall scale is chosen so that ``(S^2)`` has
    ``std^2`` at the grid point ``centre``; Neumann ends raise the variance
    near the boundary (up to about 2x per side).

    Parameters
    ----------
    shape : (n,) or (nx, ny)
        Grid points per axis, C order.
    spacing : sequence of float
        Grid spacing per axis.
    corr_length : float, > 0
        In the units of the grid spacing.
    std : float, > 0
    centre : int
        Index of the point where the variance is normalised.
    """

    def __init__(self, shape: Sequence[int], spacing: Sequence[float], corr_length: float, std: float,
                 centre: int) -> None:
        if not (corr_length > 0 and std > 0):
            raise ConfigError("Matérn prior needs corr_length > 0 and std > 0")
        self.shape = tuple(int(n) for n in shape)
        self.workers = cores_per_rank()  # threads of the transforms, as the CPU backend's
        kappa2 = 8.0 * (2.0 - len(self.shape) / 2.0) / corr_length**2
        eig = kappa2 + sum(np.ix_(*(neumann_eigenvalues(n, h) for n, h in zip(self.shape, spacing))))
        e = np.zeros(self.shape + (1,))
        e.reshape(-1)[centre] = 1.0
        c = std / np.linalg.norm(self._transform(self._transform(e) / eig[..., None], inverse=True))
        self.delta, self.gamma = kappa2 / c, 1.0 / c
        self.A = ((kappa2 * sp.eye(int(np.prod(self.shape))) - grid_laplacian(self.shape, spacing)) / c).tocsr()
        self._eig = (eig / c)[..., None]  # the eigenvalues of S^{-1} = A, broadcast over the columns

    def _transform(self, x: Array, inverse: bool = False) -> Array:
        """The orthonormal DCT-II (its inverse) along the grid axes of ``x`` (*shape, k)."""
        axes = tuple(range(len(self.shape)))
        return (scipy.fft.idctn if inverse else scipy.fft.dctn)(x, type=2, norm="ortho", axes=axes,
                                                                 workers=self.workers)

    def solve(self, x: Array) -> Array:
        """``S x`` for x (n, k): all ``k`` columns in one call."""
        y = self._transform(x.reshape(self.shape + (-1,))) / self._eig
        return self._transform(y, inverse=True).reshape(x.shape)

    def matvec(self, x: Array) -> Array:
        """``S^{-1} x`` for x (n, k)."""
        return self.A @ x


def _along(axis: int, fun: Callable[[Array], Array], x: Array) -> Array:
    """Apply ``fun`` ((n, k) -> (n, k)) to axis ``axis`` of ``x``, all other
    axes stacked into ``k``."""
    xt = np.moveaxis(x, axis, 0)
    y = fun(xt.reshape(xt.shape[0], -1)).reshape(xt.shape)
    return np.ascontiguousarray(np.moveaxis(y, 0, axis))


class MaternPrior(_Sampler):
    """``Gp = S^2``, ``S = Ss kron St``: Matérn in space, optionally in time.

    ``Ss = (delta I - gamma L)^{-1}`` on the parameter grid (:class:`MaternFactor`
    with ``std``); ``St`` the same along time with unit variance, or the
    identity (independent time steps) when ``time_corr_length`` is None.

    Parameters
    ----------
    shape : int or (nx,) or (nx, ny)
        Parameter grid; ``Nm = prod(shape)``, points in C order.
    Nt : int
    std : float, > 0
        Marginal standard deviation at the grid centre (and centre time).
    corr_length : float, > 0
        Spatial correlation length, in the units of ``spacing``.
    spacing : float or (hx, hy)
    mean : float or array broadcastable to (Nm, Nt)
    time_corr_length : float, optional
        Correlation length along time, in the units of ``dt``.
    dt : float

    Attributes
    ----------
    delta, gamma : float
        Coefficients of the spatial factor.
    space, time : MaternFactor (time may be None)
    """

    def __init__(self, shape: int | Sequence[int], Nt: int, *, std: float = 1.0,
                 corr_length: float, spacing: float | Sequence[float] = 1.0,
                 mean: Array | float = 0.0, time_corr_length: float | None = None,
                 dt: float = 1.0) -> None:
        shape = tuple(int(s) for s in np.atleast_1d(shape))
        if len(shape) not in (1, 2) or min(shape) < 1:
            raise ConfigError(f"Matérn prior grid must be 1-D or 2-D, got shape {shape}")
        spacing = tuple(float(h) for h in np.broadcast_to(spacing, (len(shape),)))
        centre = int(np.ravel_multi_index(tuple(s // 2 for s in shape), shape))
        self.shape = shape
        self.dims = (int(np.prod(shape)), int(Nt))
        self.space = MaternFactor(shape, spacing, corr_length, std, centre)
        self.time = (None if time_corr_length is None else
                     MaternFactor((Nt,), (dt,), time_corr_length, 1.0, Nt // 2))
        self.delta, self.gamma = self.space.delta, self.space.gamma
        self.mean = _mean(mean, self.dims)
        self.time_invariant = self.time is None

    def sqrt(self, x: Array) -> Array:
        """``S x``; x (Nm, Nt[, K])."""
        y = _along(0, self.space.solve, x)
        return y if self.time is None else _along(1, self.time.solve, y)

    def apply(self, x: Array) -> Array:
        """``Gp x = S S x``."""
        return self.sqrt(self.sqrt(x))

    def inv(self, x: Array) -> Array:
        """``Gp^{-1} x = S^{-1} S^{-1} x`` (sparse products, no solves)."""
        for _ in range(2):
            x = _along(0, self.space.matvec, x)
            if self.time is not None:
                x = _along(1, self.time.matvec, x)
        return x
