"""Benchmarks of one operator product on random data: ``F m``, ``F^T d``, or
``F^T F m`` (:meth:`~fftmatvec.operator.BTTOperator.normal`, a conjugate
gradient iteration's product, the two passes in turn).

Reports medians of the whole product (each product waited for; also with the
result written into the caller's array, ``out=``, and as a prepared product,
:meth:`~fftmatvec.operator.BTTOperator.prepare`, the three taking turns in
rounds) and of each stage, the time
per product of products queued back to back, the bandwidth floor
``bytes(Fhat) / copy bandwidth`` measured in the same run, and optionally
the error against a float64 reference and the time of a naive pipeline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .grid import SerialGrid
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
    #: ``F^T F m`` instead: ``precision`` for ``F``, ``adjoint_precision``
    #: (default the same) for ``F^T``.
    normal: bool = False
    adjoint_precision: str | None = None
    reps: int = 10
    check: bool = False
    compare_naive: bool = False
    device: str = "cpu"
    seed: int = 0
    #: Copy bandwidth (bytes/s) for the floor, if already measured on these
    #: ranks (a sweep reuses it across grids of one size); None measures it.
    copy_bandwidth: float | None = None
    #: Seconds of products run back to back before any is timed: the
    #: sustained rate, where a device's power limit slows long runs.
    warmup_s: float = 0.0


def dense_matrix(f: np.ndarray) -> np.ndarray:
    """The dense ``(Nd*Nt, Nm*Nt)`` block-Toeplitz matrix of ``f`` (Nd, Nm, Nt)."""
    nd, nm, nt = f.shape
    # block (i, j) is lower-triangular Toeplitz: entry (t, s) = f[i, j, t - s]
    lag = np.arange(nt)[:, None] - np.arange(nt)[None, :]
    blocks = np.where(lag >= 0, f[:, :, np.clip(lag, 0, None)], 0.0)  # (nd, nm, nt, nt)
    return blocks.transpose(0, 2, 1, 3).reshape(nd * nt, nm * nt)


def reference_normal(f: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, str]:
    """Float64 reference of ``F^T F x``, x (Nm, Nt, K), as :func:`reference_product`."""
    y, _ = reference_product(f, x, adjoint=False)
    return reference_product(f, y, adjoint=True)


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


def random_slab(seed: int, Nd: int, Nm: int, Nt: int, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
    """Slab ``f[I, J, :]`` of the benchmark's random matrix, the same on any
    grid: block row ``i`` comes from the generator seeded ``(seed, 0, i)``."""
    (i0, ni), (j0, nj) = rows, cols
    f = np.empty((ni, nj, Nt))
    for k in range(ni):
        f[k] = np.random.default_rng([seed, 0, i0 + k]).standard_normal((Nm, Nt))[j0:j0 + nj]
    return f


#: Rounds in which the waited-for ways of running a product take turns.
ROUNDS = 5


def _warm_up(fn: Callable[[], Any], seconds: float, synchronize: Callable[[], None],
             agree: Callable[[int], int] = lambda n: n) -> int:
    """Run ``fn`` back to back for about ``seconds``, in turns that each end
    with a synchronisation: one call, then as many as the mean time so far
    says fill the rest (at most as many as ran before, so that a slow first
    call, which may record a graph, does not stop it short).  ``agree``
    makes each turn's count every rank's largest, so that collective calls
    match.  Returns the number of calls, 0 when ``seconds`` is not positive."""
    calls, n, t0 = 0, 1 if seconds > 0 else 0, time.perf_counter()
    while n > 0:
        for _ in range(n):
            fn()
        synchronize()
        calls += n
        elapsed = time.perf_counter() - t0
        n = agree(max(0, int(min(seconds - elapsed, elapsed) * calls / max(elapsed, 1e-9))))  # < 0: overran
    return calls


def _waited_medians(calls: dict[str, Callable[[], Any]], reps: int, synchronize: Callable[[], None],
                    rounds: int = ROUNDS) -> dict[str, float]:
    """Median seconds of each of ``calls`` waited for: ``reps`` timed calls
    each after one warm-up call (workspaces, plans, kernel compilation), the
    calls taking turns in up to ``rounds`` rounds of nearly equal length.  A
    device can get slower as a long run goes on (docs/gpu.md, `K = 16`), so
    taking turns keeps any one way from getting only the start or the end."""
    for fn in calls.values():
        fn()
    synchronize()
    times: dict[str, list[float]] = {name: [] for name in calls}
    rounds = max(1, min(rounds, reps))
    for r in range(rounds):
        for name, fn in calls.items():
            for _ in range(reps // rounds + (r < reps % rounds)):
                t0 = time.perf_counter()
                fn()
                synchronize()
                times[name].append(time.perf_counter() - t0)
    return {name: float(np.median(ts)) for name, ts in times.items()}


def _median_time(fn: Callable[[], Any], reps: int, synchronize: Callable[[], None]) -> float:
    """Median seconds of ``fn`` waited for, ``reps`` timed calls after a warm-up."""
    return _waited_medians({"": fn}, reps, synchronize)[""]


def _back_to_back_time(fn: Callable[[], Any], reps: int, synchronize: Callable[[], None]) -> float:
    """Time per call of ``reps`` calls queued back to back, one synchronisation
    at the end (the rate of an iterative solver that does not wait for each
    product; on a GPU the host work of one call overlaps the device work of
    the one before)."""
    fn()
    synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    synchronize()
    return (time.perf_counter() - t0) / reps


def run_bench(cfg: BenchConfig, grid: Any = None) -> dict[str, Any]:
    """Run one benchmark on ``grid`` (default one process); return a flat dict
    of results (JSON-serialisable), the same on every rank.

    Times are those of the slowest rank: the whole product, each stage and the
    communication (``comm_s``).  The floor is the largest local ``Fhat`` slab
    (``fhat_bytes``) over this rank's copy bandwidth; ``fhat_bytes_total`` is
    the sum over the ranks.  ``F^T F m`` reads its slab twice, once in each
    pass's SBGEMV precision: its floor counts both reads.
    """
    grid = grid if grid is not None else SerialGrid()
    comm = grid.comm
    slowest = (lambda v: v) if comm is None else (lambda v: comm.allreduce(v, op=_mpi_max()))
    prec = parse(cfg.precision)
    adjoint_prec = parse(cfg.adjoint_precision) if cfg.adjoint_precision is not None else prec
    if cfg.adjoint and cfg.normal:
        raise ValueError("run_bench: adjoint and normal exclude each other")
    rows, cols = grid.row_block(cfg.Nd), grid.col_block(cfg.Nm)
    f = random_slab(cfg.seed, cfg.Nd, cfg.Nm, cfg.Nt, rows, cols)
    if cfg.normal:
        code = dict(precision=prec.code, adjoint_precision=adjoint_prec.code)
    else:
        code = dict(adjoint_precision=prec.code) if cfg.adjoint else dict(precision=prec.code)
    t0 = time.perf_counter()
    op = BTTOperator(f, device=cfg.device, grid=grid, shape=(cfg.Nd, cfg.Nm, cfg.Nt), **code)
    setup_s = slowest(time.perf_counter() - t0)
    be = op.backend
    space, n_in = ("data", cfg.Nd) if cfg.adjoint else ("param", cfg.Nm)
    out_space, n_out = ("data", cfg.Nd) if not (cfg.adjoint or cfg.normal) else ("param", cfg.Nm)
    x_host = np.random.default_rng([cfg.seed, 1]).standard_normal((n_in, cfg.Nt, cfg.nrhs))
    start, count = grid.block(space, n_in)
    x = be.asarray(x_host[start:start + count]) if grid.holds(space) else None
    apply = op.normal if cfg.normal else op.rmatvec if cfg.adjoint else op.matvec
    # Fhat as each pass's SBGEMV reads it (F^T F m reads it twice, in each code's precision)
    Fhats = [op.engine.Fhat[p.sbgemv] for p in ((prec, adjoint_prec) if cfg.normal else (prec,))]

    def sync() -> None:
        be.synchronize()
        grid.barrier()

    apply(x)  # the first product sets up workspaces, plans, kernels and the collectives (NCCL
    sync()  # communicators): kept out of comm_s
    calls = {"time": lambda: apply(x)}
    if isinstance(grid, SerialGrid):  # the result written into one array of the caller's (no allocation)
        out = be.empty((n_out, cfg.Nt, cfg.nrhs), np.float64)
        if not cfg.normal:
            calls["into"] = lambda: apply(x, out=out)
        calls["prepared"] = op.prepare(x, adjoint=cfg.adjoint, normal=cfg.normal, out=out)
    agree = (lambda n: n) if comm is None else (lambda n: comm.allreduce(n, op=_mpi_max()))
    warmup_products = _warm_up(lambda: apply(x), cfg.warmup_s, sync, agree)
    grid.reset_comm_stats()
    waited = _waited_medians(calls, cfg.reps, sync)  # reps + 1 products of each; only the first talks
    time_s = slowest(waited["time"])
    comm_s = slowest(grid.comm_seconds / (cfg.reps + 1))
    into_s, prepared_s = waited.get("into"), waited.get("prepared")
    back_to_back_s = slowest(_back_to_back_time(lambda: apply(x), cfg.reps, sync))
    stages = {name: slowest(t) for name, t in _stage_medians(op, x, cfg, be.timer).items()}

    local_fhat_bytes = sum(int(F.nbytes) for F in Fhats)
    fhat_bytes = slowest(local_fhat_bytes)
    fhat_bytes_total = local_fhat_bytes if comm is None else comm.allreduce(local_fhat_bytes)
    if cfg.copy_bandwidth is None:
        bandwidth = be.copy_bandwidth(nbytes=int(min(max(fhat_bytes, 256 << 20), 2 << 30)))
        bandwidth = -slowest(-bandwidth)  # the slowest rank's bandwidth
    else:
        bandwidth = float(cfg.copy_bandwidth)
    floor_s = fhat_bytes / bandwidth
    result: dict[str, Any] = {
        "device": be.name,
        "ranks": grid.size,
        "grid": f"{grid.pr}x{grid.pc}",
        "collectives": getattr(grid, "collectives", "local"),
        "Nm": cfg.Nm,
        "Nd": cfg.Nd,
        "Nt": cfg.Nt,
        "nrhs": cfg.nrhs,
        "precision": prec.code,
        "adjoint": cfg.adjoint,
        "normal": cfg.normal,
        "adjoint_precision": adjoint_prec.code if cfg.normal else None,
        "setup_s": setup_s,
        "warmup_s": cfg.warmup_s,
        "warmup_products": warmup_products,
        "time_s": time_s,
        "time_per_vector_s": time_s / cfg.nrhs,
        "back_to_back_s": back_to_back_s,
        "into_out_s": into_s,
        "prepared_s": prepared_s,
        "stages": stages,
        "comm_s": comm_s,
        "fhat_bytes": fhat_bytes,
        "fhat_bytes_total": fhat_bytes_total,
        "copy_bandwidth_Bps": bandwidth,
        "floor_s": floor_s,
        "floor_ratio": time_s / floor_s,
        "achieved_bandwidth_Bps": fhat_bytes / time_s,
        "sbgemv_bandwidth_ratio": fhat_bytes / stages["sbgemv"] / bandwidth,
    }
    if cfg.check:
        y = _gather(apply(x), grid, out_space, n_out, be)
        if grid.rank == 0:
            f_full = random_slab(cfg.seed, cfg.Nd, cfg.Nm, cfg.Nt, (0, cfg.Nd), (0, cfg.Nm))
            ref, kind = reference_normal(f_full, x_host) if cfg.normal else \
                reference_product(f_full, x_host, cfg.adjoint)
            result["rel_error"] = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
            result["reference"] = kind
        if comm is not None:
            result.update(comm.bcast({k: result[k] for k in ("rel_error", "reference") if k in result}, root=0))
    if cfg.compare_naive and grid.size == 1:
        naive = be.naive_matvec
        if cfg.normal:
            def naive_product():
                return naive(Fhats[1], naive(Fhats[0], x, False), True)
        else:
            def naive_product():
                return naive(Fhats[0], x, cfg.adjoint)
        result["naive_time_s"] = _median_time(naive_product, cfg.reps, be.synchronize)
        result["speedup_vs_naive"] = result["naive_time_s"] / time_s
        nbytes_dense = cfg.Nd * cfg.Nt * cfg.Nm * cfg.Nt * 8
        if be.name == "cpu" and nbytes_dense <= DENSE_LIMIT:
            F = dense_matrix(f)
            X = x_host.reshape(-1, cfg.nrhs)
            dense = (lambda: F.T @ (F @ X)) if cfg.normal else (lambda: F.T @ X) if cfg.adjoint else (lambda: F @ X)
            result["dense_time_s"] = _median_time(dense, cfg.reps, be.synchronize)
    return result


def _stage_medians(op: BTTOperator, x: Any, cfg: BenchConfig, new_timer: Callable[[], Any]) -> dict[str, float]:
    """Median seconds of each stage over ``cfg.reps`` products timed stage by
    stage; for ``F^T F m`` the sum of each stage's medians over its two passes
    (the forward from ``x``, the adjoint from the forward's result)."""
    if not cfg.normal:
        timer = new_timer()
        apply = op.rmatvec if cfg.adjoint else op.matvec
        for _ in range(cfg.reps):
            apply(x, timer=timer)
        return {name: float(np.median(ts)) for name, ts in timer.times.items()}
    forward, adjoint = new_timer(), new_timer()
    for _ in range(cfg.reps):
        op.rmatvec(op.matvec(x, timer=forward), timer=adjoint)
    return {name: float(np.median(forward.times[name])) + float(np.median(adjoint.times.get(name, [0.0])))
            for name in forward.times}


def _gather(y: Any, grid: Any, space: str, n: int, be: Any) -> np.ndarray | None:
    """The whole ``(n, Nt, K)`` result on grid rank 0 from the holders' blocks."""
    from .vector import DistVector

    return DistVector(be.to_host(y), grid, space, n=n, Nt=y.shape[1]).gather(root=0)


def _mpi_max():
    from mpi4py import MPI

    return MPI.MAX
