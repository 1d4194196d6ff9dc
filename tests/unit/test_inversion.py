"""Inversion: priors, noise, CG, the three MAP solvers and QoI bands, against
dense references built here from the Toeplitz blocks and dense Laplacians."""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest
import scipy.fft
from conftest import dense_btt, rel_err

from fftmatvec.backend.arrays import DENSE_DCT_MAX, dctn
from fftmatvec.errors import ConfigError, FftmatvecError
from fftmatvec.inversion import (
    DataSpaceCholesky,
    LowRankPosterior,
    MaternPrior,
    WhiteNoise,
    WhitePrior,
    cg,
    qoi_forecast,
    solve_map,
)
from fftmatvec.inversion.solve import METHODS

Nd, Nq, Nt = 3, 2, 5
SHAPES = {"1d": (9,), "2d": (3, 4)}


# ---------------------------------------------------------------- stand-ins
class DenseBTT:
    """Stand-in for BTTOperator: dims, dimsd, matvec/rmatvec/normal on (n, Nt[, K])."""

    def __init__(self, f: np.ndarray) -> None:
        self.A = dense_btt(f)
        self.dimsd, self.dims = (f.shape[0], f.shape[2]), (f.shape[1], f.shape[2])

    @staticmethod
    def _apply(A, x, shape):
        return (A @ x.reshape(A.shape[1], -1)).reshape(shape + x.shape[2:])

    def matvec(self, m):
        return self._apply(self.A, m, self.dimsd)

    def rmatvec(self, d):
        return self._apply(self.A.T, d, self.dims)

    def normal(self, m):
        return self.rmatvec(self.matvec(m))


def lap_dense(n: int, h: float = 1.0) -> np.ndarray:
    L = np.diag(np.full(n - 1, 1.0), 1) + np.diag(np.full(n - 1, 1.0), -1)
    return (L - np.diag(L.sum(axis=1))) / h**2


def matern_sqrt_dense(prior: MaternPrior, shape, Nt_: int) -> np.ndarray:
    """Dense S (Nm*Nt square, SOTI) from the prior's delta/gamma and dense Laplacians."""
    if len(shape) == 1:
        L = lap_dense(shape[0])
    else:
        L = np.kron(lap_dense(shape[0]), np.eye(shape[1])) + np.kron(np.eye(shape[0]),
                                                                      lap_dense(shape[1]))
    S = np.linalg.inv(prior.delta * np.eye(len(L)) - prior.gamma * L)
    St = np.eye(Nt_) if prior.time is None else np.linalg.inv(
        prior.time.delta * np.eye(Nt_) - prior.time.gamma * lap_dense(Nt_))
    return np.kron(S, St)


def columns(op, n_shape):
    """Dense matrix of a linear map on (…, Nt) arrays, via one batched call."""
    n = int(np.prod(n_shape))
    return op(np.eye(n).reshape(*n_shape, n)).reshape(n, n)


# ---------------------------------------------------------------- problems
def make_prior(kind: str):
    if kind == "white":
        return WhitePrior((9, Nt), std=0.7, mean=0.3), 0.7**2 * np.eye(9 * Nt)
    shape = SHAPES[kind.split("-")[1]]
    tcl = 2.0 if kind.endswith("time") else None
    mean = np.linspace(-1, 1, int(np.prod(shape)))[:, None]
    prior = MaternPrior(shape, Nt, std=1.3, corr_length=2.0, mean=mean, time_corr_length=tcl)
    S = matern_sqrt_dense(prior, shape, Nt)
    return prior, S @ S.T


PRIORS = ["white", "matern-1d", "matern-2d", "matern-2d-time"]


def make_problem(kind: str) -> dict:
    rng = np.random.default_rng(7)
    prior, Gp = make_prior(kind)
    Nm = prior.dims[0]
    decay = np.exp(-np.arange(Nt) / 2.0)
    F = DenseBTT(rng.standard_normal((Nd, Nm, Nt)) * decay)
    Q = DenseBTT(rng.standard_normal((Nq, Nm, Nt)) * decay)
    d_clean = F.matvec(prior.sample(rng))
    # per-entry noise exercises F^T Gn^-1 F, scalar noise the fused F.normal
    noise = (WhiteNoise.relative(d_clean, 0.05, per_entry=True) if kind == "matern-2d"
             else WhiteNoise(0.1))
    d = d_clean + noise.sample(rng, d_clean.shape)
    Gninv = np.diag(1.0 / np.broadcast_to(noise.std**2, d.shape).ravel())
    H = F.A.T @ Gninv @ F.A + np.linalg.inv(Gp)
    m_ref = np.linalg.solve(H, F.A.T @ Gninv @ d.ravel() + np.linalg.solve(Gp, prior.mean.ravel()))
    Gpost = np.linalg.inv(H)
    return dict(F=F, Q=Q, prior=prior, noise=noise, d=d, Gp=Gp, Gninv=Gninv,
                m_ref=m_ref.reshape(prior.dims), Gpost=Gpost)


