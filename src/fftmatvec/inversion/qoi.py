"""QoI forecasts ``Q m_map`` with posterior standard deviations and 95% bands.

The posterior covariance is ``Gpost = Gp - Gp F^T K^-1 F Gp`` with
``K = Gn + F Gp F^T``, so for every QoI entry ``e`` (``Q`` has dims
``(Nm, Nt)``, dimsd ``(Nq, Nt)``)

    var_e = e^T Q Gp Q^T e - (reduction by the data).

Two ways to get the reduction:

* exact, from :class:`~fftmatvec.inversion.solve.DataSpaceCholesky`
  (``K = L L^T``): ``||L^-1 F Gp Q^T e||^2``;
* low rank, from :class:`LowRankPosterior`: the prior-preconditioned misfit
  Hessian ``Ht = S F^T Gn^-1 F S ~ V diag(lam) V^T`` gives
  ``Gpost ~ S (I - V diag(lam / (1 + lam)) V^T) S`` and the reduction
  ``sum_i lam_i / (1 + lam_i) (e^T Q S v_i)^2``.  Dropping eigenpairs only
  overestimates the variance.

Vectors live in the prior's module (``prior.xp``); the small dense matrices
(Gram matrices, their eigenvectors, the Cholesky factor) on the host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular

from fftmatvec.backend.arrays import array_module, to_host
from fftmatvec.conditioning import gaussian_rows
from fftmatvec.errors import ConfigError
from fftmatvec.inversion.cg import gram as plain_gram
from fftmatvec.inversion.noise import WhiteNoise
from fftmatvec.inversion.prior import Array, Prior
from fftmatvec.inversion.solve import DataSpaceCholesky, Operator, misfit_hessian, unit_columns

Gram = Callable[[Array, Array], np.ndarray]
Z95 = 1.96

#: Key of :class:`LowRankPosterior`'s test vectors, apart from the precision probes' keys.
_TEST_VECTORS_KEY = 2 << 20


@dataclass
class QoIForecast:
    """Predicted QoI time series with its posterior uncertainty.

    Attributes
    ----------
    mean : (Nq, Nt) float64
        ``Q m_map``.
    std : (Nq, Nt) float64
        Posterior standard deviation of each entry.
    """

    mean: Array
    std: Array

    @property
    def lower(self) -> Array:
        """Lower end of the 95% band, ``mean - 1.96 std``."""
        return self.mean - Z95 * self.std

    @property
    def upper(self) -> Array:
        """Upper end of the 95% band, ``mean + 1.96 std``."""
        return self.mean + Z95 * self.std


def apply_batched(fun: Callable[[Array], Array], X: Array, batch: int) -> Array:
    """``fun`` applied to ``X (..., k)`` in column chunks of ``batch``
    (bounds the work arrays of ``fun``), results stacked on the last axis."""
    xp = array_module(X)
    return xp.concatenate([fun(xp.ascontiguousarray(X[..., c:c + batch]))
                           for c in range(0, X.shape[-1], batch)], axis=-1)


def orthonormalize(Y: Array, gram: Gram = plain_gram) -> Array:
    """Orthonormal basis of the column space of ``Y (..., k)``.

    Two passes of ``Y <- Y V diag(w)^{-1/2}`` with ``gram(Y, Y) = V diag(w) V^T``
    (needs only block inner products, so it runs distributed as it is);
    directions with ``w < 1e-14 max(w)`` (singular values below ~1e-7 of the
    largest) are dropped.

    Returns
    -------
    (..., k') float64, ``k' <= k``, ``gram(Q, Q) = I`` to rounding
    """
    xp = array_module(Y)
    for _ in range(2):
        w, V = np.linalg.eigh(gram(Y, Y))
        keep = w > 1e-14 * w.max(initial=0.0)
        Y = Y @ xp.asarray(V[:, keep] / np.sqrt(w[keep]))
    return Y


def double_pass(H: Callable[[Array], Array], Omega: Array, rank: int, *,
                gram: Gram = plain_gram, batch: int = 32) -> tuple[Array, Array]:
    """Randomized double-pass eigensolver (Halko et al. 2011, alg. 5.3).

    Parameters
    ----------
    H : callable, (..., k) -> (..., k)
        Symmetric operator, applied to batches of columns.
    Omega : (..., rank + oversampling) float64
        Random test vectors.
    rank : int
        Eigenpairs to keep.
    gram : callable
        Block inner product.
    batch : int
        Columns per application of ``H``.

    Returns
    -------
    lam : (r,) float64, descending, ``r <= rank``
    V : (..., r) float64, orthonormal eigenvectors
    """
    B = orthonormalize(apply_batched(H, Omega, batch), gram)
    if B.shape[-1] == 0:  # H Omega == 0
        return np.zeros(0), B
    T = gram(B, apply_batched(H, B, batch))
    lam, U = np.linalg.eigh(0.5 * (T + T.T))
    order = np.argsort(lam)[::-1][:rank]
    return lam[order], B @ array_module(B).asarray(U[:, order])


class LowRankPosterior:
    """Low-rank posterior from the prior-preconditioned misfit Hessian.

    ``Ht = S F^T Gn^-1 F S`` is approximated by its ``rank`` leading
    eigenpairs, found by :func:`double_pass` with Gaussian test vectors
    (``2 (rank + oversampling)`` batched applications of ``Ht``).

    Parameters
    ----------
    F : Operator, dims (Nm, Nt), dimsd (Nd, Nt)
    prior : Prior
    noise : WhiteNoise
    rank : int
        At most ``Nd*Nt`` eigenvalues are nonzero: that rank is exact.
    oversampling : int
    seed : int
        Fixes the Gaussian test vectors: the same on every device and grid
        (:func:`~fftmatvec.conditioning.gaussian_rows`, drawn in threads).
    gram : callable
        Block inner product of parameter space.
    batch : int
        Columns per batched product.

    Attributes
    ----------
    eigenvalues : (r,) float64, NumPy
    eigenvectors : (Nm, Nt, r) float64, in the prior's module
    """

    def __init__(self, F: Operator, prior: Prior, noise: WhiteNoise, rank: int, *,
                 oversampling: int = 10, seed: int = 0, gram: Gram = plain_gram, batch: int = 32) -> None:
        if rank < 1 or oversampling < 0:
            raise ConfigError("rank must be >= 1 and oversampling >= 0")
        self.F, self.prior = F, prior
        (Nm, Nt), k = F.dims, rank + oversampling
        Omega = gaussian_rows((seed, _TEST_VECTORS_KEY), 0, Nm, Nt * k, prior.xp).reshape(Nm, Nt, k)
        self.eigenvalues, self.eigenvectors = double_pass(
            lambda X: prior.sqrt(misfit_hessian(F, noise, prior.sqrt(X))),
            Omega, rank, gram=gram, batch=batch)


def time_invariant_prior_variance(Q: Operator, prior: Prior, batch: int = 32) -> Array:
    """Prior variance ``diag(Q Gp Q^T)`` of every QoI entry, ``(Nq, Nt)``, for a
    prior whose square root acts on each time step alike (``S = Ss kron I``,
    ``prior.time_invariant``), from ``Nq`` adjoint products instead of
    ``Nq*Nt``.

    ``Q`` is block lower-triangular Toeplitz with blocks ``q_i(tau)`` (row
    ``i`` of its block at lag ``tau``), so ``var(i, t) = sum_{tau <= t}
    ||Ss q_i(tau)||^2``; ``Q^T`` of the unit vector at ``(i, Nt - 1)`` holds
    ``q_i(Nt - 1 - s)`` at time ``s``: every lag of row ``i`` at once.
    """
    Nq, Nt = Q.dimsd
    xp = prior.xp
    last = xp.zeros((Nq, Nt, Nq))
    last[xp.arange(Nq), Nt - 1, xp.arange(Nq)] = 1.0
    rows = apply_batched(lambda E: prior.sqrt(Q.rmatvec(E)), last, batch)  # (Nm, Nt, Nq)
    per_lag = (rows**2).sum(axis=0)[::-1]  # (Nt, Nq): ||Ss q_i(tau)||^2 by lag tau
    return xp.cumsum(per_lag, axis=0).T


def qoi_forecast(Q: Operator, m_map: Array, posterior: DataSpaceCholesky | LowRankPosterior,
                 *, batch: int = 32) -> QoIForecast:
    """QoI mean ``Q m_map`` and posterior standard deviation.

    Parameters
    ----------
    Q : Operator, dims (Nm, Nt), dimsd (Nq, Nt)
    m_map : (Nm, Nt) float64, in the prior's module
    posterior : DataSpaceCholesky (exact) or LowRankPosterior
    batch : int
        QoI entries per batched product (``Nq*Nt`` entries in all).

    Returns
    -------
    QoIForecast, in the prior's module
    """
    prior, n = posterior.prior, Q.dimsd[0] * Q.dimsd[1]
    xp = prior.xp
    exact = isinstance(posterior, DataSpaceCholesky)
    if prior.time_invariant and not exact:
        var = time_invariant_prior_variance(Q, prior, batch)
    else:  # Gp Q^T e of every QoI entry e (the exact posterior needs those vectors)
        var = xp.empty(n)
        for c0 in range(0, n, batch):
            c1 = min(c0 + batch, n)
            Y = prior.apply(Q.rmatvec(unit_columns(Q.dimsd, c0, c1, xp)))
            var[c0:c1] = Q.matvec(Y).reshape(n, -1)[xp.arange(c0, c1), xp.arange(c1 - c0)]
            if exact:
                FY = to_host(posterior.F.matvec(Y)).reshape(-1, c1 - c0)
                var[c0:c1] -= xp.asarray((solve_triangular(posterior.factor[0], FY, lower=True)**2).sum(axis=0))
        var = var.reshape(Q.dimsd)
    if not exact and posterior.eigenvalues.size:
        lam = posterior.eigenvalues
        W = apply_batched(lambda V: Q.matvec(prior.sqrt(V)), posterior.eigenvectors, batch)
        var -= (W**2) @ xp.asarray(lam / (1.0 + lam))
    return QoIForecast(Q.matvec(m_map), xp.sqrt(xp.maximum(var, 0.0)))
