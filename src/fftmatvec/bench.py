"""Benchmarks of one operator product on random data.

Reports medians of the whole product and of each stage, the bandwidth floor
``bytes(Fhat) / copy bandwidth`` measured in the same run, and optionally
the error against a float64 reference and the time of a naive pipeline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .operator import BTTOperator
from .precision import parse

#: Largest dense ``F`` (bytes) built for a reference or a dense-matvec timing.
DENSE_LIMIT = 1 << 30


@dataclass
class BenchConfig:
    Nm: int
    Nd: int
    Nt: int
    nrhs: int = 1
    precision: str = "ddddd"
    adjoint: bool = False
    reps: int = 10
    check: bool = False
    compare_naive: bool = False
    device: str = "cpu"
    seed: int = 0


def dense_matrix(f: np.ndarray) -> np.ndarray:
    """The dense ``(Nd*Nt, Nm*Nt)`` block-Toeplitz matrix of ``f`` (Nd, Nm, Nt)."""
    nd, nm, nt = f.shape
    # block (i, j) is lower-triangular Toeplitz: entry (t, s) = f[i, j, t - s]
    lag = np.arange(nt)[:, None] - np.arange(nt)[None, :]
    blocks = np.where(lag >= 0, f[:, :, np.clip(lag, 0, None)], 0.0)  # (nd, nm, nt, nt)
    return blocks.transpose(0, 2, 1, 3).reshape(nd * nt, nm * nt)


def reference_product(f: np.ndarray, x: np.ndarray, adjoint: bool) -> tuple[np.ndarray, str]:
    """Float64 reference of ``F x`` or ``F^T x`` for x (n, Nt, K), independent of
    the operator's code path: the dense matrix when it fits in
    :data:`DENSE_LIMIT`, else a float64 NumPy FFT and ``einsum``.

    Returns the product and ``"dense"`` or ``"fft64"``.
    """
    nd, nm, nt = f.shape
    K = x.shape[2]
    if (nd * nt) * (nm * nt) * 8 <= DENSE_LIMIT:
        F = dense_matrix(f)
        A = F.T if adjoint else F
        out = (A @ x.reshape(-1, K)).reshape(nm if adjoint else nd, nt, K)
        return out, "dense"
    return naive_numpy(np.fft.rfft(f, n=2 * nt, axis=-1).transpose(2, 0, 1), x, adjoint), "fft64"


def naive_numpy(Fhat: np.ndarray, x: np.ndarray, adjoint: bool) -> np.ndarray:
    """The naive CPU pipeline: ``np.fft.rfft``, per-frequency ``einsum``, ``irfft``.

    Fhat : (Nf, nd, nm) complex.  x : (n, Nt, K) SOTI.  No plan or buffer reuse.
    """
    nt = x.shape[1]
    x_hat = np.fft.rfft(x, n=2 * nt, axis=1)  # (n, Nf, K)
    if adjoint:
        y_hat = np.einsum("kij,ikb->jkb", Fhat.conj(), x_hat)
    else:
        y_hat = np.einsum("kij,jkb->ikb", Fhat, x_hat)
    return np.fft.irfft(y_hat, n=2 * nt, axis=1)[:, :nt]


def _median_time(fn: Callable[[], Any], reps: int, synchronize: Callable[[], None]) -> float:
    fn()  # warm-up: workspaces, plans, kernel compilation
    synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        synchronize()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def run_bench(cfg: BenchConfig) -> dict[str, Any]:
    """Run one benchmark; return a flat dict of results (JSON-serialisable)."""
    rng = np.random.default_rng(cfg.seed)
    prec = parse(cfg.precision)
    f = rng.standard_normal((cfg.Nd, cfg.Nm, cfg.Nt))
    code = dict(adjoint_precision=cfg.precision) if cfg.adjoint else dict(precision=cfg.precision)
    t0 = time.perf_counter()
    op = BTTOperator(f, device=cfg.device, **code)
    setup_s = time.perf_counter() - t0
    be = op.backend
    n_in = cfg.Nd if cfg.adjoint else cfg.Nm
    x_host = rng.standard_normal((n_in, cfg.Nt, cfg.nrhs))
    x = be.asarray(x_host)
    apply = op.rmatvec if cfg.adjoint else op.matvec
    Fhat = op.engine.Fhat[prec.sbgemv]

    time_s = _median_time(lambda: apply(x), cfg.reps, be.synchronize)
    timer = be.timer()
    for _ in range(cfg.reps):
        apply(x, timer=timer)
    stages = {name: float(np.median(ts)) for name, ts in timer.times.items()}

    fhat_bytes = int(Fhat.nbytes)
    bandwidth = be.copy_bandwidth(nbytes=int(min(max(fhat_bytes, 256 << 20), 2 << 30)))
    floor_s = fhat_bytes / bandwidth
    result: dict[str, Any] = {
        "device": be.name,
        "Nm": cfg.Nm,
        "Nd": cfg.Nd,
        "Nt": cfg.Nt,
        "nrhs": cfg.nrhs,
        "precision": prec.code,
        "adjoint": cfg.adjoint,
        "setup_s": setup_s,
        "time_s": time_s,
        "time_per_vector_s": time_s / cfg.nrhs,
        "stages": stages,
        "fhat_bytes": fhat_bytes,
        "copy_bandwidth_Bps": bandwidth,
        "floor_s": floor_s,
        "floor_ratio": time_s / floor_s,
        "achieved_bandwidth_Bps": fhat_bytes / time_s,
        "sbgemv_bandwidth_ratio": fhat_bytes / stages["sbgemv"] / bandwidth,
    }
    if cfg.check:
        y = be.to_host(apply(x))
        ref, kind = reference_product(f, x_host, cfg.adjoint)
        result["rel_error"] = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
        result["reference"] = kind
    if cfg.compare_naive:
        naive = be.naive_matvec
        result["naive_time_s"] = _median_time(lambda: naive(Fhat, x, cfg.adjoint), cfg.reps, be.synchronize)
        result["speedup_vs_naive"] = result["naive_time_s"] / time_s
        nbytes_dense = cfg.Nd * cfg.Nt * cfg.Nm * cfg.Nt * 8
        if be.name == "cpu" and nbytes_dense <= DENSE_LIMIT:
            F = dense_matrix(f)
            X = x_host.reshape(-1, cfg.nrhs)
            dense = (lambda: F.T @ X) if cfg.adjoint else (lambda: F @ X)
            result["dense_time_s"] = _median_time(dense, cfg.reps, be.synchronize)
    return result