@pytest.fixture(params=PRIORS)
def problem(request):
    return make_problem(request.param)


# ---------------------------------------------------------------- stand-in check
def test_stand_in_is_causal_convolution():
    rng = np.random.default_rng(0)
    f, m = rng.standard_normal((Nd, 4, Nt)), rng.standard_normal((4, Nt))
    y = np.array([sum(np.convolve(f[i, j], m[j])[:Nt] for j in range(4)) for i in range(Nd)])
    np.testing.assert_allclose(DenseBTT(f).matvec(m), y, rtol=1e-13, atol=1e-13)


# ---------------------------------------------------------------- priors
@pytest.mark.parametrize("kind", PRIORS)
def test_prior_sqrt_squares_to_covariance(kind):
    prior, Gp = make_prior(kind)
    S = columns(prior.sqrt, prior.dims)
    np.testing.assert_allclose(S, S.T, atol=1e-13 * abs(S).max())
    np.testing.assert_allclose(S @ S.T, Gp, rtol=1e-10, atol=1e-12 * abs(Gp).max())
    np.testing.assert_allclose(columns(prior.apply, prior.dims), Gp, rtol=1e-10,
                               atol=1e-12 * abs(Gp).max())
    np.testing.assert_allclose(columns(prior.inv, prior.dims) @ Gp, np.eye(len(Gp)), atol=1e-9)


@pytest.mark.parametrize("shape, axes", [((40, 75, 7), (0, 1)), ((300, 3, 2), (0, 1)), ((5, 257, 2), (0, 1)),
                                         ((256, 3), (0,)), ((9,), (0,))])
def test_dctn_equals_scipy_on_short_and_long_axes(shape, axes):
    # axes up to DENSE_DCT_MAX["numpy"] (256) points go through the DCT matrix, longer ones through the FFT
    x = np.random.default_rng(sum(shape)).standard_normal(shape)
    y = dctn(x, axes)
    np.testing.assert_allclose(y, scipy.fft.dctn(x, type=2, norm="ortho", axes=axes), atol=1e-13 * abs(y).max())
    np.testing.assert_allclose(dctn(y, axes, inverse=True), x, atol=1e-13 * abs(x).max())


def test_matern_on_a_line_longer_than_the_dense_transform():
    n = DENSE_DCT_MAX["numpy"] + 7
    prior = MaternPrior(n, 2, std=0.9, corr_length=20.0)
    S = columns(prior.sqrt, prior.dims)
    np.testing.assert_allclose(S, matern_sqrt_dense(prior, (n,), 2), rtol=1e-10, atol=1e-12 * abs(S).max())
    np.testing.assert_allclose(columns(prior.inv, prior.dims) @ S @ S, np.eye(2 * n), atol=1e-8)


