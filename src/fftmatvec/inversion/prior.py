"""Gaussian priors ``m ~ N(m0, Gp)`` on the parameter grid.

Every prior has a symmetric square root ``S`` with ``Gp = S S^T = S^2``, used
for prior preconditioning (whitened variables ``m = m0 + S u``) and sampling.
Vectors are SOTI arrays ``(Nm, Nt)`` or batches ``(Nm, Nt, K)``; every method
works column by column on the batch axis.  A prior lives on one device: its
``xp`` (NumPy or CuPy) holds its mean and constants, and its methods take and
return arrays of that module.

* :class:`WhitePrior`: ``Gp = std^2 I``.
* :class:`MaternPrior`: ``Gp = (delta I - gamma L)^{-2}`` in space, ``L`` the
  Neumann finite-difference Laplacian of a 1-D line or 2-D patch of the ``Nm``
  parameter points, independent in time or with a second factor of the same
  kind along time (``Gp = Gs kron Gt``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from fftmatvec.backend.arrays import array_module, dctn, to_host
from fftmatvec.backend.threads import cores_per_rank
from fftmatvec.errors import ConfigError

Array = Any  # a NumPy or CuPy array


class Prior(Protocol):
    """What the solvers use from a prior."""

    dims: tuple[int, int]
    mean: Array
    #: NumPy or CuPy: the module of ``mean`` and of every vector the methods take.
    xp: ModuleType
    #: ``S`` acts on each time step alike (``S = Ss kron I``): the QoI's prior
    #: variance then needs no product per QoI entry (:func:`~fftmatvec.inversion.qoi.qoi_forecast`).
    time_invariant: bool

    def apply(self, x: Array) -> Array: ...
    def sqrt(self, x: Array) -> Array: ...
    def inv(self, x: Array) -> Array: ...


def bcast(a: Array | float, x: Array) -> Array | float:
    """``a`` (a number, or an array such as ``(n, Nt)``) ready to broadcast
    against ``x`` of shape ``(n, Nt)`` or a batch ``(n, Nt, K)``: a number
    stays a number, an array gets trailing axes, on ``x``'s device."""
    if np.ndim(a) == 0:
        return float(a)
    xp = array_module(x)
    a = to_host(a) if xp is np else xp.asarray(a)
    return a.reshape(a.shape + (1,) * (x.ndim - a.ndim))


class _Sampler:
    """``sample`` for priors with ``dims``, ``mean``, ``xp`` and ``sqrt``."""

    def sample(self, rng: np.random.Generator, K: int | None = None) -> Array:
        """Draw ``m0 + S xi``, ``xi ~ N(0, I)`` (``xi`` drawn on the host, so a
        seed gives the same draw on every device).

        Returns
        -------
        (Nm, Nt) or (Nm, Nt, K) float64
        """
        xi = self.xp.asarray(rng.standard_normal(self.dims + (() if K is None else (K,))))
        return bcast(self.mean, xi) + self.sqrt(xi)


