"""MAP point of the linear Gaussian inverse problem (design.md section 6).

Model ``d = F m + e``, ``e ~ N(0, Gn)``, prior ``m ~ N(m0, Gp)``, ``Gp = S S^T``.
The MAP point solves

    H m = F^T Gn^-1 d + Gp^-1 m0,      H = F^T Gn^-1 F + Gp^-1.

Three equivalent routes:

``cg-parameter``
    Whitened variables ``m = m0 + S u``.  Substituting and multiplying by
    ``S^T`` (``S^T Gp^-1 S = I``) gives the prior-preconditioned system

        (S^T F^T Gn^-1 F S + I) u = S^T F^T Gn^-1 (d - F m0),

    This is the unshifted system ``S^T H S x = b``, ``x = S^-1 m``,
    ``b = S^T (F^T Gn^-1 d + Gp^-1 m0)``, started from ``x0 = S^-1 m0``: its
    initial residual ``b - S^T H m0`` is ``S^T F^T Gn^-1 (d - F m0)``, so CG on
    ``u = x - x0`` from zero takes the same steps and never needs ``S^-1``.  The matrix
    is the identity plus the (low-rank) prior-preconditioned misfit Hessian,
    so CG needs about as many iterations as that Hessian has eigenvalues
    above ~1.  The priors here have ``S = S^T``.
``cg-data``
    ``(Gn + F Gp F^T) w = d - F m0``, ``m = m0 + Gp F^T w`` (the same MAP by
    the Sherman-Morrison-Woodbury identity), CG on ``Nd*Nt`` unknowns.
``cholesky-data``
    :class:`DataSpaceCholesky`: the data-space matrix formed once with batched
    products and Cholesky-factored; each data set then costs two triangular
    solves and one ``F^T`` product.

Operators follow the protocol of ``fftmatvec.operator.BTTOperator``
(:class:`Operator`); vectors are SOTI arrays, parameters ``(Nm, Nt)``, data
``(Nd, Nt)``, batches with a trailing ``K`` axis, in the prior's module
(``prior.xp``: NumPy, or CuPy with the operators on the same GPU).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Protocol

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve

from fftmatvec.backend.arrays import to_host
from fftmatvec.errors import ConfigError, FftmatvecError
from fftmatvec.inversion.cg import CGResult, Inner, cg, dot
from fftmatvec.inversion.noise import WhiteNoise
from fftmatvec.inversion.prior import Array, Prior, bcast
METHODS = ("cg-parameter", "cg-data", "cholesky-data")


class Operator(Protocol):
    """A BTT map ``F`` (or a QoI map ``Q``) as the inversion uses it."""

    dims: tuple[int, int]
    dimsd: tuple[int, int]

    def matvec(self, m: Array) -> Array: ...
    def rmatvec(self, d: Array) -> Array: ...
    def normal(self, m: Array) -> Array: ...


@dataclass
class MAPResult:
    """A MAP point and how it was found.

    Attributes
    ----------
    m : (Nm, Nt) float64
        The MAP point (posterior mean), in the prior's module.
    method : str
        One of :data:`METHODS`.
    cg : CGResult or None
        Iterations, residual history (in the CG unknowns: ``u`` for
        ``cg-parameter``, ``w`` for ``cg-data``); None for ``cholesky-data``.
    setup_time, solve_time : float
        Seconds offline (forming and factoring) and online (this data set).
    """

    m: Array
    method: str
    cg: CGResult | None
    setup_time: float
    solve_time: float


def misfit_hessian(F: Operator, noise: WhiteNoise, m: Array) -> Array:
    """``F^T Gn^-1 F m``, one fused ``F.normal`` pass when ``Gn = s^2 I``."""
    if noise.std.ndim == 0:
        return F.normal(m) / float(noise.std) ** 2
    return F.rmatvec(noise.inv(F.matvec(m)))


def check_data(d: Array, inner: Inner = dot) -> None:
    """Raise FftmatvecError if the data hold NaN or Inf (decided on ``inner(d, d)``)."""
    if not math.isfinite(inner(d, d)):
        raise FftmatvecError("the data d contain NaN or Inf")


def map_cg_parameter(F: Operator, prior: Prior, noise: WhiteNoise, d: Array, *,
                     inner_m: Inner = dot, inner_d: Inner = dot, **cg_options) -> MAPResult:
    """MAP point by prior-preconditioned CG in whitened parameter space.

    Parameters
    ----------
    F : Operator, dims (Nm, Nt), dimsd (Nd, Nt)
    prior : Prior
    noise : WhiteNoise
    d : (Nd, Nt) float64
    inner_m, inner_d : callable
        Inner products of parameter and data space.
    **cg_options
        Passed to :func:`~fftmatvec.inversion.cg.cg` (``rtol``, ``maxiter``,
        ``callback``, ``checkpoint``, ...); ``rtol`` is relative to
        ``||S F^T Gn^-1 (d - F m0)||``.
    """
    start = time.perf_counter()
    check_data(d, inner_d)
    m0, S = prior.mean, prior.sqrt
    b = S(F.rmatvec(noise.inv(d - F.matvec(m0))))
    res = cg(lambda u: S(misfit_hessian(F, noise, S(u))) + u, b, inner=inner_m, **cg_options)
    return MAPResult(m0 + S(res.x), "cg-parameter", res, 0.0, time.perf_counter() - start)


def map_cg_data(F: Operator, prior: Prior, noise: WhiteNoise, d: Array, *,
                inner_d: Inner = dot, **cg_options) -> MAPResult:
    """MAP point by CG on ``(Gn + F Gp F^T) w = d - F m0``, ``m = m0 + Gp F^T w``.

    Parameters as :func:`map_cg_parameter`; ``rtol`` is relative to
    ``||d - F m0||``.
    """
    start = time.perf_counter()
    check_data(d, inner_d)
    m0 = prior.mean
    res = cg(lambda w: noise.apply(w) + F.matvec(prior.apply(F.rmatvec(w))),
             d - F.matvec(m0), inner=inner_d, **cg_options)
    return MAPResult(m0 + prior.apply(F.rmatvec(res.x)), "cg-data", res, 0.0,
                     time.perf_counter() - start)


def unit_columns(dims: tuple[int, ...], c0: int, c1: int, xp: ModuleType = np) -> Array:
    """Unit vectors ``e_c0 .. e_{c1-1}`` of the flattened ``dims`` space.

    Returns
    -------
    (*dims, c1 - c0) float64, an array of ``xp``
    """
    E = xp.zeros((math.prod(dims), c1 - c0))
    E[xp.arange(c0, c1), xp.arange(c1 - c0)] = 1.0
    return E.reshape(*dims, c1 - c0)


class DataSpaceCholesky:
    """Offline/online MAP solver: ``K = Gn + F Gp F^T = L L^T`` formed once.

    Set-up forms ``K`` (``n = Nd*Nt`` columns, ``batch`` at a time, each batch
    one batched ``F^T``, ``Gp`` and ``F`` application) and factors it; then
    :meth:`solve` costs two triangular solves, one ``F^T`` and one ``Gp``
    product per data set.  Memory: ``n^2`` float64 for ``K``, on the host
    (the products run where the prior's vectors are).

    Parameters
    ----------
    F : Operator, dims (Nm, Nt), dimsd (Nd, Nt)
    prior : Prior
    noise : WhiteNoise
    batch : int
        Right-hand sides per batched product (bounds the work arrays to
        ``batch * (Nm + Nd) * Nt`` numbers).

    Attributes
    ----------
    factor : (L, lower)
        ``scipy.linalg.cho_factor`` output; ``L`` is the lower triangle of the
        array (the upper holds garbage).
    form_time, factor_time : float
        Seconds to form ``K`` and to factor it (``setup_time`` is their sum).
    solve_time : float
        Seconds of the last :meth:`solve`.
    """

    def __init__(self, F: Operator, prior: Prior, noise: WhiteNoise, *,
                 batch: int = 32) -> None:
        if batch < 1:
            raise ConfigError("batch must be >= 1")
        self.F, self.prior, self.noise = F, prior, noise
        start = time.perf_counter()
        n = math.prod(F.dimsd)
        K = np.empty((n, n))
        for c0 in range(0, n, batch):
            c1 = min(c0 + batch, n)
            E = unit_columns(F.dimsd, c0, c1, prior.xp)
            K[:, c0:c1] = to_host(noise.apply(E) + F.matvec(prior.apply(F.rmatvec(E)))).reshape(n, -1)
        self._Fm0 = F.matvec(prior.mean)
        self.form_time = time.perf_counter() - start
        try:  # reads the lower triangle only: rounding asymmetry is harmless
            self.factor = cho_factor(K, lower=True, overwrite_a=True)
        except (LinAlgError, ValueError) as exc:
            raise FftmatvecError(f"data-space matrix Gn + F Gp F^T is not SPD: {exc}") from exc
        self.factor_time = time.perf_counter() - start - self.form_time
        self.solve_time = 0.0

    @property
    def setup_time(self) -> float:
        """Offline seconds (form + factor)."""
        return self.form_time + self.factor_time

    def solve(self, d: Array) -> Array:
        """MAP point for data ``d``.

        Parameters
        ----------
        d : (Nd, Nt) or (Nd, Nt, K) float64, in the prior's module

        Returns
        -------
        (Nm, Nt) or (Nm, Nt, K) float64, in the prior's module
        """
        start = time.perf_counter()
        check_data(d)
        r = to_host(d - bcast(self._Fm0, d))
        w = self.prior.xp.asarray(cho_solve(self.factor, r.reshape(math.prod(self.F.dimsd), -1)).reshape(d.shape))
        m = bcast(self.prior.mean, w) + self.prior.apply(self.F.rmatvec(w))
        self.solve_time = time.perf_counter() - start
        return m


def solve_map(F: Operator, prior: Prior, noise: WhiteNoise, d: Array,
              method: str = "cg-parameter", **options) -> MAPResult:
    """MAP point by ``method`` (one of :data:`METHODS`).

    ``options`` go to :func:`map_cg_parameter`, :func:`map_cg_data` or
    :class:`DataSpaceCholesky` (``batch``).
    """
    if method == "cg-parameter":
        return map_cg_parameter(F, prior, noise, d, **options)
    if method == "cg-data":
        return map_cg_data(F, prior, noise, d, **options)
    if method == "cholesky-data":
        chol = DataSpaceCholesky(F, prior, noise, **options)
        m = chol.solve(d)
        return MAPResult(m, method, None, chol.setup_time, chol.solve_time)
    raise ConfigError(f"unknown MAP method {method!r}; choose one of {', '.join(METHODS)}")