@pytest.mark.parametrize("shape", SHAPES.values())
def test_matern_is_spd_smooth_and_scaled(shape):
    std, rho = 1.3, 2.0
    prior = MaternPrior(shape, 4, std=std, corr_length=rho)
    Gp = columns(prior.apply, prior.dims)
    assert np.allclose(Gp, Gp.T, rtol=0, atol=1e-14 * abs(Gp).max())
    assert np.linalg.eigvalsh(Gp).min() > 0
    assert prior.delta / prior.gamma == pytest.approx(8 * (2 - len(shape) / 2) / rho**2)
    Gs = Gp[::4, ::4]  # time step 0 of every point: the spatial covariance
    c = np.ravel_multi_index(tuple(s // 2 for s in shape), shape)
    assert Gs[c, c] == pytest.approx(std**2, rel=1e-12)
    corr = Gs / np.sqrt(np.outer(np.diag(Gs), np.diag(Gs)))
    # along the last grid axis from the centre: positive, strictly decaying
    row = corr[c, c - shape[-1] // 2: c - shape[-1] // 2 + shape[-1]][shape[-1] // 2:]
    assert np.all(row > 0) and np.all(np.diff(row) < 0)
    assert np.all(np.abs(Gp[::4, 1::4]) < 1e-14)  # independent in time


def test_matern_time_factor_correlates_time_steps():
    prior = MaternPrior(5, 6, corr_length=2.0, time_corr_length=3.0)
    Gp = columns(prior.apply, prior.dims)
    Gt = Gp[2 * 6:3 * 6, 2 * 6:3 * 6]  # centre point, all times
    corr = Gt[3] / np.sqrt(Gt[3, 3] * np.diag(Gt))
    assert np.all(np.diff(corr[3:]) < 0) and np.all(np.diff(corr[:4]) > 0)


def test_prior_samples_have_prior_covariance():
    prior, Gp = make_prior("matern-2d-time")
    X = prior.sample(np.random.default_rng(1), K=40000)
    assert X.shape == (*prior.dims, 40000)
    C = np.cov(X.reshape(-1, X.shape[-1]))
    np.testing.assert_allclose(X.mean(axis=-1), prior.mean, atol=0.05)
    assert np.abs(C - Gp).max() < 0.05 * Gp.max()


# ---------------------------------------------------------------- noise
def test_noise_relative_and_inverse():
    d = np.arange(1.0, 13.0).reshape(3, 4)
    n = WhiteNoise.relative(d, 0.1)
    assert n.std == pytest.approx(0.1 * np.sqrt(np.mean(d**2)))
    p = WhiteNoise.relative(d, 0.1, per_entry=True)
    np.testing.assert_allclose(p.apply(np.ones((3, 4, 2)))[..., 1], (0.1 * d) ** 2)
    np.testing.assert_allclose(p.inv(p.apply(d)), d)
    with pytest.raises(FftmatvecError, match="> 0"):
        WhiteNoise.relative(np.zeros((3, 4)), 0.1, per_entry=True)


# ---------------------------------------------------------------- CG
def spd_system(n=40, seed=3):
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (U * np.logspace(0, 3, n)) @ U.T
    A += np.diag(rng.uniform(1, 50, n))  # diagonal worth a Jacobi preconditioner
    return A, rng.standard_normal((n // 4, 4))


def test_cg_solves_with_relative_tolerance_and_reports():
    A, b = spd_system()
    calls = []
    res = cg(lambda x: (A @ x.ravel()).reshape(x.shape), b, rtol=1e-10,
             M=lambda r: r / np.diag(A).reshape(r.shape), callback=lambda *a: calls.append(a))
    x_ref = np.linalg.solve(A, b.ravel()).reshape(b.shape)
    assert res.converged and rel_err(res.x, x_ref) < 1e-7
    assert res.residuals[-1] <= 1e-10 * res.bnorm < res.residuals[-2]
    assert len(res.residuals) == res.iterations + 1 == len(calls) + 1
    assert [c[0] for c in calls] == list(range(1, res.iterations + 1))
    assert all(a[2] <= b[2] for a, b in itertools.pairwise(calls))
    short = cg(lambda x: (A @ x.ravel()).reshape(x.shape), b, rtol=1e-10, maxiter=3)
    assert not short.converged and short.iterations == 3


def test_cg_checkpoint_resume_equals_uninterrupted(tmp_path):
    A, b = spd_system()
    op = lambda x: (A @ x.ravel()).reshape(x.shape)  # noqa: E731
    M = lambda r: r / np.diag(A).reshape(r.shape)  # noqa: E731
    full = cg(op, b, M=M, rtol=1e-12)
    assert full.iterations > 10

    class Crash(Exception):
        pass

    def crash(it, rnorm, t):
        if it == 8:
            raise Crash

    ck = tmp_path / "cg.npz"
    with pytest.raises(Crash):
        cg(op, b, M=M, rtol=1e-12, checkpoint=ck, checkpoint_every=3, callback=crash)
    assert [p.name for p in tmp_path.iterdir()] == ["cg.npz"]  # no temp file left
    with np.load(ck) as z:
        assert int(z["iteration"]) == 6
    resumed = cg(op, b, M=M, rtol=1e-12, resume=ck, checkpoint=ck, checkpoint_every=3)
    np.testing.assert_array_equal(resumed.x, full.x)
    assert resumed.residuals == full.residuals and resumed.iterations == full.iterations
    with pytest.raises(FftmatvecError, match="another right-hand side"):
        cg(op, 2 * b, M=M, resume=ck)
    with pytest.raises(FftmatvecError, match="cannot resume"):
        cg(op, b, resume=tmp_path / "missing.npz")


def test_cg_checkpoints_by_time(tmp_path):
    A, b = spd_system()
    op = lambda x: (A @ x.ravel()).reshape(x.shape)  # noqa: E731
    full = cg(op, b, rtol=1e-12)
    seen = []

    def record(it, rnorm, t):  # the checkpoint of an iteration is written before its callback
        with np.load(ck) as z:
            seen.append(int(z["iteration"]))

    ck = tmp_path / "every.npz"
    cg(op, b, rtol=1e-12, checkpoint=ck, checkpoint_seconds=1e-9, callback=record)  # always due
    assert seen == list(range(1, full.iterations + 1))
    rare = tmp_path / "rare.npz"
    cg(op, b, rtol=1e-12, checkpoint=rare, checkpoint_seconds=3600.0)  # never due in this run
    assert not rare.exists()
    resumed = cg(op, b, rtol=1e-12, resume=ck)  # a time-based checkpoint resumes like any other
    np.testing.assert_array_equal(resumed.x, full.x)
    for bad in (dict(checkpoint=ck, checkpoint_seconds=-1.0), dict(checkpoint=ck, checkpoint_seconds=float("nan")),
                dict(checkpoint_seconds=5.0)):
        with pytest.raises(ConfigError, match="checkpoint"):
            cg(op, b, **bad)


def test_cg_detects_nan_and_indefinite():
    _, b = spd_system()
    with pytest.raises(FftmatvecError, match="NaN"):
        cg(lambda x: x, np.where(b > 1, np.nan, b))
    calls = iter(range(100))
    with pytest.raises(FftmatvecError, match="NaN or Inf in A p at iteration 3"):
        cg(lambda x: x * (np.nan if next(calls) == 2 else 1.0) + 0.1 * np.roll(x, 1), b)
    with pytest.raises(FftmatvecError, match="not positive definite"):
        cg(lambda x: -x, b)


# ---------------------------------------------------------------- MAP
@pytest.mark.parametrize("method", METHODS)
def test_map_matches_dense_normal_equations(problem, method):
    res = solve_map(problem["F"], problem["prior"], problem["noise"], problem["d"], method,
                    **({} if method == "cholesky-data" else {"rtol": 1e-13}))
    assert res.method == method
    assert rel_err(res.m, problem["m_ref"]) < 1e-8
    if res.cg is not None:
        assert res.cg.converged


def test_map_methods_agree_and_cholesky_is_reusable(problem):
    F, prior, noise, d = (problem[k] for k in ("F", "prior", "noise", "d"))
    ms = [solve_map(F, prior, noise, d, m, **({} if m == "cholesky-data" else {"rtol": 1e-13})).m
          for m in METHODS]
    assert rel_err(ms[0], ms[1]) < 1e-9 and rel_err(ms[0], ms[2]) < 1e-9
    chol = DataSpaceCholesky(F, prior, noise, batch=4)  # 15 columns in 4 batches
    D = np.stack([d, 2 * d, -d], axis=-1)
    Mb = chol.solve(D)
    for k in range(3):
        np.testing.assert_allclose(Mb[..., k], chol.solve(D[..., k]), rtol=1e-12, atol=1e-12)
    assert chol.form_time > 0 and chol.factor_time > 0 and chol.solve_time > 0


@pytest.mark.parametrize("method", METHODS)
def test_map_nan_in_data_raises(problem, method):
    d = problem["d"].copy()
    d[1, 2] = np.nan
    with pytest.raises(FftmatvecError, match="data d contain NaN"):
        solve_map(problem["F"], problem["prior"], problem["noise"], d, method)


def test_unknown_method_is_a_config_error(problem):
    with pytest.raises(FftmatvecError, match="cholesky-data"):
        solve_map(problem["F"], problem["prior"], problem["noise"], problem["d"], "lsqr")


# ---------------------------------------------------------------- QoI
def dense_qoi_std(problem):
    Qd = problem["Q"].A
    return np.sqrt(np.diag(Qd @ problem["Gpost"] @ Qd.T)).reshape(Nq, Nt)


def test_qoi_exact_from_cholesky(problem):
    F, Q, prior, noise = (problem[k] for k in ("F", "Q", "prior", "noise"))
    fc = qoi_forecast(Q, problem["m_ref"], DataSpaceCholesky(F, prior, noise), batch=3)
    np.testing.assert_allclose(fc.std, dense_qoi_std(problem), rtol=1e-10)
    np.testing.assert_allclose(fc.mean, Q.matvec(problem["m_ref"]), rtol=1e-13)
    np.testing.assert_allclose(fc.upper - fc.lower, 2 * 1.96 * fc.std)


def test_qoi_low_rank_full_and_truncated(problem):
    F, Q, prior, noise = (problem[k] for k in ("F", "Q", "prior", "noise"))
    std_ref = dense_qoi_std(problem)
    full = LowRankPosterior(F, prior, noise, rank=Nd * Nt, oversampling=5, seed=5, batch=7)
    np.testing.assert_allclose(qoi_forecast(Q, problem["m_ref"], full).std, std_ref, rtol=1e-8)

    # truncated: sensors of gains 1, 0.1, 0.01 give a spectral gap after 5 eigenvalues;
    # 5 + 5 test vectors (< 15 = rank) recover the dense rank-5 truncation
    F = copy.copy(F)
    F.A = F.A * np.repeat([1.0, 1e-1, 1e-2], Nt)[:, None]
    S = columns(prior.sqrt, prior.dims)
    lam, V = np.linalg.eigh(S @ F.A.T @ problem["Gninv"] @ F.A @ S)
    lam, V = lam[::-1][:5], V[:, ::-1][:, :5]
    Gpost_r = S @ (np.eye(len(S)) - (V * (lam / (1 + lam))) @ V.T) @ S
    std_r = np.sqrt(np.diag(Q.A @ Gpost_r @ Q.A.T)).reshape(Nq, Nt)
    low = LowRankPosterior(F, prior, noise, rank=5, oversampling=5, seed=6)
    np.testing.assert_allclose(low.eigenvalues, lam, rtol=1e-3)
    np.testing.assert_allclose(qoi_forecast(Q, problem["m_ref"], low).std, std_r, rtol=1e-2)


def test_time_invariant_prior_variance_from_nq_adjoint_products():
    """diag(Q Gp Q^T) from one adjoint product per QoI row, for priors whose
    S acts on each time step alike, against the dense product; priors that
    vary or correlate in time are not taken for such."""
    from fftmatvec.inversion.qoi import time_invariant_prior_variance

    rng = np.random.default_rng(11)
    Q = DenseBTT(rng.standard_normal((Nq, 9, Nt)))
    for prior in (WhitePrior((9, Nt), std=rng.uniform(0.5, 2.0, 9)), MaternPrior(9, Nt, corr_length=2.0)):
        assert prior.time_invariant
        Gp = columns(prior.apply, prior.dims)
        dense = np.diag(Q.A @ Gp @ Q.A.T).reshape(Nq, Nt)
        calls = []
        Q.rmatvec = lambda E, rmatvec=Q.rmatvec: calls.append(E.shape[-1]) or rmatvec(E)
        np.testing.assert_allclose(time_invariant_prior_variance(Q, prior, batch=1), dense, rtol=1e-12)
        assert calls == [1] * Nq  # Nq products, not Nq * Nt
        del Q.rmatvec
    assert not WhitePrior((9, Nt), std=rng.uniform(0.5, 2.0, (9, Nt))).time_invariant
    assert not MaternPrior(9, Nt, corr_length=2.0, time_corr_length=2.0).time_invariant


def test_real_btt_operator_gives_the_same_map_and_bands():
    from fftmatvec import BTTOperator

    P = make_problem("matern-2d-time")
    rng = np.random.default_rng(2)
    f = rng.standard_normal((Nd, P["prior"].dims[0], Nt))
    F, Fd = BTTOperator(f), DenseBTT(f)
    args = (P["prior"], P["noise"], P["d"])
    for method in METHODS:
        opts = {} if method == "cholesky-data" else {"rtol": 1e-13}
        m, m_d = (solve_map(op, *args, method, **opts).m for op in (F, Fd))
        assert rel_err(m, m_d) < 1e-10
    std = qoi_forecast(P["Q"], P["m_ref"], DataSpaceCholesky(F, *args[:2])).std
    std_d = qoi_forecast(P["Q"], P["m_ref"], DataSpaceCholesky(Fd, *args[:2])).std
    np.testing.assert_allclose(std, std_d, rtol=1e-12)