def _mean(mean: Array | float, dims: tuple[int, int], xp: ModuleType) -> Array:
    try:
        return xp.broadcast_to(xp.asarray(mean, dtype=float), dims).copy()
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
    xp : module, numpy (default) or cupy
        Where the prior's vectors live.
    """

    def __init__(self, dims: tuple[int, int], std: Array | float = 1.0,
                 mean: Array | float = 0.0, *, xp: ModuleType = np) -> None:
        self.dims = (int(dims[0]), int(dims[1]))
        self.xp = xp
        self.std = xp.asarray(std, dtype=float)
        if not bool((self.std > 0).all()):
            raise ConfigError("prior std must be > 0")
        self.mean = _mean(mean, self.dims, xp)
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


def neumann_eigenvalues(n: int, h: float = 1.0) -> np.ndarray:
    """Eigenvalues ``(n,)`` of minus the second-difference matrix with zero-flux
    ends and spacing ``h`` (the Neumann Laplacian of a line of ``n`` points), in
    the order of the orthonormal DCT-II, whose basis vectors are its eigenvectors."""
    return (2.0 * np.sin(np.pi * np.arange(n) / (2 * n)) / h) ** 2


class MaternFactor:
    """``S = (delta I - gamma L)^{-1}`` on a 1-D or 2-D grid, ``L`` its Neumann
    Laplacian (the sum of :func:`neumann_eigenvalues`' matrices along the axes,
    points in C order: ``j = ix * ny + iy`` for ``shape = (nx, ny)``).

    The orthonormal DCT-II along each grid axis diagonalises ``L``, so ``S x``
    is a transform, a division by ``S^{-1}``'s eigenvalues and the inverse
    transform, and ``S^{-1} x`` the same with a product; all columns in one
    call, on the device of ``x`` (:func:`~fftmatvec.backend.arrays.dctn`:
    DCT-matrix products along short axes, the FFT along long ones).  A sparse
    LU solve of the 2-D grid took most of a conjugate gradient iteration on a
    GPU (docs/inversion.md).

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
    xp : module, numpy (default) or cupy
        Where the vectors it applies to live.
    """

    def __init__(self, shape: Sequence[int], spacing: Sequence[float], corr_length: float, std: float,
                 centre: int, *, xp: ModuleType = np) -> None:
        if not (corr_length > 0 and std > 0):
            raise ConfigError("Matérn prior needs corr_length > 0 and std > 0")
        self.shape = tuple(int(n) for n in shape)
        self.axes = tuple(range(len(self.shape)))
        self.workers = cores_per_rank()  # threads of the host transforms, as the CPU backend's
        kappa2 = 8.0 * (2.0 - len(self.shape) / 2.0) / corr_length**2
        eig = kappa2 + sum(np.ix_(*(neumann_eigenvalues(n, h) for n, h in zip(self.shape, spacing))))
        e = np.zeros(self.shape)
        e.flat[centre] = 1.0
        c = std / np.linalg.norm(dctn(dctn(e, self.axes) / eig, self.axes, inverse=True))
        self.delta, self.gamma = kappa2 / c, 1.0 / c
        self._eig = xp.asarray(eig / c)[..., None]  # the eigenvalues of S^{-1}, broadcast over the columns

    def _scale(self, x: Array, divide: bool) -> Array:
        """``x`` (n, k) times (or divided by) ``S^{-1}``'s eigenvalues in the DCT basis."""
        y = dctn(x.reshape(self.shape + (-1,)), self.axes, workers=self.workers)  # a new array
        if divide:
            y /= self._eig
        else:
            y *= self._eig
        return dctn(y, self.axes, inverse=True, workers=self.workers).reshape(x.shape)

    def solve(self, x: Array) -> Array:
        """``S x`` for x (n, k): all ``k`` columns in one call."""
        return self._scale(x, divide=True)

    def matvec(self, x: Array) -> Array:
        """``S^{-1} x`` for x (n, k)."""
        return self._scale(x, divide=False)


def _along(axis: int, fun: Callable[[Array], Array], x: Array) -> Array:
    """Apply ``fun`` ((n, k) -> (n, k)) to axis ``axis`` of ``x``, all other
    axes stacked into ``k``."""
    xp = array_module(x)
    xt = xp.moveaxis(x, axis, 0)
    y = fun(xt.reshape(xt.shape[0], -1)).reshape(xt.shape)
    return xp.ascontiguousarray(xp.moveaxis(y, 0, axis))


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
    xp : module, numpy (default) or cupy
        Where the prior's vectors live.

    Attributes
    ----------
    delta, gamma : float
        Coefficients of the spatial factor.
    space, time : MaternFactor (time may be None)
    """

    def __init__(self, shape: int | Sequence[int], Nt: int, *, std: float = 1.0,
                 corr_length: float, spacing: float | Sequence[float] = 1.0,
                 mean: Array | float = 0.0, time_corr_length: float | None = None,
                 dt: float = 1.0, xp: ModuleType = np) -> None:
        shape = tuple(int(s) for s in np.atleast_1d(shape))
        if len(shape) not in (1, 2) or min(shape) < 1:
            raise ConfigError(f"Matérn prior grid must be 1-D or 2-D, got shape {shape}")
        spacing = tuple(float(h) for h in np.broadcast_to(spacing, (len(shape),)))
        centre = int(np.ravel_multi_index(tuple(s // 2 for s in shape), shape))
        self.shape, self.xp = shape, xp
        self.dims = (int(np.prod(shape)), int(Nt))
        self.space = MaternFactor(shape, spacing, corr_length, std, centre, xp=xp)
        self.time = (None if time_corr_length is None else
                     MaternFactor((Nt,), (dt,), time_corr_length, 1.0, Nt // 2, xp=xp))
        self.delta, self.gamma = self.space.delta, self.space.gamma
        self.mean = _mean(mean, self.dims, xp)
        self.time_invariant = self.time is None

    def sqrt(self, x: Array) -> Array:
        """``S x``; x (Nm, Nt[, K])."""
        y = _along(0, self.space.solve, x)
        return y if self.time is None else _along(1, self.time.solve, y)

    def apply(self, x: Array) -> Array:
        """``Gp x = S S x``."""
        return self.sqrt(self.sqrt(x))

    def inv(self, x: Array) -> Array:
        """``Gp^{-1} x = S^{-1} S^{-1} x``."""
        for _ in range(2):
            x = _along(0, self.space.matvec, x)
            if self.time is not None:
                x = _along(1, self.time.matvec, x)
        return x
